"""EGNO reproduces the official function: official parameter layout, hand re-computation of the spec.

The reference (:mod:`tests.models.egno_reference`) is written from ``specs/EGNO.md`` §1–§2 in the
official flattened layout, in float64, and fed the official-layout state_dict directly.
"""
import pytest
import torch

from geomol.errors import ModelLoadError
from geomol.models.egno import EGNO, load_official_state_dict
from tests.models.egno_reference import official_layout, spec_egno

NBODY = dict(L=4, H=64, F=1, E=2, P=5, K=2, Dt=32)


def tiny_batch(F_, E, seed=1):
    """Two complete graphs of 5 and 4 nodes (different sizes), float32."""
    gen = torch.Generator().manual_seed(seed)
    sizes, rows, cols, start = (5, 4), [], [], 0
    for n in sizes:
        for i in range(n):
            for j in range(n):
                if i != j:
                    rows.append(start + i), cols.append(start + j)
        start += n
    bn = sum(sizes)
    batch = torch.repeat_interleave(torch.arange(2), torch.tensor(sizes))
    x = torch.randn(bn, 3, generator=gen)
    centroids = torch.zeros(2, 3).index_add_(0, batch, x) / torch.tensor(sizes)[:, None]
    edge_index = torch.tensor([rows, cols])
    return (x, torch.rand(bn, F_, generator=gen), edge_index, torch.randn(len(rows), E, generator=gen),
            torch.randn(bn, 3, generator=gen), centroids[batch])


def test_official_layout_counts():
    sd = official_layout(**NBODY)
    assert len(sd) == 74 and sum(t.numel() for t in sd.values()) == 201_672
    assert sum(t.numel() for t in EGNO(1, 2, 64, 4, 5, 2, 32).parameters()) == 201_672
    mocap = EGNO(2, 2, 128, 6, 5, 2, 32)
    assert len(mocap.state_dict()) == 110 and sum(t.numel() for t in mocap.parameters()) == 1_192_684
    md17 = EGNO(2, 5, 64, 5, 8, 2, 32, use_time_conv=False)
    assert len(md17.state_dict()) == 82 and sum(t.numel() for t in md17.parameters()) == 170_570


@pytest.mark.parametrize("config", [NBODY, dict(L=2, H=16, F=2, E=3, P=4, K=3, Dt=31)])
def test_parity_with_spec_recomputation(config):
    sd = official_layout(**config)
    model = EGNO(config["F"], config["E"], config["H"], config["L"], config["P"], config["K"], config["Dt"])
    load_official_state_dict(model, sd)
    inputs = tiny_batch(config["F"], config["E"])
    with torch.no_grad():
        pred = model.forward_tensors(*inputs)
    x, h, edge_index, edge_fea, v, loc_mean = inputs
    ref_x, ref_v, ref_h = spec_egno(sd, config["L"], config["H"], config["P"], config["K"], config["Dt"],
                                    x, h, edge_index, edge_fea, v, loc_mean)
    P = config["P"]
    for ours, ref in ((pred.x, ref_x), (pred.v, ref_v), (pred.h, ref_h)):
        flat = ours.transpose(0, 1).reshape(P * x.size(0), -1).double()  # node-major → official t·BN + n
        rel = ((flat - ref).norm() / ref.norm()).item()
        assert rel < 1e-5, rel


def test_load_rejects_mismatched_state_dicts():
    sd = official_layout(**NBODY)
    with pytest.raises(ModelLoadError, match="shape"):
        load_official_state_dict(EGNO(1, 2, 32, 4, 5), sd)
    with pytest.raises(ModelLoadError, match="missing"):
        load_official_state_dict(EGNO(1, 2, 64, 4, 5), {k: t for k, t in sd.items() if "time_conv_x" not in k})
    with pytest.raises(ModelLoadError, match="unknown"):
        load_official_state_dict(EGNO(1, 2, 64, 4, 5, use_time_conv=False), sd)
    load_official_state_dict(EGNO(1, 2, 64, 4, 5), {f"module.{k}": t for k, t in sd.items()})
