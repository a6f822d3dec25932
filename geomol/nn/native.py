"""Compiled loops, built on first use: GET's per-atom-pair work (``attend_pairs.cpp``, ``nearest.cpp``), its group
level and group MLPs (``attend_groups.cpp``, ``group_mlp.cpp``, driven by :mod:`geomol.nn.attend_groups` and
:mod:`geomol.nn.group_mlp`), the bias/SiLU/dropout passes of its hand-written MLP backward passes
(``silu_rows.cpp``, :mod:`geomol.nn.fused_silu`) and EGNO's EGNN edge MLPs (``egnn_edges.cpp``, driven by
:mod:`geomol.nn.egnn_compiled`).

In eager PyTorch the three pair MLPs of :func:`geomol.nn.attend.attend` are some twenty passes over
[pairs, heads, 3rh] tensors (products with 8–24 columns, SiLUs, gathers, the group softmax, the α-weighted
sums); on a 10 Å pocket they cost ~11 µs per atom pair per training step although the arithmetic is ~0.3 µs.
:func:`attend_pairs` keeps each pair's 3rh values in registers and writes only what the next stage reads: the
groups' α-weighted sums, their block-logit sums and α·w_c per pair; :func:`attend_pairs_backward` recomputes
that group by group and runs the chain rule down to the inputs, the distances and the weights. With 8 features
per head (GET's default) on a processor with AVX-512 the pair MLPs run two heads per 16-float vector
(``pair_heads_wide.h``; :func:`wide_loops` says whether they are compiled in, ``GEOMOL_NATIVE_WIDE=0`` keeps
the 8-float loops). For the graph
itself, :func:`block_min_distance` (block edges) and :func:`nearest_atoms` (atom pairs) measure atom distances
in one loop instead of padded distance matrices.

The library is compiled once per machine with the system's C++ compiler (``$CXX``, else ``c++``; ``-O3
-march=native``; a few seconds, the sources side by side) into ``$GEOMOL_CACHE`` (default ``~/.cache/geomol``)
/native, keyed by the sources (with the shared headers), the flags and the CPU's instruction sets.
Without a compiler, or with ``GEOMOL_NATIVE=0``, everything runs the PyTorch formulations instead (same
functions; float32 results agree to rounding). Work is split over ``torch.get_num_threads()`` threads by ranges
of groups or edges, run on an OpenMP team (``parallel.cpp``: with torch's CPU build that is torch's own libgomp
and worker threads) or, where the compiler lacks OpenMP, on Python threads (the loops run without the GIL).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import tempfile
import threading
import time
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import torch

from geomol.nn.radial import FLUSH_BELOW, MIN_EXPONENT, envelope_coefficients

__all__ = ["NATIVE_ENV", "WIDE_ENV", "native_available", "wide_loops", "attend_pairs", "attend_pairs_backward",
           "diagonal_blocks", "counting_products", "count_products", "native_ready", "block_min_distance",
           "nearest_atoms", "MAX_NEAREST", "run_edge_ranges", "keep_bits", "forget_derived", "timing_compiled"]

MAX_NEAREST = 64
"""The most atoms :func:`nearest_atoms` keeps per group."""

NATIVE_ENV = "GEOMOL_NATIVE"
"""Set to ``0`` to run the PyTorch formulations even where the compiled library is available."""
WIDE_ENV = "GEOMOL_NATIVE_WIDE"
"""Set to ``0`` to run GET's pair MLPs on 8-float vectors even where the 16-float loops are compiled in (read by
the compiled library at each call)."""
SOURCES = tuple(Path(__file__).with_name(name) for name in ("attend_pairs.cpp", "attend_groups.cpp", "group_mlp.cpp",
                                                            "nearest.cpp", "egnn_edges.cpp", "silu_rows.cpp",
                                                            "time_conv.cpp", "parallel.cpp"))
HEADERS = tuple(Path(__file__).with_name(name) for name in ("native_math.h", "native_packed.h", "pair_heads_wide.h"))
FLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC")
OPENMP_FLAGS = ("-fopenmp",)
"""Tried first; a compiler without OpenMP builds the library without them (its ranges then run on Python threads)."""
_SUFFIX = {torch.float32: "f32", torch.float64: "f64"}
_N_FORWARD_POINTERS, _N_BACKWARD_POINTERS = 21, 14

_lock = threading.Lock()
_counted: list[int] = []  # product FLOPs of the compiled calls inside counting_products()
_timed: list[dict[str, float]] = []  # CPU seconds per compiled function inside timing_compiled()
_library: ctypes.CDLL | None = None
_tried = False


def _cpu_signature() -> str:
    """The CPU's instruction-set flags (Linux), else the platform's description: ``-march=native`` code is only
    reused on a CPU with the same ones (a cache directory shared between machines stays safe)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def _build(compiler: str, target: Path) -> None:
    """Compile the library to ``target`` (atomically: a temporary file renamed into place)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        built = Path(tmp) / target.name
        try:
            _compile(compiler, [*OPENMP_FLAGS, *FLAGS], Path(tmp), built)
        except subprocess.CalledProcessError:
            _compile(compiler, list(FLAGS), Path(tmp), built)
        os.replace(built, target)
    _prune(target.parent)


def _compile(compiler: str, flags: list[str], directory: Path, library: Path) -> None:
    """Compile every source to an object in ``directory``, all at once (the cores share the work), then link
    ``library``; CalledProcessError (with the compiler's messages) if a step fails."""
    objects = [directory / f"{source.stem}.o" for source in SOURCES]
    jobs = [subprocess.Popen([compiler, *flags, "-c", str(source), "-o", str(target)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for source, target in zip(SOURCES, objects)]
    for job in jobs:
        _, errors = job.communicate()
        if job.returncode:
            raise subprocess.CalledProcessError(job.returncode, job.args, stderr=errors)
    subprocess.run([compiler, *flags, *map(str, objects), "-o", str(library)], check=True, capture_output=True,
                   text=True)


KEPT_BUILDS = 8
"""Builds of the library kept in the cache (one per source version and machine; older ones are removed)."""


def _prune(directory: Path, keep: int = KEPT_BUILDS) -> None:
    """Remove all but the ``keep`` most recently built libraries in ``directory`` (a process that has one loaded
    keeps its mapping; a checkout that wants a removed one builds it again)."""
    builds = sorted(directory.glob("geomol-native-*.so"), key=lambda path: path.stat().st_mtime, reverse=True)
    for old in builds[keep:]:
        old.unlink(missing_ok=True)


def _load() -> ctypes.CDLL | None:
    compiler = os.environ.get("CXX", "c++")
    texts = [source.read_text() for source in SOURCES + HEADERS]
    key = hashlib.sha256("\n".join([*texts, compiler, *FLAGS, *OPENMP_FLAGS, _cpu_signature()]).encode()).hexdigest()
    cache = Path(os.environ.get("GEOMOL_CACHE", Path.home() / ".cache" / "geomol"))
    target = cache / "native" / f"geomol-native-{key[:16]}.so"
    try:
        if not target.exists():
            _build(compiler, target)
        library = ctypes.CDLL(str(target))
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", "") or error
        warnings.warn(f"geomol: the compiled loops (GET's attention and atom distances, EGNO's edge MLPs) are "
                      f"unavailable ({detail}); GET and EGNO run their PyTorch formulations (same results, slower)",
                      RuntimeWarning, stacklevel=3)
        return None
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    forward = [size, size, pointer] + [size] * 6 + [pointer] * _N_FORWARD_POINTERS
    for suffix in _SUFFIX.values():
        for name, argtypes in (("", forward), ("_backward", forward + [pointer] * _N_BACKWARD_POINTERS)):
            function = getattr(library, f"geomol_attend_pairs{name}_{suffix}")
            function.restype, function.argtypes = ctypes.c_int, argtypes
        distances = getattr(library, f"geomol_block_min_distance_{suffix}")
        distances.restype, distances.argtypes = ctypes.c_int, [size, size, pointer, size] + [pointer] * 5
        nearest = getattr(library, f"geomol_nearest_atoms_{suffix}")
        nearest.restype, nearest.argtypes = ctypes.c_int, [size, size, pointer, size] + [pointer] * 3 + [size, pointer]
        for name, n_pointers in (("forward", 17), ("backward", 30)):
            function = getattr(library, f"geomol_egnn_fused_{name}_{suffix}")
            function.restype, function.argtypes = ctypes.c_int, [size] * 4 + [pointer] * n_pointers
        rows = getattr(library, f"geomol_silu_rows_{suffix}")
        rows.restype, rows.argtypes = ctypes.c_int, [size] * 3 + [pointer, size, pointer, size] + [pointer] * 3 + [size]
        grads = getattr(library, f"geomol_silu_grad_rows_{suffix}")
        grads.restype = ctypes.c_int
        grads.argtypes = [size] * 3 + [pointer, size] * 2 + [pointer] * 3 + [size] + [pointer, size]
        for name, n_pointers in (("", 18), ("_backward", 22)):
            function = getattr(library, f"geomol_attend_groups{name}_{suffix}")
            function.restype, function.argtypes = ctypes.c_int, [size] * 8 + [pointer] * n_pointers
        mlp = getattr(library, f"geomol_group_mlp_{suffix}")
        mlp.restype, mlp.argtypes = ctypes.c_int, [size] * 5 + [pointer, size] + [pointer] * 8
        mlp = getattr(library, f"geomol_group_mlp_backward_{suffix}")
        mlp.restype, mlp.argtypes = ctypes.c_int, [size] * 5 + [pointer, size] + [pointer] * 10 + [size] + [pointer] * 4
        for name, n_pointers in (("analysis", 3), ("analysis_backward", 4), ("synthesis", 5),
                                 ("synthesis_backward", 5)):
            function = getattr(library, f"geomol_time_{name}_{suffix}")
            function.restype, function.argtypes = ctypes.c_int, [size] * 6 + [pointer] * n_pointers
    library.geomol_keep_bits.restype, library.geomol_keep_bits.argtypes = ctypes.c_int, [size] * 4 + [pointer]
    library.geomol_run_ranges.restype = ctypes.c_int
    library.geomol_run_ranges.argtypes = [size, pointer, pointer, size]
    library.geomol_openmp.restype, library.geomol_openmp.argtypes = ctypes.c_int, []
    return library


def native_available() -> bool:
    """True where the compiled library is built (or can be: this call builds it) and not switched off."""
    global _library, _tried
    if os.environ.get(NATIVE_ENV, "1") == "0":
        return False
    if not _tried:  # (called a few hundred times a training step: no lock once decided)
        with _lock:
            if not _tried:
                _library, _tried = _load(), True
    return _library is not None


def wide_loops() -> bool:
    """True where the compiled pair stage runs two heads per 16-float vector (AVX-512; float32, 8 features per
    head, two heads or more) unless ``GEOMOL_NATIVE_WIDE=0``."""
    return native_available() and bool(_library.geomol_attend_pairs_wide()) and os.environ.get(WIDE_ENV, "1") != "0"


@contextmanager
def counting_products():
    """Count the arithmetic of the matrix-vector products the compiled loops perform (which torch.profiler
    cannot see) while the block runs: ``with counting_products() as count: ...; count[0]`` (FLOPs, 2 per
    multiply-add), for benchmarks that compare the work of two implementations."""
    count = [0]
    _counted.append(0)
    try:
        yield count
    finally:
        count[0] = _counted.pop()


@contextmanager
def timing_compiled():
    """Measure the CPU time spent inside the compiled loops while the block runs: ``with timing_compiled() as
    spent: ...; spent`` ({function name: CPU seconds of the calling thread}; with one thread, all their time), for
    benchmarks that tell the compiled loops' share of a step from the rest."""
    spent: dict[str, float] = {}
    _timed.append(spent)
    try:
        yield spent
    finally:
        # by identity: list.remove compares by value, and two nested blocks with equal times are equal dicts
        del _timed[next(i for i, block in enumerate(_timed) if block is spent)]


def timed_call(name: str, function, *arguments):
    """``function(*arguments)``; inside :func:`timing_compiled` blocks, the calling thread's CPU time in it is added
    to theirs under ``name`` (outside them, one list test and nothing else)."""
    if not _timed:
        return function(*arguments)
    start = time.thread_time()
    try:
        return function(*arguments)
    finally:
        elapsed = time.thread_time() - start  # read once: nested blocks all add the same time
        for spent in _timed:
            spent[name] = spent.get(name, 0.0) + elapsed


def count_products(flops: int) -> None:
    """Add ``flops`` (2 per multiply-add) to the innermost :func:`counting_products` block, if any."""
    if _counted:
        _counted[-1] += flops


def _count_products(n_pair_heads: int, rh: int, nr: int, C: int, backward: bool) -> None:
    """Add the products of ``n_pair_heads`` (pair, head) rows: per row, forward 2·(3rh·nr + 3rh² + (2 + C)·3rh)
    (W2 as its three diagonal blocks); the backward pass recomputes that and adds twice as much again (the
    gradients of each product's input and of its weight)."""
    forward = 2 * (3 * rh * nr + 3 * rh * rh + (2 + C) * 3 * rh)
    count_products(n_pair_heads * forward * (3 if backward else 1))


def _function(name: str):
    """The compiled function ``name``; RuntimeError where the library is unavailable (see :func:`native_available`)."""
    if not native_available():
        raise RuntimeError(f"geomol: the compiled library is unavailable (or {NATIVE_ENV}=0); {name} cannot run")
    return getattr(_library, name)


_pool: tuple[int, ThreadPoolExecutor] | None = None  # (process id, pool)
MIN_GROUPS_PER_THREAD = 64
"""Work is split over threads only in ranges of at least this many groups (thread hand-off costs ~10 µs)."""


def _group_ranges(n_groups: int, starts: torch.Tensor) -> list[tuple[int, int]]:
    """Consecutive ranges of groups with about equal numbers of pairs, one per thread (at most
    ``torch.get_num_threads()``, each of at least :data:`MIN_GROUPS_PER_THREAD` groups)."""
    threads = min(torch.get_num_threads(), max(1, n_groups // MIN_GROUPS_PER_THREAD))
    if threads <= 1:
        return [(0, n_groups)]
    cuts = torch.searchsorted(starts, torch.linspace(0, int(starts[-1]), threads + 1, dtype=starts.dtype)[1:-1])
    bounds = [0, *cuts.tolist(), n_groups]
    return [(b, e) for b, e in zip(bounds[:-1], bounds[1:]) if e > b]


def _run_ranges(name: str, ranges: list[tuple[int, int]], arguments: list, error: str, accumulate=()) -> None:
    """Compiled function ``name``(begin, end, *arguments) for every range (arguments: integers, tensors, passed as
    their data pointers, and None for a null pointer), at once on an OpenMP team where the library has OpenMP
    (:file:`parallel.cpp`), else the first range on the calling thread and the others on a pool of Python threads
    (the compiled functions run without the GIL).

    ``accumulate``: tensors among ``arguments``, zero-initialised, that the function adds into (+=): the first range
    adds into them, every other range into zeros of its own, summed into them afterwards.

    Raises ValueError ``"{name}: {error}"`` if a call reports invalid arguments; RuntimeError where the library is
    unavailable."""
    timed_call(name, _run_ranges_now, name, ranges, arguments, error, accumulate)


def _run_ranges_now(name: str, ranges: list[tuple[int, int]], arguments: list, error: str, accumulate=()) -> None:
    """:func:`_run_ranges`, untimed."""
    function = _function(name)
    if len(ranges) == 1:  # the common one-thread case, without the bookkeeping below
        status = function(*ranges[0], *[a.data_ptr() if isinstance(a, torch.Tensor) else a for a in arguments])
        if status:
            raise ValueError(f"{name}: {error} (code {status})")
        return
    shared = [k for k, a in enumerate(arguments) if any(a is t for t in accumulate)]
    per_range = [list(arguments) for _ in ranges]
    for args in per_range[1:]:
        for k in shared:
            args[k] = torch.zeros_like(args[k])
    words = [[a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args] for args in per_range]
    if len(ranges) > 1 and _library.geomol_openmp():
        flat = [word or 0 for (begin, end), args in zip(ranges, words) for word in (begin, end, *args)]
        status = _library.geomol_run_ranges(len(ranges), ctypes.cast(getattr(_library, f"{name}_packed"),
                                                                     ctypes.c_void_p),
                                            (ctypes.c_int64 * len(flat))(*flat), 2 + len(arguments))
    else:
        status = _run_on_threads(function, ranges, words)
    if status:
        raise ValueError(f"{name}: {error} (code {status})")
    for args in per_range[1:]:
        for k in shared:
            per_range[0][k] += args[k]


def _run_on_threads(function, ranges: list[tuple[int, int]], arguments: list[list]) -> int:
    """:func:`_run_ranges` without OpenMP; returns the bitwise or of the calls' return codes."""
    global _pool
    if len(ranges) == 1:
        return function(*ranges[0], *arguments[0])
    # a pool made before a fork has no threads in the child: make one per process
    if _pool is None or _pool[0] != os.getpid() or _pool[1]._max_workers < len(ranges) - 1:
        if _pool is not None and _pool[0] == os.getpid():
            _pool[1].shutdown(wait=False)
        _pool = (os.getpid(), ThreadPoolExecutor(max_workers=len(ranges) - 1, thread_name_prefix="geomol-native"))
    others = [_pool[1].submit(function, *ranges[i], *arguments[i]) for i in range(1, len(ranges))]
    status = function(*ranges[0], *arguments[0])
    for future in others:
        status |= future.result()
    return status


def diagonal_blocks(w2: torch.Tensor, rh: int) -> torch.Tensor:
    """[3, rh, rh] the three diagonal blocks of the block-diagonal [3rh, 3rh] ``w2``."""
    return torch.stack([w2[b * rh:(b + 1) * rh, b * rh:(b + 1) * rh] for b in range(3)])


_derived: dict[int, tuple[weakref.ref, dict[str, tuple]]] = {}


def _derived_once(tensor: torch.Tensor, name: str, make) -> torch.Tensor:
    """``make(tensor)`` (a rearranged copy of a weight), made once per tensor and state: all chunks of a layer
    share its weights. Keyed by the tensor's identity, checked through a weak reference (a new tensor at a
    reused address is not mistaken for the old one), its version (in-place changes), storage and dtype.
    Writes through ``.data`` change none of these: the module owning a weight calls :func:`forget_derived`
    at the start of its forward pass."""
    if tensor.is_inference():  # no version counter to tell an in-place change: made every time
        return make(tensor)
    # ``.data`` can be replaced (``module.double()``) without a new version: the storage and dtype are checked too
    state = (tensor._version, tensor.data_ptr(), tensor.dtype, tensor.shape)
    slot = _derived.get(id(tensor))
    if slot is None or slot[0]() is not tensor:
        if len(_derived) > 256:
            _derived.clear()
        slot = _derived[id(tensor)] = (weakref.ref(tensor), {})
    hit = slot[1].get(name)
    if hit is not None and hit[0] == state:
        return hit[1]
    value = make(tensor)
    slot[1][name] = (state, value)
    return value


def forget_derived(tensors) -> None:
    """Drop what :func:`_derived_once` made from ``tensors``: their next use makes it afresh (a module's forward
    pass calls it for its weights, so that writes through ``.data`` between passes, which no version counter
    records, are seen)."""
    for tensor in tensors:
        _derived.pop(id(tensor), None)


def _basis_constants(rbf, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The basis' offsets [R] and constants (inv_cutoff, gamma, envelope a, b, c, MIN_EXPONENT, FLUSH_BELOW) as
    ``dtype`` tensors, for the compiled basis."""
    def make(offset):
        a, b, c = envelope_coefficients(rbf.envelope_exponent)
        constants = [rbf.inv_cutoff, rbf.gamma, a, b, c, MIN_EXPONENT, FLUSH_BELOW]
        return offset.to(dtype), torch.tensor(constants, dtype=dtype)
    return _derived_once(rbf.offset, f"basis {dtype} {rbf.inv_cutoff} {rbf.gamma} {rbf.envelope_exponent}", make)


def _arguments(starts, sender, sender_index, receiver, w_rbf, w2, b2, w3, b3, radial, distance, rbf, keep: bool,
               outputs: bool = True):
    """(function suffix, (h, nr, rh, C, n_rbf, envelope exponent), the forward pass's tensors in the C order,
    the outputs by name) for the compiled functions; see :func:`attend_pairs`. ``outputs=False`` (the backward
    pass, which does not write them): null pointers in the outputs' places."""
    n_groups, h, rh = receiver.shape
    C, nr = w3.size(0) - 2, w_rbf.size(1)
    dtype = receiver.dtype
    p = (radial if radial is not None else distance).size(0)
    floats = [radial, distance, None, None, sender, None, receiver,
              _derived_once(w_rbf, "transposed", lambda w: w.T.contiguous()),
              _derived_once(w2, "blocks transposed", lambda w: diagonal_blocks(w, rh).transpose(1, 2).contiguous()),
              b2, w3, b3]
    n_rbf = envelope = 0
    if radial is None:
        n_rbf, envelope = rbf.offset.numel(), rbf.envelope_exponent
        floats[2], floats[3] = _basis_constants(rbf, dtype)
    if dtype not in _SUFFIX or any(t is not None and t.dtype != dtype for t in floats):
        raise TypeError(f"attend_pairs: every tensor must be float32 or float64 alike (receiver is {dtype})")
    tensors = [None if t is None else t.contiguous() for t in floats]
    tensors[5] = None if sender_index is None else sender_index.contiguous()
    new = receiver.new_empty
    out = {}
    if outputs:
        out.update(summed=new(n_groups, 2, h, rh), block_sum=new(n_groups, h), alpha_weight=new(p, h, C))
    if keep:
        out.update({name: new(p, h, 3 * rh) for name in ("pre1", "act1", "pre2", "hidden")})
        out.update(scalars=new(p, h, 2 + C), alpha=new(p, h))
    tensors += [out.get("summed"), out.get("block_sum"), out.get("alpha_weight")]
    tensors += [out.get(name) for name in ("pre1", "act1", "pre2", "hidden", "scalars", "alpha")]
    return _SUFFIX[dtype], (h, nr, rh, C, n_rbf, envelope), tensors, out


def _call(name: str, starts: torch.Tensor, sizes, tensors, n_groups: int, accumulate=()) -> None:
    """Run compiled function ``name``(begin, end, starts, *sizes, *tensors, *accumulate) over ranges of groups
    (:func:`_group_ranges`, :func:`_run_ranges`; ``accumulate``: zeroed tensors it adds into)."""
    starts = starts.contiguous()
    _run_ranges(name, _group_ranges(n_groups, starts), [starts, *sizes, *tensors, *accumulate],
                "invalid sizes or an empty group", accumulate)


def attend_pairs(starts: torch.Tensor, sender: torch.Tensor, sender_index: torch.Tensor | None,
                 receiver: torch.Tensor, w_rbf: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor, w3: torch.Tensor,
                 b3: torch.Tensor, *, radial: torch.Tensor | None = None, distance: torch.Tensor | None = None,
                 rbf=None, keep: bool = False) -> dict[str, torch.Tensor]:
    """Run the compiled per-pair stage (call :func:`native_available` first). No autograd.

    Args:
        starts: [g + 1] group offsets (:attr:`geomol.nn.atom_pairs.PairIndex.group_start`).
        sender: [n_s, h, 3rh] sender terms; sender_index: [p] row of each pair (None: row p).
        receiver: [g, h, rh] query + edge terms of each group.
        w_rbf [3rh, nr], w2 [3rh, 3rh] (block-diagonal: only its three diagonal blocks are read), b2 [3rh],
        w3 [2 + C, 3rh], b3 [2 + C]: the weights of :func:`~geomol.nn.attend.attend`.
        radial: [p, h, nr] RBF features of each pair's head slice; or instead
        distance: [p, C] pair distances and rbf, the :class:`~geomol.nn.radial.RadialBasis` to expand them with.
        keep: also return pre1, act1, pre2, hidden [p, h, 3rh], scalars [p, h, 2 + C] and alpha [p, h].

    Returns:
        summed [g, 2, h, rh] (Σ α · hidden[rh:], the node part then the coordinate part), block_sum [g, h]
        (Σ block logits), alpha_weight [p, h, C] (α · w_c) and, with ``keep``, the per-pair tensors above.
    """
    suffix, sizes, tensors, out = _arguments(starts, sender, sender_index, receiver, w_rbf, w2, b2, w3, b3, radial,
                                             distance, rbf, keep)
    _call(f"geomol_attend_pairs_{suffix}", starts, sizes, tensors, receiver.size(0))
    h, nr, rh, C = sizes[:4]
    _count_products(out["alpha_weight"].size(0) * h, rh, nr, C, backward=False)
    return out


def attend_pairs_backward(starts: torch.Tensor, sender: torch.Tensor, sender_index: torch.Tensor | None,
                          receiver: torch.Tensor, w_rbf: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor,
                          w3: torch.Tensor, b3: torch.Tensor, g_summed: torch.Tensor, g_block_sum: torch.Tensor,
                          g_alpha_weight: torch.Tensor, *, radial: torch.Tensor | None = None,
                          distance: torch.Tensor | None = None, rbf=None) -> dict[str, torch.Tensor]:
    """Gradients of :func:`attend_pairs`' outputs with respect to its inputs, compiled: the pair stage is
    recomputed group by group and differentiated by hand, nothing per pair and head is kept in memory.

    Args:
        the inputs of :func:`attend_pairs` (``radial`` given, or ``distance`` and ``rbf``), and the gradients
        g_summed [g, 2, h, rh], g_block_sum [g, h], g_alpha_weight [p, h, C] of its three outputs.

    Returns:
        sender [p, h, 3rh] (one row per pair; with ``sender_index``, [n_s, h, 3rh]: summed per sending atom),
        receiver [g, h, rh], radial [p, h, nr]
        (given ``radial``) or distance [p, C] (given ``distance``), w_rbf, w2 (block-diagonal: zero off its
        diagonal blocks), b2, w3, b3: the gradients, by input name.
    """
    suffix, sizes, tensors, _ = _arguments(starts, sender, sender_index, receiver, w_rbf, w2, b2, w3, b3, radial,
                                           distance, rbf, False, outputs=False)
    (n_groups, h, rh), nr = receiver.shape, w_rbf.size(1)
    p = (radial if radial is not None else distance).size(0)
    blocks = _derived_once(w2, "blocks", lambda w: diagonal_blocks(w, rh).contiguous())
    new = receiver.new_empty
    per_atom = sender_index is not None
    grads = {"sender": torch.zeros_like(sender) if per_atom else receiver.new_zeros(p, h, 3 * rh),
             "receiver": new(n_groups, h, rh)}
    if radial is not None:
        grads["radial"] = new(p, h, nr)
    else:
        grads["distance"] = new(distance.shape)
    inputs = [w_rbf.contiguous(), blocks] + [t.contiguous() for t in (g_summed, g_block_sum, g_alpha_weight)]
    outputs = [grads["sender"], grads["receiver"], grads.get("radial"), grads.get("distance")]
    g_w_rbf, g_blocks, g_b2, g_w3, g_b3 = (torch.zeros_like(t) for t in (w_rbf, blocks, b2, w3, b3))
    _call(f"geomol_attend_pairs_backward_{suffix}", starts, sizes, tensors + inputs + outputs, n_groups,
          [g_w_rbf, g_blocks, g_b2, g_w3, g_b3] + ([grads["sender"]] if per_atom else []))
    _count_products(p * h, rh, nr, w3.size(0) - 2, backward=True)
    grads.update(w_rbf=g_w_rbf, w2=torch.block_diag(*g_blocks), b2=g_b2, w3=g_w3, b3=g_b3)
    return grads


def native_ready(*tensors: torch.Tensor) -> bool:
    """Whether the compiled functions can take these tensors: CPU tensors, floating ones all float32 or all
    float64, and the library available."""
    floats = {t.dtype for t in tensors if t.is_floating_point()}
    on_cpu = all(t.device.type == "cpu" for t in tensors)
    return len(floats) == 1 and floats <= {torch.float32, torch.float64} and on_cpu and native_available()


def _equal_ranges(n: int, threads: int) -> list[tuple[int, int]]:
    """``threads`` consecutive ranges of about equal length covering 0 … n − 1 (one empty range when n = 0)."""
    if threads <= 1:
        return [(0, n)]
    bounds = [n * t // threads for t in range(threads + 1)]
    return [(b, e) for b, e in zip(bounds[:-1], bounds[1:]) if e > b] or [(0, 0)]


def _split(name: str, n: int, *args) -> None:
    """Compiled function ``name``(begin, end, *args) over ``torch.get_num_threads()`` equal ranges of ``n`` items
    (:func:`_run_ranges`); ValueError if it reports invalid arguments."""
    ranges = _equal_ranges(n, min(torch.get_num_threads(), max(1, n // (MIN_GROUPS_PER_THREAD * 4))))
    _run_ranges(name, ranges, list(args), "invalid arguments")


def split_typed(name: str, n: int, dtype: torch.dtype, *args) -> None:
    """:func:`_split` of compiled function ``{name}_{f32|f64}``, the variant for ``dtype``."""
    _split(f"{name}_{_SUFFIX[dtype]}", n, *args)


_constants: dict[tuple[float, torch.dtype], torch.Tensor] = {}


def constant(value: float, dtype: torch.dtype) -> torch.Tensor:
    """A one-element CPU tensor holding ``value`` (cached per value and dtype), for compiled loops that read a
    number of the tensors' dtype through a pointer."""
    key = (value, dtype)
    if key not in _constants:
        with torch.inference_mode(False):  # cached: an inference tensor could not be saved for backward later
            _constants[key] = torch.tensor([value], dtype=dtype)
    return _constants[key]


def keep_bits(keep: torch.Tensor, seed: int, threshold: int) -> None:
    """Fill the contiguous bool tensor ``keep`` with a dropout mask: element i is kept (True) where the 15 low bits
    of draw i of SplitMix64's stream from ``seed`` (0 ≤ seed < 2⁶³; draw i: 16-bit part i mod 4 of word ⌊i/4⌋)
    are ≥ ``threshold`` (0 … 2¹⁵). Counter-based: the same bits whatever the split over threads."""
    _split("geomol_keep_bits", keep.numel(), seed, threshold, keep.data_ptr())


def block_min_distance(Z: torch.Tensor, block_start: torch.Tensor, block_len: torch.Tensor, rows: torch.Tensor,
                       cols: torch.Tensor) -> torch.Tensor:
    """[P] minimum atom–atom distance (minimum over channels of the Euclidean distance) between blocks ``rows[p]``
    and ``cols[p]``, compiled (:func:`geomol.nn.block_edges.block_min_distance` is the reference).
    Z [N, C, 3]; block_start, block_len [Nb]; rows, cols [P]."""
    Z, args = Z.contiguous(), [t.contiguous() for t in (block_start, block_len, rows, cols)]
    out = Z.new_empty(rows.numel())
    _split(f"geomol_block_min_distance_{_SUFFIX[Z.dtype]}", rows.numel(), Z.data_ptr(), Z.size(1),
           *[t.data_ptr() for t in args], out.data_ptr())
    return out


def nearest_atoms(Z: torch.Tensor, group_atom: torch.Tensor, first: torch.Tensor, count: torch.Tensor,
                  keep: int) -> torch.Tensor:
    """[g, keep] for each group, the ``keep`` atoms among ``first[g]`` … ``first[g] + count[g] − 1`` nearest to atom
    ``group_atom[g]`` (distance: sum over channels of the Euclidean distance), nearest first, ties to the lower
    index; columns past ``count[g]`` hold ``first[g] + column``. Z [N, C, 3]; keep ≤ :data:`MAX_NEAREST`."""
    if not 1 <= keep <= MAX_NEAREST:
        raise ValueError(f"nearest_atoms: keep must be 1 … {MAX_NEAREST}, got {keep}")
    Z, args = Z.contiguous(), [t.contiguous() for t in (group_atom, first, count)]
    out = torch.empty(group_atom.numel(), keep, dtype=torch.long)
    _split(f"geomol_nearest_atoms_{_SUFFIX[Z.dtype]}", out.size(0), Z.data_ptr(), Z.size(1),
           *[t.data_ptr() for t in args], keep, out.data_ptr())
    return out


MIN_ELEMENTS_PER_THREAD = 1 << 15
"""EGNN edges are split over threads only in ranges of at least this many [edge, slice, channel] elements."""


def run_edge_ranges(name: str, n_edges: int, per_edge: int, arguments: list, accumulate=()) -> int:
    """Run compiled function ``name``(begin, end, *arguments) over ranges of edges, one per thread (at most
    ``torch.get_num_threads()``, each of at least :data:`MIN_ELEMENTS_PER_THREAD` elements at ``per_edge`` an
    edge); ``accumulate``: the zeroed tensors among ``arguments`` it adds into (see :func:`_run_ranges`).
    Returns the number of ranges; ValueError if the function reports invalid arguments."""
    threads = min(torch.get_num_threads(), max(1, n_edges * per_edge // MIN_ELEMENTS_PER_THREAD))
    ranges = _equal_ranges(n_edges, threads)
    _run_ranges(name, ranges, arguments, "invalid sizes or an unsupported width", accumulate)
    return len(ranges)
