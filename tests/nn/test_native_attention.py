"""The compiled per-pair stage of GET's attention (geomol.nn.native) against its PyTorch formulation."""
import ctypes
import os
import platform
import warnings

import pytest
import torch

from geomol.nn import atom_pairs, bilevel_attention, block_edges, native
from geomol.nn.atom_pairs import sparse_atom_pairs
from geomol.nn.attend_groups import attend_groups
from geomol.nn.attend import _groups, _heads, _pair_stage
from geomol.nn.attend_backward import _pair_stage_backward
from geomol.nn.bilevel_attention import BilevelAttention
from geomol.nn.radial import RadialBasis

pytestmark = pytest.mark.skipif(not native.native_available(), reason="no C++ compiler: the PyTorch path runs alone")


def _pairs_case(dtype, rh, n_head, n_channel, n_rbf, seed=0):
    """Random inputs of the pair stage on real sparse pairs (groups of 1–3 pairs)."""
    gen = torch.Generator().manual_seed(seed)
    block_len = torch.tensor([1, 4, 3, 1, 5, 2, 6, 1])
    block_id = torch.repeat_interleave(torch.arange(len(block_len)), block_len)
    Z = 0.8 * torch.randn(len(block_id), n_channel, 3, dtype=dtype, generator=gen)
    edges = torch.tensor([[0, 0, 1, 1, 2, 2, 1, 3, 4, 4, 5, 5, 6, 6, 7], [0, 1, 1, 2, 2, 0, 6, 4, 4, 5, 5, 3, 1, 7, 6]])
    pairs = sparse_atom_pairs(Z, block_id, edges, k=3)
    index = pairs.full_index()
    p, g = pairs.num_pairs, pairs.num_groups
    rand = lambda *shape: torch.randn(*shape, dtype=dtype, generator=gen)  # noqa: E731
    w2 = torch.block_diag(*(0.5 * rand(rh, rh) for _ in range(3)))
    weights = (0.5 * rand(3 * rh, n_channel * n_rbf // n_head), w2, 0.3 * rand(3 * rh), rand(2 + n_channel, 3 * rh),
               rand(2 + n_channel))
    x = Z.index_select(0, pairs.pair_atom) - Z.index_select(0, pairs.pair_neighbor)
    distance = torch.linalg.vector_norm(x, dim=-1)
    sender = rand(len(block_id), n_head, 3 * rh)
    return index, pairs, distance, sender, rand(g, n_head, rh), weights, p


@pytest.fixture(params=["wide", "8-float"])
def loops(request, monkeypatch):
    """Each compiled test below runs with the 16-float loops (where compiled in) and with the 8-float ones."""
    if request.param == "8-float":
        monkeypatch.setenv(native.WIDE_ENV, "0")
    return request.param


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("rh, n_head, n_channel, n_rbf", [(8, 4, 1, 32), (4, 4, 1, 16), (4, 2, 2, 8), (8, 3, 1, 24)])
@pytest.mark.parametrize("basis", ["given", "computed"])
def test_compiled_pair_stage_matches_pytorch(dtype, rh, n_head, n_channel, n_rbf, basis, loops):
    index, pairs, distance, sender, receiver, weights, p = _pairs_case(dtype, rh, n_head, n_channel, n_rbf)
    rbf = RadialBasis(n_rbf, cutoff=1.5)
    radial = _heads(rbf(distance), n_head)
    want = _pair_stage(index, radial, sender.index_select(0, pairs.pair_neighbor), receiver, *weights, keep=True)
    starts = index.group_start
    source = dict(radial=radial) if basis == "given" else dict(distance=distance, rbf=rbf)
    got = native.attend_pairs(starts, sender, pairs.pair_neighbor, receiver, *weights, keep=True, **source)
    assert set(got) == set(want)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    for name, value in want.items():
        assert got[name].shape == value.shape, name
        assert torch.allclose(got[name], value, **tol), (name, float((got[name] - value).abs().max()))
    assert radial.abs().max() > 0.1 and want["alpha"].min() < 0.9  # the case exercises the basis and the softmax
    plain = native.attend_pairs(starts, sender, pairs.pair_neighbor, receiver, *weights, **source)
    assert set(plain) == {"summed", "block_sum", "alpha_weight"}
    for name, value in plain.items():
        assert torch.equal(value, got[name]), name  # keeping the intermediates changes nothing else


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("rh, n_head, n_channel, n_rbf", [(8, 4, 1, 32), (4, 5, 1, 20), (4, 2, 2, 8), (8, 6, 1, 48)])
@pytest.mark.parametrize("basis", ["given", "computed"])
def test_compiled_pair_stage_backward_matches_pytorch(dtype, rh, n_head, n_channel, n_rbf, basis, loops):
    index, pairs, distance, sender, receiver, weights, p = _pairs_case(dtype, rh, n_head, n_channel, n_rbf, seed=2)
    gen = torch.Generator().manual_seed(3)
    rand = lambda *shape: torch.randn(*shape, dtype=dtype, generator=gen)  # noqa: E731
    g = pairs.num_groups
    upstream = (rand(g, 2, n_head, rh), rand(g, n_head), rand(p, n_head, n_channel))
    rbf = RadialBasis(n_rbf, cutoff=1.5)
    values, slope = rbf.with_derivative(distance)
    radial = _heads(values, n_head)
    rows = sender.index_select(0, pairs.pair_neighbor)
    kept = _pair_stage(index, radial, rows, receiver, *weights, keep=True)
    want = _pair_stage_backward(index, kept, radial, weights[0], weights[1], weights[3], *upstream)
    want["distance"] = (want["radial"].view(p, n_head, n_channel, -1).transpose(1, 2).reshape(p, n_channel, -1)
                        * slope).sum(-1)
    starts = index.group_start
    source = dict(radial=radial) if basis == "given" else dict(distance=distance, rbf=rbf)
    got = native.attend_pairs_backward(starts, sender, pairs.pair_neighbor, receiver, *weights, *upstream, **source)
    per_pair = native.attend_pairs_backward(starts, rows, None, receiver, *weights, *upstream, **source)["sender"]
    assert torch.allclose(per_pair, want["sender"], rtol=1e-9 if dtype == torch.float64 else 1e-3, atol=1e-4)
    # read through sender_index, the sender rows' gradient comes summed per sending atom
    want["sender"] = torch.zeros_like(sender).index_add_(0, pairs.pair_neighbor, want["sender"])
    names = {"sender", "receiver", "w_rbf", "w2", "b2", "w3", "b3", "radial" if basis == "given" else "distance"}
    assert set(got) == names
    tol = dict(rtol=1e-9, atol=1e-11) if dtype == torch.float64 else dict(rtol=1e-3, atol=1e-4)
    for name in names:
        assert got[name].shape == want[name].shape, name
        assert torch.allclose(got[name], want[name], **tol), (name, float((got[name] - want[name]).abs().max()))
        assert want[name].abs().max() > 1e-3, name  # every gradient is exercised


def test_wide_loops_are_taken_where_compiled_in(monkeypatch):
    """With 8 features per head in float32 the 16-float loops run where the library has them: their results
    differ from the 8-float loops' in the last bits (other summation order), forward and backward."""
    index, pairs, distance, sender, receiver, weights, _ = _pairs_case(torch.float32, 8, 4, 1, 32, seed=4)
    starts, upstream = index.group_start, (torch.ones(pairs.num_groups, 2, 4, 8), torch.ones(pairs.num_groups, 4),
                                           torch.ones(pairs.num_pairs, 4, 1))
    rbf = RadialBasis(32, cutoff=1.5)

    def run():
        forward = native.attend_pairs(starts, sender, pairs.pair_neighbor, receiver, *weights, distance=distance,
                                      rbf=rbf, keep=True)
        backward = native.attend_pairs_backward(starts, sender, pairs.pair_neighbor, receiver, *weights, *upstream,
                                                distance=distance, rbf=rbf)
        return {**forward, **{f"g_{name}": value for name, value in backward.items()}}

    wide = native.wide_loops()
    first = run()
    monkeypatch.setenv(native.WIDE_ENV, "0")
    assert not native.wide_loops()
    second = run()
    assert set(first) == set(second)
    for name in first:
        assert torch.allclose(first[name], second[name], rtol=1e-4, atol=1e-5), name
    assert any(not torch.equal(first[name], second[name]) for name in first) == wide


def test_compiled_pair_stage_splits_work_over_threads(monkeypatch):
    index, pairs, distance, sender, receiver, weights, _ = _pairs_case(torch.float32, 8, 4, 1, 32, seed=1)
    starts = index.group_start
    rbf = RadialBasis(32, cutoff=1.5)
    spans = []
    real = native._run_ranges

    def spy(name, ranges, *rest):  # records the group ranges of every run
        spans.extend(ranges)
        return real(name, ranges, *rest)

    monkeypatch.setattr(native, "_run_ranges", spy)
    monkeypatch.setattr(native, "MIN_GROUPS_PER_THREAD", 1)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = native.attend_pairs(starts, sender, pairs.pair_neighbor, receiver, *weights, distance=distance, rbf=rbf)
        torch.set_num_threads(3)
        many = native.attend_pairs(starts, sender, pairs.pair_neighbor, receiver, *weights, distance=distance,
                                   rbf=rbf)
    finally:
        torch.set_num_threads(threads)
    assert spans[0] == (0, pairs.num_groups) and len(spans) == 4
    ranges = sorted(spans[1:])  # three consecutive, non-empty ranges covering every group
    assert ranges[0][0] == 0 and ranges[-1][1] == pairs.num_groups
    assert all(b < e for b, e in ranges) and all(ranges[i][1] == ranges[i + 1][0] for i in range(2))
    for name in one:
        assert torch.equal(one[name], many[name]), name
    # the backward pass: each range sums the sender rows' gradients per sending atom on its own, then they add up
    gen = torch.Generator().manual_seed(6)
    upstream = [torch.randn(t.shape, generator=gen) for t in (one["summed"], one["block_sum"], one["alpha_weight"])]
    grads = []
    try:
        for n in (1, 3):
            torch.set_num_threads(n)
            grads.append(native.attend_pairs_backward(starts, sender, pairs.pair_neighbor, receiver, *weights,
                                                      *upstream, distance=distance, rbf=rbf))
    finally:
        torch.set_num_threads(threads)
    assert len(spans) == 8
    for name in grads[0]:
        assert torch.allclose(grads[0][name], grads[1][name], rtol=1e-5, atol=1e-5), name
    assert grads[0]["sender"].shape == sender.shape and grads[0]["sender"].abs().max() > 0


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("n_head, n_channel", [(4, 1), (2, 2), (3, 1)])
def test_compiled_group_level_matches_pytorch(dtype, n_head, n_channel):
    index, pairs, distance, *_ = _pairs_case(dtype, 4, n_head, n_channel, 8)
    gen = torch.Generator().manual_seed(3)
    g, p, d = pairs.num_groups, pairs.num_pairs, 6 * n_head
    rand = lambda *shape: torch.randn(*shape, dtype=dtype, generator=gen)  # noqa: E731
    inputs = (rand(g, n_head), rand(1), rand(g, d), rand(g, n_head * n_channel), rand(p, n_head, n_channel),
              rand(p, n_channel, 3))
    want = _groups(index, *inputs, n_head)
    got = attend_groups(index, *inputs, n_head)
    tolerance = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    assert set(got) == set(want) == {"beta_edge", "beta", "group_coef", "coef", "G", "dZ"}
    for name in want:
        torch.testing.assert_close(got[name], want[name], **tolerance, msg=name)
    # β sums to one over the edges into each block
    totals = torch.zeros(index.n_blocks, n_head, dtype=dtype).index_add_(0, index.edge_block, got["beta_edge"])
    torch.testing.assert_close(totals, torch.ones_like(totals))
    without = attend_groups(index, *inputs, n_head, outputs=False)
    assert set(without) == {"beta_edge", "beta", "group_coef", "coef"}
    torch.testing.assert_close(without["coef"], want["coef"], **tolerance)
    broken = index._replace(group_atom=index.group_atom.clone().fill_(index.n_atoms))
    with pytest.raises(ValueError, match="out of range"):
        attend_groups(broken, *inputs, n_head)


def _small_layer_case(seed: int = 4):
    """(layer, H [15, 32], Z [15, 1, 3], pairs): five blocks, nine block edges, chunks of at most 10 pairs."""
    gen = torch.Generator().manual_seed(seed)
    block_len = torch.tensor([3, 5, 1, 4, 2])
    block_id = torch.repeat_interleave(torch.arange(5), block_len)
    Z = torch.randn(len(block_id), 1, 3, generator=gen)
    H = torch.randn(len(block_id), 32, generator=gen)
    edges = torch.tensor([[0, 0, 1, 1, 2, 3, 3, 4, 4], [0, 1, 1, 3, 0, 3, 4, 4, 2]])
    layer = BilevelAttention(32, 32, 1, 32, cutoff=3.0, n_head=4)
    return layer, H, Z, sparse_atom_pairs(Z, block_id, edges, k=3, chunk_pairs=10)


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
def test_layer_sees_weights_written_through_data(grad):
    """``.data`` writes (old-style optimisers, EMA copies, gradcheck) bump no version counter: the layer's next
    forward pass must still use the new weights, not copies rearranged from the old ones."""
    layer, H, Z, pairs = _small_layer_case()
    with torch.set_grad_enabled(grad):
        layer(H, Z, pairs)
        for parameter in layer.parameters():
            parameter.data.mul_(-0.5)
        H_after, Z_after = layer(H, Z, pairs)
        fresh = BilevelAttention(32, 32, 1, 32, cutoff=3.0, n_head=4)
        fresh.load_state_dict(layer.state_dict())
        H_fresh, Z_fresh = fresh(H, Z, pairs)
    assert torch.equal(H_after, H_fresh) and torch.equal(Z_after, Z_fresh)


def test_layer_gives_the_same_with_and_without_the_compiled_stage(monkeypatch):
    layer, H, Z, pairs = _small_layer_case()
    with torch.no_grad():
        H_native, Z_native = layer(H, Z, pairs)
        monkeypatch.setenv(native.NATIVE_ENV, "0")
        H_torch, Z_torch = layer(H, Z, pairs)
    assert torch.allclose(H_native, H_torch, rtol=1e-5, atol=1e-6)
    assert torch.allclose(Z_native, Z_torch, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(Z_torch, Z)


def test_missing_compiler_falls_back_with_a_warning(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "_library", None)
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("GEOMOL_CACHE", str(tmp_path / "cache"))
    with pytest.warns(RuntimeWarning, match="compiled loops .* are unavailable"):
        assert not native.native_available()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not native.native_available()  # decided once per process: no second warning
    assert not bilevel_attention._native_ready(torch.zeros(1))


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 instruction-set levels")
def test_library_builds_for_a_processor_without_avx512(tmp_path):
    """The sources compile, and the library loads, for an AVX2 processor (x86-64-v3) as well: there the 8-float
    loops run and pair_heads_wide.h contributes its empty stand-ins."""
    flags = [flag if flag != "-march=native" else "-march=x86-64-v3" for flag in native.FLAGS] + ["-Wno-psabi"]
    library = tmp_path / "geomol-native-avx2.so"
    native._compile(os.environ.get("CXX", "c++"), flags, tmp_path, library)
    assert ctypes.CDLL(str(library)).geomol_attend_pairs_wide() == 0


def test_old_builds_are_removed_from_the_cache(tmp_path):
    for age in range(11):  # build i is i hours old
        build = tmp_path / f"geomol-native-{age:016x}.so"
        build.write_bytes(b"")
        os.utime(build, (0, 1e9 - 3600 * age))
    (tmp_path / "unrelated.so").write_bytes(b"")
    native._prune(tmp_path, keep=8)
    left = sorted(path.name for path in tmp_path.iterdir())
    assert left == sorted([f"geomol-native-{age:016x}.so" for age in range(8)] + ["unrelated.so"])


def test_counting_products_counts_the_compiled_arithmetic():
    index, pairs, distance, sender, receiver, weights, p = _pairs_case(torch.float32, 8, 4, 1, 32)
    starts = index.group_start
    rbf = RadialBasis(32, cutoff=1.5)
    upstream = (torch.ones(pairs.num_groups, 4, 16), torch.ones(pairs.num_groups, 4), torch.ones(p, 4, 1))
    per_row = 2 * (24 * 8 + 3 * 8 * 8 + 3 * 24)  # W_rbf, the three diagonal blocks of W2, W3
    native.attend_pairs(starts, sender, pairs.pair_neighbor, receiver, *weights, distance=distance, rbf=rbf)
    with native.counting_products() as outer:
        native.attend_pairs(starts, sender, pairs.pair_neighbor, receiver, *weights, distance=distance, rbf=rbf)
        with native.counting_products() as inner:
            native.attend_pairs_backward(starts, sender, pairs.pair_neighbor, receiver, *weights, *upstream,
                                         distance=distance, rbf=rbf)
    assert inner[0] == 3 * p * 4 * per_row  # recomputation, then the gradients of inputs and weights
    assert outer[0] == p * 4 * per_row  # its own call only


def test_switched_off_by_environment(monkeypatch):
    monkeypatch.setenv(native.NATIVE_ENV, "0")
    assert not native.native_available()


@pytest.mark.parametrize("n_channel", [1, 2])
def test_compiled_block_distances_and_nearest_atoms_match_pytorch(n_channel, monkeypatch):
    gen = torch.Generator().manual_seed(7)
    block_len = torch.randint(1, 40, (30,), generator=gen)  # up to 39 atoms: both padded and flat reference paths
    block_start = torch.cumsum(block_len, 0) - block_len
    Z = 4.0 * torch.randn(int(block_len.sum()), n_channel, 3, dtype=torch.float64, generator=gen)
    rows, cols = torch.randint(0, 30, (200,), generator=gen), torch.randint(0, 30, (200,), generator=gen)
    got = native.block_min_distance(Z, block_start, block_len, rows, cols)
    group_block = torch.randint(0, 30, (300,), generator=gen)
    group_atom = torch.randint(0, Z.size(0), (300,), generator=gen)
    first, count = block_start[group_block], block_len[group_block]
    nearest = native.nearest_atoms(Z, group_atom, first, count, 5)
    monkeypatch.setenv(native.NATIVE_ENV, "0")
    want = block_edges.block_min_distance(Z, block_start, block_len, rows, cols)
    assert torch.allclose(got, want, rtol=1e-12)
    reference = atom_pairs._nearest_neighbors(Z, block_start, block_len, group_atom, group_block, count,
                                              int(block_len.max()), 5, 1 << 20)
    valid = torch.arange(5) < count.unsqueeze(1)  # columns past a block's atoms are dropped by the caller
    assert torch.equal(nearest[valid], reference[valid])
    assert (count < 5).any() and (count > 5).any()  # blocks with fewer and with more atoms than kept


def test_nearest_atoms_breaks_ties_by_index():
    Z = torch.tensor([[0.0, 0, 0], [1, 0, 0], [-1, 0, 0], [0, 1, 0], [3, 0, 0]]).view(5, 1, 3)
    out = native.nearest_atoms(Z, torch.tensor([0]), torch.tensor([1]), torch.tensor([4]), 2)
    assert out.tolist() == [[1, 2]]  # three atoms at distance 1: the two of lowest index, in index order
    with pytest.raises(ValueError, match="keep must be"):
        native.nearest_atoms(Z, torch.tensor([0]), torch.tensor([1]), torch.tensor([4]), native.MAX_NEAREST + 1)


def test_derived_weights_follow_their_source():
    """Rearranged weight copies are reused across a layer's chunks, never after their source changed."""
    make = lambda t: t.T.contiguous()  # noqa: E731
    w = torch.randn(4, 3)
    first = native._derived_once(w, "test", make)
    assert native._derived_once(w, "test", make) is first  # reused while unchanged
    w.mul_(2)  # in place: a new version
    assert torch.equal(native._derived_once(w, "test", make), w.T)
    w.data = w.data.double()  # a replaced storage and dtype, the version kept
    assert native._derived_once(w, "test", make).dtype == torch.float64
    w.data.add_(1)  # through .data: no new version, seen once the owner forgets what was made from w
    native.forget_derived([w])
    assert torch.equal(native._derived_once(w, "test", make), w.T)
    with torch.inference_mode():  # inference tensors have no version counter: made every time
        v = torch.randn(4, 3)
        native._derived_once(v, "test", make)
        v.mul_(2)
        assert torch.equal(native._derived_once(v, "test", make), v.T)


def test_timing_compiled_counts_the_time_inside_the_compiled_loops_and_nothing_outside(monkeypatch):
    ticks = iter(range(10**6))  # a clock that advances one second per reading: each timed call adds exactly 1 s,
    monkeypatch.setattr(native.time, "thread_time", lambda: float(next(ticks)))  # whatever the machine's resolution
    index, pairs, distance, sender, receiver, weights, _ = _pairs_case(torch.float32, 8, 4, 1, 32, seed=2)
    rbf = RadialBasis(32, cutoff=1.5)

    def run():
        out = native.attend_pairs(index.group_start, sender, pairs.pair_neighbor, receiver, *weights,
                                  distance=distance, rbf=rbf)
        attend_groups(index, out["block_sum"], torch.zeros(1), torch.randn(pairs.num_groups, 32),
                      torch.randn(pairs.num_groups, 4), out["alpha_weight"], torch.randn(pairs.num_pairs, 1, 3), 4)

    with native.timing_compiled() as outer:
        with native.timing_compiled() as inner:
            run()
        run()  # counted by the outer block only
    run()  # counted by neither
    assert set(inner) == set(outer) == {"geomol_attend_pairs_f32", "geomol_attend_groups"}
    assert all(outer[name] == 2 * inner[name] > 0 for name in inner)  # the outer block also saw the second run
    assert not native._timed  # both blocks removed themselves
