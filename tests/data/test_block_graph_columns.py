"""BlockGraph.from_blocks (per-block lookups, memoised per element tuple) against a plain per-atom build."""
import numpy as np
import torch

from geomol.data import Block, BlockGraph, ligand_names, read_structure
from geomol.data.complexes.build import _ligand, pocket_blocks
from geomol.data.vocab import ATOM_GLOBAL, BLOCK_GLOBAL, POS_GLOBAL, VOCAB, atom_index, position_index
from tests.conftest import shared_path


def _plain(segments, y, vocab=VOCAB):
    """The graph tensors built atom by atom, each segment led by its global block at the centroid."""
    X, A, P, B, L, S = [], [], [], [], [], []
    for seg_id, blocks in enumerate(segments):
        centroid = np.concatenate([b.coords for b in blocks]).mean(axis=0, keepdims=True)
        for block in [Block("&", ("g",), ("g",), centroid, ("G",), "global")] + list(blocks):
            X.append(block.coords)
            A += [ATOM_GLOBAL if e == "g" else atom_index(e) for e in block.elements]
            P += [POS_GLOBAL if p == "g" else position_index(p) for p in block.positions]
            B.append(BLOCK_GLOBAL if block.symbol == "&" else vocab.index(block.symbol))
            L.append(len(block))
            S.append(seg_id)
    block_len = torch.tensor(L)
    return {"X": torch.from_numpy(np.concatenate(X)).float(), "A": torch.tensor(A), "atom_pos": torch.tensor(P),
            "block_id": torch.repeat_interleave(torch.arange(len(L)), block_len), "B": torch.tensor(B),
            "block_len": block_len, "segment": torch.tensor(S), "y": torch.tensor([y], dtype=torch.float32)}


def test_real_complexes_build_the_same_tensors():
    target = shared_path("plb", "cdk2")
    receptor = read_structure(target / "01_protein/crd/protein.pdb")
    sdf = target / "02_ligands/ligands.sdf"
    for index in range(len(ligand_names(sdf))):
        ligand = _ligand(sdf, None, False, index)[0]
        segments = [pocket_blocks(receptor, ligand), ligand]
        graph = BlockGraph.from_blocks(segments, 6.5)
        for key, expected in _plain(segments, 6.5).items():
            assert getattr(graph, key).dtype == expected.dtype and torch.equal(getattr(graph, key), expected), key


def test_blocks_given_lists_still_build():
    block = Block("A", ["N", "C"], ["", "A"], np.zeros((2, 3)))
    assert block.elements == ("N", "C") and BlockGraph.from_blocks([[block], [block]]).A.tolist() == [2, 9, 8, 2, 9, 8]
