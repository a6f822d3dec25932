"""Rolling a trajectory model out window after window, from in-memory states.

One window maps the state (x, v) at frame t to the positions at frames t + o_1 … t + o_P
(the model's ``target_offsets``). The next window starts from the last predicted frame t + o_P,
with positions x̂(t + o_P) and the velocity estimated from the last two predicted frames,

    v = (x̂(t + o_P) − x̂(t + o_{P−1})) / ((o_P − o_{P−1}) · frame_time),

in the unit the model was trained with (``frame_time`` = one frame in the velocity's time unit:
1 for per-frame differences, MD and Mocap; 0.1 for N-body's simulator velocity; 1/s for a velocity over s frames).
With P = 1 the input frame takes the place of x̂(t + o_{P−1}). This is exactly the training velocity when the
protocol's velocity is the backward difference over the window's own frame spacing
(``velocity_direction="backward"``, ``velocity_span`` = o_P − o_{P−1}: the ``molecule`` models, see
:attr:`~geomol.data.dynamics.protocol.TrajectoryProtocol.seeds_in_distribution`). The official protocols train
on the forward difference x[t+1] − x[t] instead, and the estimate then is out of distribution: for Mocap (last
offsets 1 frame apart) it is in the exact training unit but lags half a frame, for egno-fkbp12's offsets (+1, +3,
+5, +7: 2 frames apart) it averages over 2 frames, for MD17's (375 frames apart) it averages over 375 frames, which
on a molecule at 500 K is 2–3× smaller than the one-frame velocity, for N-body over 0.2 time units. Edges and
features are rebuilt from each window's input state, as in training
(:meth:`~geomol.data.dynamics.protocol.TrajectoryProtocol.state_graph`). A generative model (EGNOFlow) draws
each window from a ``torch.Generator``: the same seed repeats a rollout.

Only the current state is kept: :func:`iter_windows` yields one window at a time, so a rollout's
memory does not grow with its length. :func:`rollout_arrays` collects the frames into arrays
(research use: N-body, Mocap, any system in memory).
"""
from __future__ import annotations

import math
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch

from geomol.errors import ConfigError, TrajectoryError
from geomol.inference.dynamics.dynamics_model import DynamicsModel
from geomol.data.dynamics.protocol import TrajectoryProtocol

__all__ = ["Window", "ArrayRollout", "OUTPUT_FRAMES", "num_windows", "horizon_for_frames", "next_velocity", "iter_windows",
           "kept_frames", "rollout_arrays", "progress_bar", "frames_before", "state_frames", "state_at",
           "state_of_frames"]

OUTPUT_FRAMES = ("all", "ends")


@dataclass
class Window:
    """One model call of a rollout.

    Attributes:
        index: window number k (0-based).
        frame_offsets: [P] frames after the rollout's start frame: k·o_P + o_p.
        positions: [P, N, 3] predicted positions, on the model's device and dtype.
    """

    index: int
    frame_offsets: np.ndarray
    positions: torch.Tensor


@dataclass
class ArrayRollout:
    """A rollout held in memory: ``positions`` [F, N, 3] at ``frame_offsets`` [F] frames after the start."""

    frame_offsets: np.ndarray
    positions: np.ndarray
    protocol: TrajectoryProtocol

    @property
    def times(self) -> np.ndarray | None:
        """[F] times after the start in the protocol's time unit (None if the frame interval is unknown)."""
        interval = self.protocol.frame_interval
        return None if interval is None else self.frame_offsets * interval


def horizon_for_frames(protocol: TrajectoryProtocol, count: int, output_frames: str = "all") -> int:
    """Frames past the start that ``count`` predicted frames reach: the offset of the count-th one.

    Predicted frames follow the offsets k·o_P + o_p (``"all"``) or k·o_P + o_P (``"ends"``); so with
    offsets [3, 7, 11, 15], 5 predicted frames reach 18 frames past the start.
    """
    if count < 1:
        raise ConfigError(f"the rollout must write at least one predicted frame, got {count}")
    per_window = protocol.target_offsets if output_frames == "all" else protocol.target_offsets[-1:]
    window, index = divmod(count - 1, len(per_window))
    return window * protocol.window_frames + int(per_window[index])


def num_windows(protocol: TrajectoryProtocol, frames: int | None = None, windows: int | None = None) -> int:
    """Windows needed to reach ``frames`` frames past the start (ceil(frames / o_P)), or ``windows``; default 1."""
    if frames is not None and windows is not None:
        raise ConfigError("give the rollout length as frames or as windows, not both")
    if windows is not None:
        if windows < 1:
            raise ConfigError(f"windows must be ≥ 1, got {windows}")
        return int(windows)
    if frames is None:
        return 1
    if frames < 1:
        raise ConfigError(f"frames must be ≥ 1, got {frames}")
    return math.ceil(frames / protocol.window_frames)


def next_velocity(protocol: TrajectoryProtocol, window: torch.Tensor, x_in: torch.Tensor) -> torch.Tensor:
    """[..., N, 3] velocity that seeds the next window, from a window's [..., P, N, 3] positions (module docstring)."""
    offsets = protocol.target_offsets
    if len(offsets) > 1:
        previous, gap = window[..., -2, :, :], offsets[-1] - offsets[-2]
    else:
        previous, gap = x_in, offsets[0]
    return (window[..., -1, :, :] - previous) / (gap * protocol.frame_time)


def frames_before(protocol: TrajectoryProtocol) -> int:
    """Frames before the start that a state reads (its velocity's other end when it is a backward difference)."""
    return protocol.velocity_span if protocol.velocity_direction == "backward" else 0


def state_frames(protocol: TrajectoryProtocol, start: int) -> tuple[int, int]:
    """(first, last) frame numbers the state at ``start`` reads: the start and the other end of its velocity."""
    before = frames_before(protocol)
    return start - before, start + (0 if before else protocol.velocity_span)


def state_at(protocol: TrajectoryProtocol, positions, start: int, source=None) -> tuple[np.ndarray, np.ndarray, str]:
    """(x [N, 3], v [N, 3], how v was computed) at frame ``start`` of frames ``positions`` [F, N, 3], the velocity as
    the model was trained on it: (x[t+s] − x[t]) or (x[t] − x[t−s]), divided by s·frame_time.

    Raises:
        TrajectoryError: the frames the state needs are not there.
    """
    first, last = state_frames(protocol, start)
    if first < 0 or last >= len(positions):
        span, direction = protocol.velocity_span, protocol.velocity_direction
        raise TrajectoryError(f"has {len(positions)} frame(s): the state at frame {start} needs frames {first} … {last} "
                              f"(the model's velocity is a {direction} difference over {span} frame(s))", source=source)
    other = last if protocol.velocity_direction == "forward" else first
    return state_of_frames(protocol, positions[start], positions[other], start)


def state_of_frames(protocol: TrajectoryProtocol, x_start, x_other, start: int) -> tuple[np.ndarray, np.ndarray, str]:
    """:func:`state_at` from the two frames it reads: ``x_start`` [N, 3] (frame ``start``) and ``x_other`` [N, 3],
    the velocity's other end (frame start + s for a forward difference, start − s for a backward one)."""
    x, other, span = np.asarray(x_start), np.asarray(x_other), protocol.velocity_span
    if protocol.velocity_direction == "forward":
        return x, (other - x) / (span * protocol.frame_time), f"(x[{start + span}] − x[{start}]) / {span}"
    return x, (x - other) / (span * protocol.frame_time), f"(x[{start}] − x[{start - span}]) / {span}"


BLOW_UP_FACTOR = 1000.0


def _extent(x: torch.Tensor) -> torch.Tensor:
    """Largest distance of a node from the centroid of its frame, over ``x`` [..., N, 3] (the system's size)."""
    return (x - x.mean(dim=-2, keepdim=True)).norm(dim=-1).max()


def iter_windows(model: DynamicsModel, x, v, windows: int, charges=None,
                 constrain: Callable[[torch.Tensor], torch.Tensor] | None = None, *, molecule=None,
                 generator: torch.Generator | None = None) -> Iterator[Window]:
    """Roll ``model`` out for ``windows`` windows from positions x and velocities v: [N, 3], or [S, N, 3] for S
    starts of the same system rolled out together (one batched model call per window; ``Window.positions`` is
    then [S, P, N, 3]).

    ``charges`` [N]: partial charges (MD models with a charge feature) or particle charges (N-body).
    ``constrain``: an optional correction of each window's [P, N, 3] positions before they are yielded
    and seed the next window (e.g. :class:`~geomol.inference.dynamics.bond_restoring.BondRestoring`).
    ``molecule``: the heavy atoms' graph for models of many molecules
    (:class:`~geomol.data.dynamics.systems.MoleculeGraph`), or an MD model's coarse nodes
    (``model.protocol.coarse_nodes(atom names)``, for a model with coarse edges). ``generator``: the random
    stream of a generative model (default: seeded with 0, so that a rollout repeats).
    Runs under ``torch.inference_mode``; only the current state is kept between windows. A window
    whose positions are non-finite, or spread over more than ``BLOW_UP_FACTOR`` times the starting
    system's size (a blown-up rollout: errors fed back window after window grew without bound), ends
    the rollout early, with a warning.
    """
    protocol = model.protocol
    x = torch.as_tensor(x).to(model.device, model.dtype)
    v = torch.as_tensor(v).to(model.device, model.dtype)
    single = x.ndim == 2
    x, v = (x.unsqueeze(0), v.unsqueeze(0)) if single else (x, v)
    charges = None if charges is None else torch.as_tensor(charges).to(model.device, model.dtype)
    if x.ndim != 3 or x.shape[-1] != 3 or v.shape != x.shape:
        raise ConfigError(f"positions and velocities must both be [N, 3] (or [S, N, 3]), got {tuple(x.shape)} and "
                          f"{tuple(v.shape)}")
    if generator is None and model.generative:
        generator = torch.Generator(model.device).manual_seed(0)
    offsets = np.asarray(protocol.target_offsets)
    limit = BLOW_UP_FACTOR * max(float(_extent(x)), 1e-3)
    for k in range(windows):
        with torch.inference_mode():  # not held across the yield: the caller's code keeps its own grad mode
            frames = model.predict_states(x, v, charges, molecule=molecule, generator=generator)  # [S, P, N, 3]
            finite = bool(torch.isfinite(frames).all())
            if constrain is not None and finite:
                frames = torch.stack([constrain(part) for part in frames])
            v = next_velocity(protocol, frames, x)
            problem = "non-finite positions" if not finite else (
                f"positions spread over {BLOW_UP_FACTOR:g}× the starting system's size"
                if float(_extent(frames)) > limit else None)
        if problem:
            warnings.warn(f"the rollout diverged in window {k + 1} of {windows} ({problem}): stopped "
                          f"after {k} window(s)", UserWarning, stacklevel=2)
            return
        yield Window(k, k * protocol.window_frames + offsets, frames[0] if single else frames)
        x = frames[:, -1]


def kept_frames(window: Window, output_frames: str, horizon: int | None) -> list[int]:
    """Indices into the window's P frames that are written: all (or the last), up to ``horizon`` frames."""
    if output_frames not in OUTPUT_FRAMES:
        raise ConfigError(f"output_frames must be one of {OUTPUT_FRAMES}, got {output_frames!r}")
    indices = range(len(window.frame_offsets)) if output_frames == "all" else [len(window.frame_offsets) - 1]
    return [i for i in indices if horizon is None or window.frame_offsets[i] <= horizon]


@contextmanager
def progress_bar(total: int, enabled: bool, what: str = "rolling out"):
    """A rich progress bar over ``total`` windows; yields ``advance()`` (a no-op when disabled)."""
    if not enabled:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn(what), BarColumn(), MofNCompleteColumn(), TextColumn("windows"), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(what, total=total)
        yield lambda: progress.advance(task)


def rollout_arrays(model: DynamicsModel, positions, velocities, *, frames: int | None = None,
                   windows: int | None = None, charges=None, output_frames: str = "all", include_start: bool = True,
                   progress: bool = False, molecule=None, seed: int = 0) -> ArrayRollout:
    """Roll out from one in-memory state and return every kept frame as arrays.

    Args:
        model: a loaded trajectory model (:func:`geomol.load_model`).
        positions, velocities: [N, 3] (array or tensor) in the model's length and velocity units.
        frames: frames past the start to reach (windows = ceil(frames / o_P); later frames of the
            last window are dropped); or ``windows``. Neither: one window.
        charges, molecule: see :func:`iter_windows`.
        output_frames: ``"all"`` predicted frames in time order, or only window ``"ends"``.
        include_start: the input state is the first frame (offset 0).
        seed: a generative model's random stream (the same seed repeats the rollout).

    Returns:
        :class:`ArrayRollout` with ``frame_offsets`` [F] and ``positions`` [F, N, 3] (float64 numpy).
    """
    total = num_windows(model.protocol, frames, windows)
    offsets, out = ([0], [np.asarray(torch.as_tensor(positions).double().cpu())]) if include_start else ([], [])
    with progress_bar(total, progress) as advance:
        generator = torch.Generator(model.device).manual_seed(seed)
        for window in iter_windows(model, positions, velocities, total, charges, molecule=molecule,
                                   generator=generator):
            for i in kept_frames(window, output_frames, frames):
                offsets.append(int(window.frame_offsets[i]))
                out.append(window.positions[i].double().cpu().numpy())
            advance()
    return ArrayRollout(np.asarray(offsets, dtype=np.int64), np.stack(out), model.protocol)
