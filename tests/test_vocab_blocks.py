import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from geomol.data import Block, BlockGraph, BlockVocab, VOCAB
from geomol.data import vocab as V
from geomol.errors import EmptySelectionError


def test_official_indices():
    assert len(VOCAB) == 150 and len(V.ATOM_TYPES) == 121 and len(V.POSITION_CODES) == 15
    assert [VOCAB.index(s) for s in ("#", "*", "?", "&", "G", "A", "P", "DA", "RU")] == [0, 1, 2, 3, 4, 5, 23, 24, 31]
    assert VOCAB.index("c") == 37 and VOCAB.index("cl") == 48 and VOCAB.index("og") == 149
    assert V.atom_index("H") == 3 and V.atom_index("C") == 8 and V.atom_index("Cl") == 19 and V.atom_index("CL") == 19
    assert V.position_index("XT") == 11 and V.position_index("sm") == 13 and V.position_index("'") == 14


def test_round_trips_and_unknowns():
    for i in range(len(VOCAB)):
        assert VOCAB.index(VOCAB.symbol(i)) == i
    for i in range(len(V.ATOM_TYPES)):
        assert V.atom_index(V.atom_symbol(i)) == i or i < 3
    for i in range(len(V.POSITION_CODES)):
        assert V.position_index(V.position_symbol(i)) == i
    assert VOCAB.index("not-a-block") == V.BLOCK_UNK
    assert V.atom_index("Xx") == V.ATOM_UNK and V.position_index("QQ") == V.POS_UNK
    assert VOCAB.abbreviation(5) == "ALA" and VOCAB.abbreviation(37) == "C"


@pytest.mark.parametrize("name,element,code", [
    ("CA", "C", "A"), ("CB", "C", "B"), ("N", "N", ""), ("OXT", "O", "XT"), ("NE2", "N", "E"),
    ("O1P", "O", "P"), ("OP2", "O", "P"), ("C1'", "C", "'"), ("O5*", "O", "'"), ("H5''", "H", "'"),
    ("1HB", "H", "B"), ("HD21", "H", "D"), ("ZN", "Zn", ""), ("FE", "Fe", ""), ("CG1", "C", "G"),
])
def test_position_codes(name, element, code):
    assert V.position_code(name, element) == code


@pytest.mark.parametrize("resname,symbol", [
    ("ALA", "A"), ("MSE", "M"), ("TPO", "T"), ("HIE", "H"), ("CYX", "C"), ("DA", "DA"), ("U", "RU"),
    ("A", "RA"), ("HOH", None), ("ACE", None), ("ZN", None), ("UNK", None), ("K", None),
])
def test_residue_mapping(resname, symbol):
    assert V.residue_block_symbol(resname) == symbol


def test_fragment_vocab_appends():
    v = VOCAB.extended(["c1ccccc1", "C(=O)O", "c1ccccc1"])
    assert len(v) == 152 and v.index("@c1ccccc1") == 150 and v.abbreviation(151) == "C(=O)O"
    assert v.extended(["C(=O)O"]) == v


def _graph(n_res, n_lig, seed, y=1.0):
    rng = np.random.default_rng(seed)
    rec = [Block("A", ("N", "C", "C", "O", "C"), ("", "A", "", "", "B"), rng.normal(size=(5, 3))) for _ in range(n_res)]
    lig = [Block("c", ("C",), ("sm",), rng.normal(size=(1, 3))) for _ in range(n_lig)]
    return BlockGraph.from_blocks([rec, lig], y=y, name=f"g{seed}")


def test_block_graph_layout():
    g = _graph(3, 4, 0)
    assert g.num_blocks == 3 + 4 + 2 and g.num_atoms == 15 + 4 + 2
    assert g.B[0] == V.BLOCK_GLOBAL and g.B[4] == V.BLOCK_GLOBAL and g.segment.tolist() == [0] * 4 + [1] * 5
    assert torch.equal(torch.bincount(g.block_id), g.block_len)
    # global atom sits at the segment centroid
    rec_atoms = g.X[(g.atom_segment == 0) & (g.A != V.ATOM_GLOBAL)]
    assert torch.allclose(g.X[0], rec_atoms.mean(0), atol=1e-6)
    assert g.segment_summary() == [{"segment": 0, "blocks": 3, "atoms": 15}, {"segment": 1, "blocks": 4, "atoms": 4}]


def test_batching_keeps_indices_and_splits_back():
    graphs = [_graph(i + 1, 2 * i + 1, i, y=float(i)) for i in range(8)]
    batch = Batch.from_data_list(graphs)
    assert batch.num_graphs == 8
    assert torch.equal(torch.bincount(batch.block_id), batch.block_len)
    assert torch.equal(batch.block_batch, torch.repeat_interleave(torch.arange(8), torch.tensor([g.num_blocks for g in graphs])))
    assert torch.equal(batch.batch, batch.block_batch[batch.block_id])
    for orig, back in zip(graphs, batch.to_data_list()):
        for key in ("X", "A", "atom_pos", "block_id", "B", "block_len", "segment", "y"):
            assert torch.equal(getattr(orig, key), getattr(back, key)), key


def test_empty_segment_raises():
    with pytest.raises(EmptySelectionError, match="segment 1"):
        BlockGraph.from_blocks([[Block("A", ("C",), ("A",), np.zeros((1, 3)))], []], name="x.pdb")
