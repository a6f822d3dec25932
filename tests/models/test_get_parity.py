"""GET faithfulness: official-layout weights give the same H and Z as the spec's formulas."""
import pytest
import torch

from geomol.errors import ModelLoadError
from geomol.models.get import GET, GETAffinity, GETPairClassifier, load_official_state_dict
from geomol.nn.atom_pairs import sparse_atom_pairs
from tests.models import get_reference as ref
from tests.models.get_reference import one_thread  # noqa: F401 (autouse fixture)


def _tiny_complex(seed=0, two_graphs=False):
    """Blocks of 3 and 4 atoms (k = 3 drops one atom of the second), all edge kinds, a duplicate."""
    gen = torch.Generator().manual_seed(seed)
    block_len = [3, 4] + ([2, 3] if two_graphs else [])
    block_id = torch.repeat_interleave(torch.arange(len(block_len)), torch.tensor(block_len))
    batch_id = torch.tensor([0, 0] + ([1, 1] if two_graphs else []))
    Z = 1.5 * torch.randn(len(block_id), 1, 3, generator=gen)
    H = torch.randn(len(block_id), ref.D, generator=gen)
    edges = [(0, 0), (0, 1), (1, 0), (1, 1), (1, 0)] + ([(2, 3), (3, 2), (3, 3)] if two_graphs else [])
    edges = torch.tensor(edges).T
    edge_attr = torch.randn(edges.size(1), ref.DE, generator=gen)
    return H, Z, block_id, batch_id, edges, edge_attr


def _core():
    return GET(ref.D, ref.R, ref.C, ref.RBF, cutoff=7.0, d_edge=ref.DE, n_layers=ref.LAYERS, n_head=ref.HEADS).eval()


def _rel(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def test_official_key_table_matches_appendix_k():
    shapes = ref.official_core_shapes()
    assert len(shapes) == 189
    assert sum(torch.Size(s).numel() for s in shapes.values()) == 779118
    own = _core().state_dict()
    assert len(own) == 189 and sum(v.numel() for v in own.values()) == 779118


@pytest.mark.parametrize("two_graphs", [False, True])
def test_core_matches_spec_formulas(two_graphs):
    official = ref.random_official_core(seed=3)
    H, Z, block_id, batch_id, edges, edge_attr = _tiny_complex(two_graphs=two_graphs)
    H_ref, Z_ref = ref.get_core(official, H, Z, block_id, batch_id, edges, edge_attr)

    model = load_official_state_dict(_core(), official)
    with torch.no_grad():
        H32, Z32 = model(H, Z, block_id, batch_id, edges, edge_attr)
        assert _rel(H32.double(), H_ref) < 1e-5 and _rel(Z32.double(), Z_ref) < 1e-5
        model.double()
        H64, Z64 = model(H.double(), Z.double(), block_id, batch_id, edges, edge_attr.double())
    assert _rel(H64, H_ref) < 1e-10 and _rel(Z64, Z_ref) < 1e-10


def test_chunked_and_plain_attention_agree_with_gradients():
    official = ref.random_official_core(seed=4)
    H, Z, block_id, batch_id, edges, edge_attr = _tiny_complex(two_graphs=True)
    results = []
    for chunked in (True, False):
        model = load_official_state_dict(_core(), official).double()
        for layer in model.layers:
            layer.attention.chunked = chunked
        pairs = sparse_atom_pairs(Z.double(), block_id, edges, k=3, chunk_pairs=8)
        assert len(pairs.chunks) >= 3
        Zd = Z.double().requires_grad_()
        out_H, out_Z = model(H.double(), Zd, block_id, batch_id, edges, edge_attr.double(), pairs=pairs)
        (out_H.square().sum() + out_Z.sin().sum()).backward()
        grads = [p.grad for p in model.parameters()] + [Zd.grad]
        results.append((out_H, out_Z, grads))
    (h1, z1, g1), (h2, z2, g2) = results
    assert _rel(h1, h2) < 1e-12 and _rel(z1, z2) < 1e-12
    for a, b in zip(g1, g2):
        assert (a - b).abs().max() <= 1e-10 * max(b.abs().max().item(), 1.0)


def _wrapper_state(model_kind, seed=5, n_block_types=150, d=ref.D, r=ref.R):
    gen = torch.Generator().manual_seed(seed)
    core = ref.random_official_core(seed, d=d, r=r)
    state = {"encoder.encoder." + k: v for k, v in core.items()}
    state.update({
        "block_embedding.block_embedding.weight": torch.randn(n_block_types, d, generator=gen),
        "block_embedding.atom_embedding.weight": torch.randn(121, d, generator=gen),
        "block_embedding.position_embedding.weight": torch.randn(15, d, generator=gen),
        "edge_embedding.weight": torch.randn(4, ref.DE, generator=gen),
        "energy_ffn.1.weight": torch.randn(d, d, generator=gen) / 8, "energy_ffn.1.bias": torch.randn(d, generator=gen),
        "energy_ffn.3.weight": torch.randn(1, d, generator=gen) / 8,
    })
    if model_kind == "lep":
        state.update({"class_ffn.weight": torch.randn(2, 2 * d, generator=gen), "class_ffn.bias": torch.randn(2, generator=gen)})
    return state


def test_affinity_wrapper_checkpoint_loads_with_module_prefix():
    state = _wrapper_state("lba")
    model = load_official_state_dict(GETAffinity(), {"module." + k: v for k, v in state.items()})
    own = model.state_dict()
    assert torch.equal(own["embedding.block_embedding.weight"], state["block_embedding.block_embedding.weight"])
    assert torch.equal(own["encoder.layers.2.ffn_norm.sigma"], state["encoder.encoder.layernorm1_2.sigma"])
    assert torch.equal(own["encoder.layers.1.attention.linear_qk.weight"], state["encoder.encoder.layer_1.linear_qk.weight"])
    assert torch.equal(own["energy_ffn.3.weight"], state["energy_ffn.3.weight"])
    # the core alone also accepts the wrapper layout (its encoder.encoder.* part)
    core = load_official_state_dict(_core(), state)
    assert torch.equal(core.state_dict()["layers.0.ffn.mlp_h.6.bias"], state["encoder.encoder.ffn_0.mlp_h.6.bias"])


def test_lep_wrapper_checkpoint_loads():
    state = _wrapper_state("lep", d=128, r=64)
    model = load_official_state_dict(GETPairClassifier(), state)
    assert torch.equal(model.class_ffn.weight, state["class_ffn.weight"])
    assert not model.energy_ffn[1].weight.requires_grad


@pytest.mark.parametrize("damage", ["missing", "unexpected", "shape"])
def test_bad_checkpoints_raise_model_load_error(damage):
    state = _wrapper_state("lba")
    if damage == "missing":
        del state["encoder.encoder.layer_0.linear_v.bias"]
    elif damage == "unexpected":
        state["encoder.encoder.layer_3.linear_v.bias"] = torch.zeros(8)
    else:
        state["block_embedding.block_embedding.weight"] = torch.zeros(440, ref.D)
    with pytest.raises(ModelLoadError, match={"missing": "missing keys", "unexpected": "unexpected keys",
                                              "shape": "shape mismatch"}[damage]):
        load_official_state_dict(GETAffinity(), state)
