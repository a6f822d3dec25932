"""GET building blocks: radial basis, chunked recomputation, attention, norm and FFN."""
import math

import pytest
import torch

from geomol.nn import native
from geomol.nn.atom_pairs import sparse_atom_pairs
from geomol.nn.attend import AttendInputs, AttendWeights, AttentionHeads, _attend, attend
from geomol.nn.attend_backward import attend_backward
from geomol.nn.bilevel_attention import BilevelAttention
from geomol.nn.chunked import Chunk, chunked_recompute
from geomol.nn.equivariant_ffn import EquivariantFFN
from geomol.nn.equivariant_norm import EquivariantLayerNorm, recover_scale
from geomol.nn.radial import FLUSH_BELOW, RadialBasis
from geomol.testing import INVARIANT, POSITION, assert_equivariant
from tests.models.get_reference import one_thread  # noqa: F401 (autouse fixture)


def test_radial_basis_formula_and_cutoff():
    rbf = RadialBasis(32, cutoff=7.0).double()
    assert rbf.gamma == pytest.approx(-480.5000286, abs=1e-6)
    d = torch.tensor([0.0, 1.3, 3.5, 6.99, 7.0, 9.0], dtype=torch.float64)
    x = d / 7
    env = 1 - 21 * x ** 5 + 35 * x ** 6 - 15 * x ** 7
    mu = torch.linspace(0, 1, 32).double()  # float32 centres, as the official buffer
    expected = env[:, None] * torch.exp(rbf.gamma * (x[:, None] - mu) ** 2)  # γ from the float32 spacing
    expected[x >= 1] = 0
    out = rbf(d)
    assert out.shape == (6, 32)
    assert torch.allclose(out, expected, atol=FLUSH_BELOW, rtol=1e-7)  # tails flushed to 0
    assert ((out == 0) | (out >= FLUSH_BELOW)).all()  # nothing a product could turn subnormal
    assert (out[expected >= FLUSH_BELOW] > 0).all()
    d.requires_grad_(True)
    with_grad = rbf(d)  # the autograd path gives the same values
    assert torch.equal(with_grad.detach(), out)
    values, slope = rbf.with_derivative(d.detach())  # and the hand-written derivative autograd's
    weights = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    (want,) = torch.autograd.grad(with_grad, d, weights)
    assert torch.equal(values, out) and torch.allclose((slope * weights).sum(-1), want, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError):
        RadialBasis(1, 7.0)


def _toy(context, rows, gathered, shared):
    return (torch.tanh(rows * context) @ shared + gathered.sin()).cumsum(0), rows.square().sum(1, keepdim=True)


def test_chunked_recompute_gradients():
    gen = torch.Generator().manual_seed(0)
    rows = torch.randn(10, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    table = torch.randn(6, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    shared = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    index = torch.tensor([0, 5, 5, 2, 1, 0, 3, 3, 4, 2])
    spans = [(0, 4), (4, 5), (5, 10)]
    chunks = [Chunk(1.5, ((a, b), index[a:b], None), ((a, b), (a, b))) for a, b in spans]

    def chunked(r, t, s):
        return chunked_recompute(_toy, (r, t, s), chunks, ((10, 4), (10, 1)))

    def plain(r, t, s):
        outs = [_toy(1.5, r[a:b], t[index[a:b]], s) for a, b in spans]
        return torch.cat([o[0] for o in outs]), torch.cat([o[1] for o in outs])

    for got, want in zip(chunked(rows, table, shared), plain(rows, table, shared)):
        assert torch.allclose(got, want)
    assert torch.autograd.gradcheck(chunked, (rows, table, shared))

    def by_hand(context, inputs, grads):  # _toy's gradients through autograd, as a hand-written backward would
        inputs = [t.detach().requires_grad_() for t in inputs]
        with torch.enable_grad():
            outs = _toy(context, *inputs)
        return torch.autograd.grad(outs, inputs, grads)

    calls = []
    counted = lambda *args: calls.append(1) or by_hand(*args)  # noqa: E731
    assert torch.autograd.gradcheck(
        lambda r, t, s: chunked_recompute(_toy, (r, t, s), chunks, ((10, 4), (10, 1)), backward=counted),
        (rows, table, shared))
    assert calls  # the hand-written backward ran, once per chunk and call
    with pytest.raises(ValueError):
        chunked_recompute(_toy, (rows, table, shared), chunks, ((10, 4), (10, 1)), preserve_rng=True,
                          backward=by_hand)

    # forward= hands each chunk's saved value (here its context, doubled) to the hand-written backward
    received = []

    def saving(context, *inputs):
        return _toy(context, *inputs), 2 * context

    def reading(context, inputs, grads, saved):
        received.append(saved)
        return by_hand(context, inputs, grads)

    assert torch.autograd.gradcheck(
        lambda r, t, s: chunked_recompute(_toy, (r, t, s), chunks, ((10, 4), (10, 1)), backward=reading,
                                          forward=saving), (rows, table, shared))
    assert received and set(received) == {3.0}
    with pytest.raises(ValueError, match="forward= needs"):
        chunked_recompute(_toy, (rows, table, shared), chunks, ((10, 4), (10, 1)), forward=saving)


def test_chunked_recompute_replays_dropout():
    x = torch.randn(40, 8, dtype=torch.float64, requires_grad=True)
    chunks = [Chunk(None, ((a, a + 10),), ((a, a + 10),)) for a in range(0, 40, 10)]
    fn = lambda _, rows: (torch.nn.functional.dropout(rows, 0.5, training=True) * rows,)
    (out,) = chunked_recompute(fn, (x,), chunks, ((40, 8),), preserve_rng=True)
    out.sum().backward()
    # d/dx of mask·x² /(1-p) is 2·x·mask/(1-p): zero exactly where the forward output is zero
    assert torch.equal(x.grad == 0, out == 0)
    assert torch.allclose(x.grad[out != 0], 2 * (out / x)[out != 0])


def _small_complex(seed=0):
    gen = torch.Generator().manual_seed(seed)
    block_len = torch.tensor([1, 4, 3, 1, 5, 2])
    block_id = torch.repeat_interleave(torch.arange(6), block_len)
    batch_id = torch.tensor([0, 0, 0, 1, 1, 1])
    Z = 1.2 * torch.randn(len(block_id), 2, 3, dtype=torch.float64, generator=gen)
    H = torch.randn(len(block_id), 16, dtype=torch.float64, generator=gen)
    edges = torch.tensor([[0, 0, 1, 1, 2, 2, 1, 3, 4, 4, 5, 5], [0, 1, 1, 2, 2, 0, 0, 4, 4, 5, 5, 3]])
    edge_attr = torch.randn(edges.size(1), 8, dtype=torch.float64, generator=gen)
    return H, Z, block_id, batch_id, edges, edge_attr


@pytest.mark.parametrize("chunked", [True, False])
def test_attention_is_equivariant(chunked):
    H, Z, block_id, batch_id, edges, edge_attr = _small_complex()
    layer = BilevelAttention(16, 8, 2, 8, cutoff=3.0, d_edge=8, n_head=2, chunked=chunked).double()

    def fn(Z):
        pairs = sparse_atom_pairs(Z, block_id, edges, k=2, chunk_pairs=6)
        out_H, out_Z = layer(H, Z, pairs, edge_attr)
        return {"Z": out_Z, "H": out_H}

    assert_equivariant(fn, {"Z": (Z, POSITION)}, {"Z": POSITION, "H": INVARIANT})
    assert not torch.allclose(fn(Z)["Z"], Z)  # the layer moves atoms


@pytest.mark.parametrize("outputs", ["both", "features", "coordinates"])
@pytest.mark.parametrize("compiled", ["1", "0"])
def test_hand_written_attention_backward_matches_autograd(outputs, compiled, monkeypatch):
    monkeypatch.setenv(native.NATIVE_ENV, compiled)  # the compiled pair stage, or its PyTorch formulation
    H, Z, block_id, _, edges, edge_attr = _small_complex(3)
    layer = BilevelAttention(16, 8, 2, 8, cutoff=3.0, d_edge=8, n_head=2).double()
    with torch.no_grad():  # non-zero biases everywhere, so that every gradient term is exercised
        for param in layer.parameters():
            param.add_(0.1 * torch.randn_like(param))
    pairs = sparse_atom_pairs(Z, block_id, edges, k=2)
    query, sender, edge = layer._atom_terms(H, edge_attr, pairs.edge_pairs.numel())
    x = Z.index_select(0, pairs.pair_atom) - Z.index_select(0, pairs.pair_neighbor)
    weights = [t.detach().clone().requires_grad_() for t in layer._kernel_weights().flat()]
    rows = [t.detach().clone().requires_grad_() for t in (x, sender.index_select(0, pairs.pair_neighbor), query, edge)]
    inputs, heads = rows + weights, AttentionHeads(layer.rbf, 2)

    def backward(rows, saved=None, sender_index=None):
        found = attend_backward(index, AttendInputs(*[t.detach() for t in rows], sender_index),
                                AttendWeights.from_flat([t.detach() for t in weights]), (grad_G, grad_dZ), heads,
                                saved=saved)
        return [*found[0], *found[1].flat()]

    index = pairs.full_index()
    G, dZ = attend(index, AttendInputs(*rows), AttendWeights.from_flat(weights), heads)
    gen = torch.Generator().manual_seed(5)
    grad_G = None if outputs == "coordinates" else torch.randn(G.shape, dtype=G.dtype, generator=gen)
    grad_dZ = None if outputs == "features" else torch.randn(dZ.shape, dtype=dZ.dtype, generator=gen)
    used = [(out, g) for out, g in ((G, grad_G), (dZ, grad_dZ)) if g is not None]
    want = torch.autograd.grad([o for o, _ in used], inputs, [g for _, g in used], allow_unused=True)
    got = backward(rows)
    with torch.no_grad():  # the forward pass's pair stage, reused by the backward pass instead of recomputed
        _, saved = _attend(index, AttendInputs(*rows), AttendWeights.from_flat(weights), heads)
    assert (saved is not None) == (compiled == "1")
    reused = backward(rows, saved=saved)
    for a, b in zip(got, reused):
        assert (a is None and b is None) or torch.equal(a, b)
    # the sending atoms' rows read in place (sender_index): their gradient summed per sending atom
    per_atom = backward([rows[0], sender, *rows[2:]], sender_index=pairs.pair_neighbor)
    summed = torch.zeros_like(sender).index_add_(0, pairs.pair_neighbor, got[1])
    assert torch.allclose(per_atom[1], summed, rtol=1e-10, atol=1e-12)
    for k, (a, b) in enumerate(zip(got, per_atom)):
        assert k == 1 or (a is None and b is None) or torch.allclose(a, b, rtol=1e-10, atol=1e-12), k
    if saved is not None:  # and it is really read: a different pair stage gives different gradients
        wrong = {name: 2 * value for name, value in saved.items()}
        changed = backward(rows, saved=wrong)
        assert any(a is not None and not torch.allclose(a, b) for a, b in zip(changed, got))
    assert len(got) == len(inputs)
    # w2 (input 5) is block-diagonal: its gradient is given on the three diagonal blocks, zero elsewhere
    on_blocks = torch.block_diag(*(torch.ones(4, 4, dtype=torch.bool),) * 3)
    assert not got[5][~on_blocks].any()
    want = list(want)
    want[5] = want[5] * on_blocks
    for k, (a, b) in enumerate(zip(got, want)):
        if b is None or not b.abs().max() > 0:  # an input this output does not depend on
            assert a is None or not a.abs().max() > 0, k
            continue
        assert a.shape == b.shape and torch.allclose(a, b, rtol=1e-10, atol=1e-12), k


def test_norm_ffn_and_recovery_are_equivariant():
    H, Z, block_id, batch_id, _, _ = _small_complex(1)
    atom_graph = batch_id[block_id]
    norm = EquivariantLayerNorm(16, 2, 8, cutoff=3.0).double()
    ffn = EquivariantFFN(16, 32, 2, 8, dropout=0.0).double()

    def fn(Z):
        h, z, scale = norm(H, Z, atom_graph, 2)
        h, z = ffn(h, z, block_id, 6)
        return {"z": z, "recovered": recover_scale(z, atom_graph, scale, 2), "h": h, "scale": scale}

    assert_equivariant(fn, {"Z": (Z, POSITION)},
                       {"z": POSITION, "recovered": POSITION, "h": INVARIANT, "scale": INVARIANT})


def test_norm_spread_and_degenerate_graphs():
    norm = EquivariantLayerNorm(4, 1, 4).double()
    Z = torch.randn(7, 1, 3, dtype=torch.float64)
    Z[5:] = 2.0  # graph 1: two coincident atoms
    atom_graph = torch.tensor([0, 0, 0, 0, 0, 1, 1])
    Z.requires_grad_()
    H, out, scale = norm(torch.randn(7, 4, dtype=torch.float64), Z, atom_graph, 2)
    pooled = (Z[:5] - Z[:5].mean(0)).flatten()
    assert scale[0, 0, 0].item() == pytest.approx(1 / pooled.std().item(), rel=1e-12)
    assert scale[1, 0, 0].item() == 1.0  # no spread: left unscaled instead of ∞
    (H.sum() + out.sum()).backward()
    assert torch.isfinite(H).all() and torch.isfinite(out).all() and torch.isfinite(Z.grad).all()


def test_ffn_keeps_single_atom_blocks_in_place():
    H, Z, block_id, _, _, _ = _small_complex(2)
    ffn = EquivariantFFN(16, 32, 2, 8, dropout=0.1).double().train()
    _, out = ffn(H, Z, block_id, 6)
    single = torch.isin(block_id, torch.tensor([0, 3]))
    assert torch.equal(out[single], Z[single]) and not torch.allclose(out[~single], Z[~single])
    assert math.isfinite(out.sum().item())
