"""The stable Python surface of geomol: load trained models and predict with them.

* :func:`load_model` / :func:`export_model` — shipped models by name, model directories,
  Lightning checkpoints from ``geomol fit`` (read safely, tensors only);
* :func:`predict_affinity` — binding affinity (pK, ΔG, Kd, ensemble spread) of ligands against a
  receptor with a GET model.

Example::

    import geomol
    results = geomol.predict_affinity("protein.pdb", "ligands.sdf")          # the shipped default model
    results = geomol.predict_affinity("complex.pdb", "UNK", model="runs/.../last.ckpt")
    for r in results:
        print(r.name, r.pK, r.pK_std, r.error)

The implementation lives in :mod:`geomol.inference`; this module only states the contract.
"""
from __future__ import annotations

from os import PathLike
from typing import Any, Sequence

from geomol.data.blocks import BlockGraph
from geomol.data.io import Structure
from geomol.errors import ConfigError
from geomol.inference.affinity import AffinityPrediction, predict_inputs
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.ligand_inputs import graph_inputs, ligand_inputs
from geomol.inference.loading import ModelReference, export_model, load_model

__all__ = ["load_model", "export_model", "predict_affinity", "AffinityModel", "AffinityPrediction"]


# ---------------------------------------------------------------------- binding affinity
def _affinity_model(model: ModelReference, device: str) -> AffinityModel:
    loaded = load_model(model, device=device)
    if not isinstance(loaded, AffinityModel):
        raise ConfigError(f"{loaded!r} is not a binding-affinity model")
    return loaded


def predict_affinity(receptor: str | PathLike | Structure | BlockGraph | Sequence[BlockGraph], ligands: Any = None,
                     model: ModelReference = "default", pocket_cutoff: float | None = None, device: str = "cpu",
                     batch_size: int = 32, *, max_blocks: int = 4000,
                     receptor_chains: Sequence[str] | None = None) -> list[AffinityPrediction]:
    """Predict the binding affinity of each ligand to the receptor.

    Args:
        receptor: a PDB/mmCIF file (plain, .gz or .bz2) of a protein, DNA or RNA, or an already
            read :class:`~geomol.data.io.Structure`; or ready-made complexes (a BlockGraph or a
            list of them, with ``ligands=None``), which are predicted as they are.
        ligands: one item or a list of them — SDF/MOL2 files (every molecule), PDB/mmCIF files
            of a lone ligand, RDKit molecules with 3D coordinates, a residue name inside the
            receptor file (``"UNK"``), or a chain group of it for protein–protein complexes
            (``"chain:B"``, ``"chains:H,L"``).
        model: shipped-model name (``"default"``), model directory, ``.ckpt`` path, list of
            ``.ckpt`` paths (an ensemble) or a model from :func:`load_model` (reuse it across
            calls to load only once).
        pocket_cutoff: Å. None (default) uses the cutoff the model was trained with; a number
            overrides it. Hydrogens and ligand fragments always follow the model.
        device: torch device for the model (``"cpu"``, ``"cuda"``).
        batch_size: complexes per forward pass; max_blocks: most blocks in one forward pass.
        receptor_chains: use only these chains of the receptor.

    Returns:
        one :class:`~geomol.inference.affinity.AffinityPrediction` per ligand, in input order:
        name, pK (ensemble mean), dG_kcal_mol (298.15 K), Kd_M (mol/L), pK_std (spread of the
        ensemble members; NaN with one member), n_pocket_blocks, error. A ligand that cannot be
        read or has no receptor residue within the cutoff comes back with ``error`` set and NaN
        numbers; the others are still predicted.

    Raises:
        ModelLoadError: the model cannot be found or loaded.
        GeomolError subclasses: the receptor cannot be read, or invalid arguments.
    """
    loaded = _affinity_model(model, device)
    if isinstance(receptor, BlockGraph) or (isinstance(receptor, (list, tuple)) and receptor
                                            and all(isinstance(g, BlockGraph) for g in receptor)):
        if ligands is not None:
            raise ConfigError("ligands must be None when the receptor argument holds ready-made complexes")
        return list(predict_inputs(None, graph_inputs(receptor), loaded, batch_size=batch_size, max_blocks=max_blocks))
    return list(predict_inputs(receptor, ligand_inputs(ligands), loaded, pocket_cutoff=pocket_cutoff,
                               batch_size=batch_size, max_blocks=max_blocks, receptor_chains=receptor_chains))
