"""Does a protein stay a protein over a long rollout? Backbone bonds, the Ramachandran distribution and the JS table.

:func:`judge_protein` rolls an MD model (an atom selection of a protein, e.g. ``egno-fkbp12``'s backbone) out for
``windows`` windows from several start frames of a run it never trained on, and compares the pooled frames with
that run: the JS divergences of bond lengths, angles and torsions (with the run's half-against-half floor and a
frozen start structure) and the bonds off their MD means
(:class:`~geomol.inference.dynamics.ensemble_comparison.EnsembleComparison`), and the Ramachandran distribution: the backbone
dihedrals φ (C₋₁–N–CA–C) and ψ (N–CA–C–N₊₁) of every residue that has them, as the mean JS of each dihedral's
distribution (10° bins on the circle) and the JS of the (φ, ψ) map pooled over residues (10° × 10° cells).
"""
from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import torch

from geomol.data.chemistry.conformations import BIN_WIDTHS, InternalCoordinates, histogram_divergence, js_divergence
from geomol.data.chemistry.covalent_graph import CovalentGraph
from geomol.data.datasets.trajectories.md_trajectory import MDTrajectory
from geomol.data.io.trajectory import open_selection
from geomol.data.chemistry.trajectory import count_clashes
from geomol.errors import ConfigError
from geomol.inference.dynamics.bond_restoring import BondRestoring
from geomol.inference.dynamics.dynamics_model import DynamicsModel
from geomol.inference.dynamics.ensemble_comparison import EnsembleComparison
from geomol.inference.dynamics.rollout import frames_before, iter_windows, state_at

__all__ = ["backbone_dihedrals", "ramachandran_divergence", "judge_protein"]


def backbone_dihedrals(names, residues) -> dict[str, np.ndarray]:
    """{"phi": [R, 4], "psi": [R', 4]} atom indices of the φ and ψ dihedrals of a backbone selection, from the atom
    names (N, CA, C) and residue numbers [N_atoms]; residues missing an atom are left out."""
    atoms: dict[int, dict[str, int]] = {}
    for index, (name, residue) in enumerate(zip(names, residues)):
        atoms.setdefault(int(residue), {})[str(name)] = index
    order = sorted(atoms)
    phi, psi = [], []
    for before, this, after in zip([None] + order[:-1], order, order[1:] + [None]):
        here = atoms[this]
        if not {"N", "CA", "C"} <= set(here):
            continue
        if before is not None and before == this - 1 and "C" in atoms[before]:
            phi.append((atoms[before]["C"], here["N"], here["CA"], here["C"]))
        if after is not None and after == this + 1 and "N" in atoms[after]:
            psi.append((here["N"], here["CA"], here["C"], atoms[after]["N"]))
    return {"phi": np.array(phi, dtype=np.int64).reshape(-1, 4), "psi": np.array(psi, dtype=np.int64).reshape(-1, 4)}


def _dihedral_values(frames: np.ndarray, quads: np.ndarray) -> np.ndarray:
    coordinates = InternalCoordinates(np.zeros((0, 2), np.int64), np.zeros((0, 3), np.int64), quads)
    return coordinates.values(frames)["torsion"]


def ramachandran_divergence(frames, reference, dihedrals: dict[str, np.ndarray]) -> dict[str, float | None]:
    """Mean JS of each φ and each ψ (10° bins on the circle), and the JS of the (φ, ψ) map pooled over the residues
    that have both (10° × 10° cells), of frames [F, N, 3] against the reference [F', N, 3]."""
    width = BIN_WIDTHS["torsion"]
    out: dict[str, float | None] = {}
    values = {}
    for kind, quads in dihedrals.items():
        ours, theirs = _dihedral_values(frames, quads), _dihedral_values(reference, quads)
        values[kind] = (ours, theirs, quads)
        out[kind] = (float(np.mean([histogram_divergence(ours[:, c], theirs[:, c], width, periodic=True)
                                    for c in range(len(quads))])) if len(quads) else None)
    (phi, ref_phi, phi_quads), (psi, ref_psi, psi_quads) = values["phi"], values["psi"]
    pairs = [(i, j) for i, q in enumerate(phi_quads) for j, r in enumerate(psi_quads) if q[2] == r[1]]  # same CA
    if not pairs:
        out["phi_psi_map"] = None
        return out
    bins = int(round(360 / width))

    def cells(a, b):
        index = lambda v: (np.floor(np.mod(v + 180.0, 360.0) / width).astype(np.int64)) % bins  # noqa: E731
        return np.bincount((index(a) * bins + index(b)).ravel(), minlength=bins * bins)

    i, j = np.array(pairs).T
    out["phi_psi_map"] = js_divergence(cells(phi[:, i], psi[:, j]), cells(ref_phi[:, i], ref_psi[:, j]))
    return out


def judge_protein(model: DynamicsModel, topology, trajectory, *, starts: int = 3, windows: int = 1000,
                  seed: int = 0, keep_every: int = 1, restore_bonds: bool = False) -> dict[str, Any]:
    """Long rollouts of an MD model from a run it never saw, judged against that run (module docstring).

    Args:
        model: an MD-kind model. topology, trajectory: the independent run. starts: start frames spread evenly.
        windows: windows per start. keep_every: keep every k-th predicted frame (memory on long rollouts).
        restore_bonds: project every predicted window's bonds back to their lengths in the first start frame
            (:class:`~geomol.inference.dynamics.bond_restoring.BondRestoring`, as ``geomol rollout --restore-bonds``);
            the bonds are then kept by construction, and what the judge tests is the rest (angles, torsions,
            Ramachandran, clashes, blow-up).
    """
    if not model.protocol.selection:
        raise ConfigError(f"{model!r} is not a model of an atom selection")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traj = MDTrajectory(topology, trajectory, selection=model.protocol.selection)
        atoms = open_selection(topology, trajectory, model.protocol.selection)[1]
    positions = traj.positions.astype(np.float64)
    graph = CovalentGraph.of_selection(atoms, positions[0])
    first = frames_before(model.protocol) + 1
    chosen = [int(s) for s in np.linspace(first, len(positions) - 2, starts)]
    states = [state_at(model.protocol, positions, s) for s in chosen]
    x, v = (torch.as_tensor(np.stack([s[k] for s in states])) for k in (0, 1))
    generator = torch.Generator(model.device).manual_seed(seed)
    restoring = BondRestoring(graph, positions[chosen[0]]) if restore_bonds else None
    frames, done, cpu = [], 0, time.process_time()
    for window in iter_windows(model, x, v, windows, traj.charges, constrain=restoring, generator=generator,
                               molecule=model.protocol.coarse_nodes(traj.names, trajectory)):
        frames.append(window.positions.double().cpu().numpy()[:, ::keep_every])  # [S, P', N, 3]
        done += 1
    cpu = time.process_time() - cpu
    pooled = np.concatenate(frames, axis=1).reshape(-1, *positions.shape[1:])
    comparison = EnsembleComparison(graph.bonds, positions, str(trajectory), start=positions[chosen[0]])
    record = comparison.results(pooled)
    deviation = np.asarray(record.pop("bond_deviation_per_frame_max_A")).reshape(len(chosen), -1)
    residues = atoms.resids
    interval = model.protocol.frame_interval or 0.0
    record.update(model=model.name or repr(model), starts=chosen, windows=done, diverged=done < windows,
                  ramachandran=ramachandran_divergence(pooled, positions, backbone_dihedrals(traj.names, residues)),
                  largest_bond_deviation_over_time_A=deviation.max(axis=0)[::max(1, deviation.shape[1] // 50)].tolist(),
                  clash_frame_fraction=float((count_clashes(pooled[::10], graph) > 0).mean()),
                  simulated_ps_per_start=done * model.protocol.window_frames * interval, cpu_seconds=cpu,
                  bond_restoring=None if restoring is None else {
                      "most_sweeps_used": restoring.most_sweeps, "largest_bond_error_left_A": restoring.worst_residual})
    return record
