"""Trajectory models and baselines on the same windows of a held-out trajectory, in one table.

For each start frame s of a trajectory x [F, N, 3] (Å) the state is x[s] with the velocity each model was trained
on (:func:`~geomol.inference.dynamics.rollout.state_at`: x[s+1] − x[s] for the official protocols), as in ``geomol rollout``; every predictor then predicts the frames s + o for the evaluation
offsets o (frames after the start) up to a horizon (default: one window, the model's trained horizon
o_P; longer horizons roll the models out window after window):

* each model (EGNO, the EGNN baseline, any :class:`~geomol.inference.dynamics.dynamics_model.DynamicsModel`),
  rolled out with :func:`~geomol.inference.dynamics.rollout.iter_windows`; with ``restore_bonds`` also each
  model followed by the bond-restoring projection (:class:`~geomol.inference.dynamics.bond_restoring.BondRestoring`),
  a row of its own ("<name> + bond restoring");
* the baselines :data:`BASELINES`: ``no motion`` (x̂(s + o) = x[s], the last frame the state holds)
  and ``linear`` (x̂(s + o) = x[s] + o·(x[s+1] − x[s]), linear extrapolation of the state's two frames);
* ``reference MD``: the trajectory's own frames, for their chemistry (how much real dynamics moves
  the bonds); its errors are 0 by definition and left empty.

The evaluation offsets are the frames every model predicts (models with other target offsets
share fewer); S2S MSE is at the last of them, S2T MSE the mean over them, both the mean over the
atoms and xyz of (x̂ − x)² (Å², the training metrics' definition) averaged over the windows. The
chemistry (:mod:`geomol.data.chemistry.trajectory`) of every predicted frame is measured against
its window's start frame x[s]. A model's rollout that diverges in a window is counted
(``diverged``) and that window is left out of its row.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from geomol.data.chemistry.covalent_graph import CovalentGraph
from geomol.data.dynamics.systems import system_of
from geomol.data.datasets.trajectories.md_trajectory import MDTrajectory, md_split_ranges
from geomol.data.io.trajectory import open_selection
from geomol.data.chemistry.trajectory import (ChemistryFrames, bond_errors, bond_errors_by_kind, bond_kinds,
                                              trajectory_chemistry)
from geomol.errors import ConfigError, TrajectoryError
from geomol.inference.dynamics.bond_restoring import BondRestoring
from geomol.inference.dynamics.dynamics_model import DynamicsModel
from geomol.inference.dynamics.rollout import frames_before, iter_windows, progress_bar, state_at

__all__ = ["BASELINES", "RolloutScore", "RolloutTable", "evaluate_rollouts", "evaluate_trajectory",
           "evaluate_molecule_file", "evaluation_offsets", "window_starts"]

BASELINES = ("no motion", "linear")


@dataclass
class RolloutScore:
    """One row: a predictor's errors and chemistry over the evaluated windows.

    Attributes:
        name: the row's label. kind: "model", "model + bond restoring", "baseline" or "reference MD".
        s2s_mse, s2t_mse: Å² (None for the reference, or when every window diverged).
        chemistry: :meth:`ChemistryFrames.summary` over all predicted frames of all windows, plus
            ``broken_bond_window_fraction`` (windows with a broken bond in any frame) and, where the
            atoms have names, ``by_bond_kind`` (:func:`~geomol.data.chemistry.trajectory.bond_errors_by_kind`).
        windows: windows scored. diverged: windows whose rollout diverged (left out).
    """

    name: str
    kind: str
    s2s_mse: float | None
    s2t_mse: float | None
    chemistry: dict[str, Any]
    windows: int
    diverged: int = 0


@dataclass
class RolloutTable:
    """Rows of :class:`RolloutScore` on the same windows, and what the windows were."""

    rows: list[RolloutScore]
    offsets: list[int]
    starts: list[int]
    bonds: str
    source: str = ""
    notes: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> RolloutScore:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"no row {name!r} (rows: {', '.join(r.name for r in self.rows)})")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: rows, evaluation offsets, start frames, bonds, notes."""
        return {"source": self.source, "offsets": self.offsets, "starts": self.starts, "bonds": self.bonds,
                "notes": self.notes, "rows": [asdict(r) for r in self.rows]}

    def to_markdown(self) -> str:
        """A Markdown table: S2S and S2T MSE, bond-length and angle errors, frames with broken bonds or clashes."""
        def number(value, digits=3):
            return "–" if value is None else f"{value:.{digits}f}"

        def percent(value):
            return "–" if value is None else f"{100 * value:.0f}%"

        lines = ["| predictor | S2S MSE (Å²) | S2T MSE (Å²) | bond error median (Å) | bond error max (Å) | "
                 "angle error median (°) | frames with a broken bond | windows with a broken bond | "
                 "frames with a clash |", "|---|---|---|---|---|---|---|---|---|"]
        for row in self.rows:
            c = row.chemistry
            diverged = f" ({row.diverged} of {row.windows + row.diverged} windows diverged)" if row.diverged else ""
            lines.append(f"| {row.name}{diverged} | {number(row.s2s_mse, 4)} | {number(row.s2t_mse, 4)} | "
                         f"{number(c.get('bond_error_median_A'))} | {number(c.get('bond_error_max_A'), 2)} | "
                         f"{number(c.get('angle_error_median_deg'), 1)} | {percent(c.get('broken_bond_fraction'))} | "
                         f"{percent(c.get('broken_bond_window_fraction'))} | {percent(c.get('clash_fraction'))} |")
        return "\n".join(lines)

    def bond_kinds_markdown(self) -> str:
        """A Markdown table of the bond-length error by kind of bond (rows) for each predictor (columns):
        median / max (Å) and the frames in which a bond of that kind is broken."""
        rows = [r for r in self.rows if "by_bond_kind" in r.chemistry]
        if not rows:
            return ""
        kinds = rows[0].chemistry["by_bond_kind"]
        lines = ["| bond (count) | " + " | ".join(r.name for r in rows) + " |", "|---" * (len(rows) + 1) + "|"]
        for kind, facts in kinds.items():
            cells = [r.chemistry["by_bond_kind"][kind] for r in rows]
            lines.append(f"| {kind} ({facts['bonds']}) | " + " | ".join(
                f"{c['median_A']:.3f} / {c['max_A']:.2f}, {100 * c['broken_frame_fraction']:.0f}%" for c in cells)
                + " |")
        return "\n".join(lines)


def evaluation_offsets(models: Sequence[DynamicsModel], horizon: int) -> list[int]:
    """Frames after the start, up to ``horizon``, that every model's rollout predicts (all of 1..horizon
    when there is no model)."""
    common = set(range(1, horizon + 1))
    for model in models:
        step, offsets = model.protocol.window_frames, model.protocol.target_offsets
        common &= {k * step + o for k in range(math.ceil(horizon / step)) for o in offsets}
    if not common:
        raise ConfigError(f"the models predict no common frame within {horizon} frames of the start "
                          f"(target offsets: {[list(m.protocol.target_offsets) for m in models]})")
    return sorted(common)


class _Row:
    """Accumulates one predictor's windows."""

    def __init__(self, name: str, kind: str, bond_kinds: list[str] | None = None):
        self.name, self.kind, self.bond_kinds = name, kind, bond_kinds
        self.bond_errors: list[np.ndarray] = []  # [K, B] per window, where bonds have kinds
        self.s2s: list[float] = []
        self.s2t: list[float] = []
        self.chemistry: list[ChemistryFrames] = []
        self.diverged = 0

    def add(self, predicted: np.ndarray, truth: np.ndarray, graph: CovalentGraph, start: np.ndarray,
            errors: bool = True) -> None:
        """predicted, truth [K, N, 3] at the evaluation offsets; start [N, 3] the window's start frame."""
        if errors:
            mse = ((predicted - truth) ** 2).mean(axis=(1, 2))  # [K]
            self.s2s.append(float(mse[-1])), self.s2t.append(float(mse.mean()))
        self.chemistry.append(trajectory_chemistry(predicted, graph, start))
        if self.bond_kinds is not None and len(graph.bonds):
            self.bond_errors.append(bond_errors(predicted, graph.bonds, start).numpy().astype(np.float32))

    def score(self) -> RolloutScore:
        chemistry = ChemistryFrames.concatenate(self.chemistry)
        summary = chemistry.summary()
        summary.pop("first_broken_index")
        broken = [bool((part.broken_bonds > 0).any()) for part in self.chemistry]
        summary["broken_bond_window_fraction"] = (float(np.mean(broken)) if broken and
                                                  summary["broken_bond_fraction"] is not None else None)
        if self.bond_errors:
            summary["by_bond_kind"] = bond_errors_by_kind(np.concatenate(self.bond_errors), self.bond_kinds)
        mean = (lambda values: float(np.mean(values)) if values else None)
        return RolloutScore(self.name, self.kind, mean(self.s2s), mean(self.s2t), summary, len(self.chemistry),
                            self.diverged)


def _model_frames(model: DynamicsModel, x: np.ndarray, v: np.ndarray, offsets: list[int], charges,
                  constrain, molecule=None, seed: int = 0) -> np.ndarray | None:
    """[K, N, 3] the model's rollout at ``offsets``; None if it diverged before the last one."""
    step = model.protocol.window_frames
    windows = math.ceil(offsets[-1] / step)
    found: dict[int, np.ndarray] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a divergence is counted in the table instead
        generator = torch.Generator(model.device).manual_seed(seed)
        for window in iter_windows(model, x, v, windows, charges, constrain=constrain, molecule=molecule,
                                   generator=generator):
            for offset, positions in zip(window.frame_offsets.tolist(), window.positions):
                if offset in offsets:
                    found[offset] = positions.double().cpu().numpy()
    return np.stack([found[o] for o in offsets]) if len(found) == len(offsets) else None


def _check_inputs(positions: np.ndarray, graph: CovalentGraph, starts: Sequence[int], horizon: int, source,
                  models: Sequence[DynamicsModel] = ()) -> None:
    if positions.ndim != 3 or positions.shape[-1] != 3 or positions.shape[1] != graph.num_atoms:
        raise ConfigError(f"need positions [F, {graph.num_atoms}, 3], got {tuple(positions.shape)}", source=source)
    if not len(starts):
        raise TrajectoryError(f"{len(positions)} frames leave no start frame to evaluate: a window needs frames "
                              f"s … s + {max(horizon, 1)} (and a split or stride may leave none)", source=source)
    before = max([0] + [frames_before(m.protocol) for m in models])
    last = len(positions) - 1
    bad = [s for s in starts if s - before < 0 or s + max(horizon, 1) > last]
    if bad:
        raise TrajectoryError(f"{len(positions)} frames: start frame(s) {bad[:5]} cannot reach {horizon} frames "
                              f"ahead or the {before} frame(s) before them that a model's velocity needs (each window "
                              f"needs frames s − {before} … s + {max(horizon, 1)})", source=source)


def evaluate_rollouts(models: Mapping[str, DynamicsModel], positions, graph: CovalentGraph, starts: Sequence[int], *,
                      horizon: int | None = None, charges=None, restore_bonds: bool = False, baselines: bool = True,
                      reference: bool = True, atom_names: Sequence[str] | None = None, source: str = "",
                      molecule=None, seed: int = 0, progress: bool = False) -> RolloutTable:
    """Score ``models`` and the baselines on the windows of ``positions`` starting at ``starts`` (module docstring).

    Args:
        models: {row name: trajectory model}; may be empty (baselines and reference only).
        positions: [F, N, 3] frames of the held-out trajectory (Å), in the models' atom order.
        graph: the atoms' bonds (:meth:`CovalentGraph.of_selection`); starts: start frames s.
        horizon: frames after the start to predict (default: the first model's o_P, else 1).
        charges: [N] partial charges, for models with a charge feature.
        restore_bonds: also score each model with the bond-restoring projection after each window.
        baselines, reference: include the no-motion and linear rows, and the reference MD row.
        atom_names: [N] atom names: also the bond-length errors by kind of bond ("CA–N", ...).
        source: the trajectory, for messages and the table.
        molecule: the heavy atoms' graph, for models of many molecules (MD models with coarse edges find theirs
            by ``atom_names``). seed: a generative model's random stream
            (each window from ``seed``; a generative model's S2S is that of one draw, not of the mean).

    Each model's state is the one it was trained on (:func:`~geomol.inference.dynamics.rollout.state_at`: the velocity
    x[s+1] − x[s] of the official protocols, or the backward difference of the small-molecule models).

    Returns:
        :class:`RolloutTable` with one row per model (then per restored model), baseline and the reference.
    """
    positions = np.asarray(positions, dtype=np.float64)
    models = dict(models)
    horizon = int(horizon or (next(iter(models.values())).protocol.window_frames if models else 1))
    starts = [int(s) for s in starts]
    _check_inputs(positions, graph, starts, horizon, source, list(models.values()))
    offsets = evaluation_offsets(list(models.values()), horizon)
    kinds = None if atom_names is None else bond_kinds(graph.bonds, atom_names)
    rows = {name: _Row(name, "model", kinds) for name in models}
    if restore_bonds:
        rows.update({f"{name} + bond restoring": _Row(f"{name} + bond restoring", "model + bond restoring", kinds)
                     for name in models})
    names = {"no motion": "no motion (last frame)", "linear": "linear extrapolation"}
    if baselines:
        rows.update({kind: _Row(names[kind], "baseline", kinds) for kind in BASELINES})
    if reference:
        rows["reference"] = _Row("reference MD", "reference MD", kinds)
    charges = None if charges is None else torch.as_tensor(np.asarray(charges, dtype=np.float64))
    nodes = {name: molecule if molecule is not None or atom_names is None else
             model.protocol.coarse_nodes(atom_names, source) for name, model in models.items()}
    index = np.asarray(offsets)
    with progress_bar(len(starts), progress, "evaluating") as advance:
        for s in starts:
            x, v, truth = positions[s], positions[s + 1] - positions[s], positions[s + index]
            for name, model in models.items():
                variants = [(name, None)] + ([(f"{name} + bond restoring", BondRestoring(graph, x))]
                                             if restore_bonds else [])
                state = state_at(model.protocol, positions, s, source)
                for row, constrain in variants:
                    predicted = _model_frames(model, *state[:2], offsets, charges, constrain, nodes[name], seed)
                    if predicted is None:
                        rows[row].diverged += 1
                    else:
                        rows[row].add(predicted, truth, graph, x)
            if baselines:
                rows["no motion"].add(np.broadcast_to(x, truth.shape), truth, graph, x)
                rows["linear"].add(x + index[:, None, None] * v, truth, graph, x)
            if reference:
                rows["reference"].add(truth, truth, graph, x, errors=False)
            advance()
    velocities = "; ".join(f"{name}: {m.protocol.velocity or 'x[t+1] − x[t]'}" for name, m in models.items())
    notes = [f"state of each window at frame s: x[s] and the velocity each model was trained on ({velocities or '–'}; "
             f"baselines: x[s+1] − x[s]); predicted frames s + {offsets}"]
    return RolloutTable([row.score() for row in rows.values()], offsets, starts, graph.describe(), str(source), notes)


def window_starts(num_frames: int, horizon: int, *, split: str | None = None, delta: int | None = None,
                  stride: int = 1) -> list[int]:
    """Start frames of the windows of a trajectory of ``num_frames`` frames, every ``stride`` frames.

    ``split=None``: every start whose window fits (s + horizon ≤ F − 1; the whole trajectory is held
    out). ``split="train" | "valid" | "test"``: the starts of that part of the chronological split the
    MD data sets use (:func:`~geomol.data.datasets.trajectories.md_trajectory.md_split_ranges` with Δ = ``delta``, the
    model's o_P), for a model trained on the other parts of the same trajectory; starts whose window
    does not fit are dropped.
    """
    if stride < 1 or horizon < 1:
        raise ConfigError(f"need stride ≥ 1 and horizon ≥ 1, got {stride} and {horizon}")
    last = num_frames - 1 - horizon  # the window's last frame s + horizon must exist (and s + 1)
    if split is None:
        begin, end = 0, last + 1
    else:
        if delta is None:
            raise ConfigError("a split needs the Δ of the data set's split (the model's o_P)")
        ranges = md_split_ranges(num_frames - 1, delta)
        if split not in ranges:
            raise ConfigError(f"unknown split {split!r} (train | valid | test)")
        begin, end = ranges[split][0], min(ranges[split][1], last + 1)
    return list(range(begin, max(begin, end), stride))


def evaluate_trajectory(models: Mapping[str, DynamicsModel], topology, trajectory=None, *,
                        selection: str | None = None, starts: Sequence[int] | None = None, split: str | None = None,
                        stride: int = 1, horizon: int | None = None, restore_bonds: bool = False,
                        baselines: bool = True, reference: bool = True, progress: bool = False) -> RolloutTable:
    """:func:`evaluate_rollouts` on the windows of a trajectory file (read with MDAnalysis).

    Args:
        models: {row name: trajectory model} (MD models; their selection must be the same).
        topology, trajectory: the held-out trajectory (an independent run, or the same trajectory with
            ``split="test"`` for a model trained on its first part).
        selection: atoms (default: the first model's training selection, else ``"backbone"``).
        starts: start frames; default :func:`window_starts` with ``split`` and ``stride``.
        horizon, restore_bonds, baselines, reference, progress: as :func:`evaluate_rollouts`.

    Bonds are the topology's inside the selection, else perceived on the first frame (the table's
    ``bonds`` says which). Small-molecule models (``md17``, ``molecule`` kinds) read any file of their molecule
    instead, in any atom order (:func:`evaluate_molecule_file`).
    """
    first = next(iter(models.values()), None)
    if first is not None and system_of(first.protocol.kind).reads_molecules:
        return evaluate_molecule_file(models, topology, trajectory, starts=starts, stride=stride, horizon=horizon,
                                      restore_bonds=restore_bonds, baselines=baselines, reference=reference,
                                      progress=progress)
    for name, model in models.items():
        if not system_of(model.protocol.kind).reads_selections:
            raise ConfigError(f"{name}: {model!r} is not an MD model; use evaluate_rollouts with arrays")
    selection = selection or (first.protocol.selection if first is not None else None) or "backbone"
    source = str(trajectory if trajectory is not None else topology)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traj = MDTrajectory(topology, trajectory, selection=selection)
    graph = CovalentGraph.of_selection(open_selection(topology, trajectory, selection)[1], traj.positions[0])
    horizon = int(horizon or (first.protocol.window_frames if first is not None else 1))
    if starts is None:
        delta = first.protocol.window_frames if first is not None else horizon
        starts = window_starts(len(traj), horizon, split=split, delta=delta, stride=stride)
    table = evaluate_rollouts(models, traj.positions, graph, starts, horizon=horizon, charges=traj.charges,
                              restore_bonds=restore_bonds, baselines=baselines, reference=reference,
                              atom_names=traj.names, source=source, progress=progress)
    table.notes.append(f"selection {selection!r}, {graph.num_atoms} atoms" +
                       (f"; starts from the {split} part of the chronological split" if split else ""))
    return table


def evaluate_molecule_file(models: Mapping[str, DynamicsModel], topology, trajectory=None, *,
                           starts: Sequence[int] | None = None, stride: int = 1, horizon: int | None = None,
                           restore_bonds: bool = False, baselines: bool = True, reference: bool = True,
                           progress: bool = False) -> RolloutTable:
    """:func:`evaluate_rollouts` of small-molecule models on a file of their molecule (any format
    :class:`~geomol.inference.dynamics.molecule_inputs.MoleculeInput` reads, any atom order: the heavy atoms are matched to the
    first model's molecule and every model must read them in that order; another molecule is refused)."""
    from geomol.inference.dynamics.molecule_inputs import MoleculeInput

    first = next(iter(models.values()))
    inputs = MoleculeInput.open(first.protocol, topology, trajectory)
    for name, model in models.items():
        if not system_of(model.protocol.kind).reads_molecules:
            raise ConfigError(f"{name}: {model!r} is not a small-molecule model; evaluate it on its own files")
        if (model.protocol.template() or first.protocol.template()) and not np.array_equal(
                MoleculeInput.open(model.protocol, topology, trajectory).order, inputs.order):
            raise ConfigError(f"{name} orders the molecule's atoms differently from the first model; evaluate the "
                              "two in separate tables")
    horizon = int(horizon or first.protocol.window_frames)
    before = max(frames_before(m.protocol) for m in models.values())
    if starts is None:
        starts = [s for s in window_starts(len(inputs.positions), horizon, stride=stride) if s >= before]
    graph = CovalentGraph.from_bonds(inputs.molecule.bonds, [int(z) for z in inputs.molecule.atomic_numbers],
                                     source="topology" if inputs.frames.bonds_source == "file" else "perceived")
    table = evaluate_rollouts(models, inputs.positions, graph, starts, horizon=horizon, restore_bonds=restore_bonds,
                              baselines=baselines, reference=reference, source=inputs.source,
                              molecule=inputs.molecule, progress=progress)
    table.notes.append(f"heavy atoms matched to the model's molecule ({len(inputs.order)} atoms; rows in the model's "
                       "atom order)")
    return table
