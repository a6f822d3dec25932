"""Rollout evaluation of EGNO/EGNN models on the test windows of an MD17-layout file (``geomol simulate molecule``).

:func:`md17_test_table` builds the same table for a shipped card (``scripts/ship_md_models.py md17``) and for the
all-molecule comparison with the baselines (``benchmarks/md17_baselines.py``): the models, no motion, linear
extrapolation and the reference MD on the MD17 split's test starts (:class:`~geomol.data.datasets.trajectories.md17.MD17Dataset`),
heavy atoms matched to the first model's molecule by the molecular graph (a file with its atoms in another order
is read correctly; another molecule is refused), bonds and elements from that protocol. MSE in Å², bond errors in Å.
"""
from __future__ import annotations

from pathlib import Path


__all__ = ["md17_file", "md17_test_table"]


def md17_file(data_dir: str | Path, molecule: str) -> Path:
    """``data_dir/md17_<molecule>.npz`` (the layout ``geomol simulate molecule --out data_dir`` writes)."""
    return Path(data_dir) / f"md17_{molecule}.npz"


def md17_test_table(models: dict, molecule: str, data_dir: str | Path, *, restore_bonds: bool = False,
                    progress: bool = True):
    """:class:`~geomol.inference.dynamics.rollout_evaluation.RolloutTable` on the test windows of ``md17_<molecule>.npz``.

    Args:
        models: {row name: model} (loaded models or references
            :func:`~geomol.inference.loading.load_model` accepts); the first one's protocol gives the heavy atoms'
            bonds and elements.
        molecule: file stem after ``md17_``. data_dir: the folder of the npz.
        restore_bonds: also rows with the bond-restoring projection. progress: a progress bar.
    """
    from geomol.data.chemistry.covalent_graph import CovalentGraph
    from geomol.data.datasets.trajectories.md17 import MD17Dataset
    from geomol.inference.loading import load_model
    from geomol.inference.dynamics.molecule_inputs import MoleculeInput
    from geomol.inference.dynamics.rollout_evaluation import evaluate_rollouts

    path = md17_file(data_dir, molecule)
    test = MD17Dataset(path, "test")
    loaded = {name: load_model(model) for name, model in models.items()}  # loaded models pass through
    protocol = next(iter(loaded.values())).protocol  # the heavy atoms the model was trained on
    inputs = MoleculeInput.open(protocol, path)
    graph = CovalentGraph.from_bonds(protocol.bonds, list(protocol.atomic_numbers), source="model protocol")
    table = evaluate_rollouts(loaded, inputs.positions, graph, test.starts.tolist(), source=path.name,
                              restore_bonds=restore_bonds, progress=progress)
    table.notes.append(f"MD17 split test starts ({len(test.starts)}), heavy atoms matched to the model's molecule, "
                       "bonds of the model's protocol")
    return table
