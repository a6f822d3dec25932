"""The graph of sets: :class:`Block` (a typed set of atoms) and :class:`BlockGraph`.

A molecular complex is a list of *segments* (0 = receptor, 1 = ligand or binding partner,
...), each a list of blocks: amino-acid residues, nucleotides, single atoms or ligand
fragments. :class:`BlockGraph` flattens that into tensors that PyTorch Geometric batches
correctly, with atoms of one block stored consecutively and blocks of one segment stored
consecutively (segment order), as GET requires.

Units: coordinates are in ångström (Å) throughout.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from typing import Any, Sequence

import numpy as np
import torch

from geomol.deferred_imports import PYG_UNUSED_AT_IMPORT, deferred_modules

with deferred_modules(*PYG_UNUSED_AT_IMPORT):  # the rest of PyG and torch._dynamo load when used (start-up time)
    from torch_geometric.data import Data

from geomol.errors import EmptySelectionError
from geomol.data.vocab import (
    ATOM_GLOBAL,
    BLOCK_GLOBAL,
    POS_GLOBAL,
    VOCAB,
    BlockVocab,
    atom_index,
    position_index,
)

__all__ = ["Block", "BlockGraph", "ligand_atom_mask"]


@dataclass(frozen=True, eq=False)
class Block:
    """A typed set of atoms.

    Attributes:
        symbol: block-type symbol of a :class:`~geomol.data.vocab.BlockVocab` (``'A'`` for
            alanine, ``'DA'``, ``'cl'`` for a single chlorine atom, ``'@c1ccccc1'`` for a
            fragment). Unknown symbols are embedded as the unknown block type.
        elements: element symbol of each atom (``'C'``, ``'Cl'``), length n.
        positions: position code of each atom (``'A'`` for CA, ``'sm'`` for ligand atoms).
        coords: [n, 3] float64 atom coordinates in Å.
        atom_names: optional atom names as in the source file.
        label: where the block came from, e.g. ``'A:42A:ALA'`` (chain:number+icode:name).
    """

    symbol: str
    elements: tuple[str, ...]
    positions: tuple[str, ...]
    coords: np.ndarray
    atom_names: tuple[str, ...] = field(default=())
    label: str = ""

    def __post_init__(self):
        coords = self.coords
        if type(coords) is not np.ndarray or coords.dtype != np.float64 or coords.ndim != 2 or coords.shape[1] != 3:
            coords = np.asarray(coords, dtype=np.float64).reshape(-1, 3)
            object.__setattr__(self, "coords", coords)
        for per_atom in ("elements", "positions"):  # tuples: hashable, so graph building memoises their lookups
            if type(getattr(self, per_atom)) is not tuple:
                object.__setattr__(self, per_atom, tuple(getattr(self, per_atom)))
        n = len(self.elements)
        if n == 0:
            raise ValueError(f"block {self.label or self.symbol!r} has no atoms")
        if len(self.positions) != n or coords.shape[0] != n or (self.atom_names and len(self.atom_names) != n):
            raise ValueError(f"block {self.label or self.symbol!r}: per-atom fields differ in length")

    def __len__(self) -> int:
        return len(self.elements)

    @property
    def centroid(self) -> np.ndarray:
        """[3] mean atom coordinate in Å."""
        return self.coords.mean(axis=0)


@lru_cache(maxsize=1 << 14)
def _atom_types(elements: tuple[str, ...]) -> tuple[int, ...]:
    """Atom-type index of each element of a block (``'g'``: the global pseudo-atom).

    Memoised per element tuple: the blocks of a complex repeat a few hundred tuples (the atoms
    of each residue type, single ligand atoms), so the per-atom lookups run once per tuple.
    """
    return tuple(ATOM_GLOBAL if e == "g" else atom_index(e) for e in elements)


@lru_cache(maxsize=1 << 14)
def _position_types(positions: tuple[str, ...]) -> tuple[int, ...]:
    """Position-code index of each atom of a block (``'g'``: the global pseudo-atom); memoised per tuple."""
    return tuple(POS_GLOBAL if p == "g" else position_index(p) for p in positions)


class _Columns:
    """The per-block pieces of a graph, gathered segment by segment before they become tensors."""

    def __init__(self, vocab: BlockVocab, add_global: bool):
        self.vocab, self.add_global = vocab, add_global
        self.coords: list[np.ndarray] = []  # [n, 3] float64 (Å) per segment, its global atom first
        self.atom_types: list[tuple[int, ...]] = []  # per block, one index per atom
        self.position_types: list[tuple[int, ...]] = []  # per block, one index per atom
        self.block_types: list[int] = []
        self.block_len: list[int] = []
        self.segment: list[int] = []

    def add_segment(self, seg_id: int, blocks: Sequence[Block]) -> None:
        """Append the blocks of segment ``seg_id``, after its global block (at their centroid) if wanted."""
        coords = np.concatenate([b.coords for b in blocks])
        if self.add_global:
            self.coords.append(coords.mean(axis=0, keepdims=True))
            self.atom_types.append((ATOM_GLOBAL,))
            self.position_types.append((POS_GLOBAL,))
            self.block_types.append(BLOCK_GLOBAL)
            self.block_len.append(1)
        self.coords.append(coords)
        self.atom_types += [_atom_types(b.elements) for b in blocks]
        self.position_types += [_position_types(b.positions) for b in blocks]
        self.block_types += [BLOCK_GLOBAL if b.symbol == "&" else self.vocab.index(b.symbol) for b in blocks]
        self.block_len += [len(b.elements) for b in blocks]
        self.segment += [seg_id] * (len(self.block_len) - len(self.segment))


def _concatenated(per_block: list[tuple[int, ...]], count: int) -> torch.Tensor:
    """[count] long tensor of the per-block index tuples laid end to end (``count`` atoms in all)."""
    return torch.from_numpy(np.fromiter(chain.from_iterable(per_block), dtype=np.int64, count=count))


class BlockGraph(Data):
    r"""A complex as a PyG :class:`~torch_geometric.data.Data`: atoms grouped into blocks.

    Tensors (N = atoms, Nb = blocks, all of one complex or concatenated over a batch):

    * ``X`` [N, 3] float: atom coordinates in Å.
    * ``A`` [N] long: atom type (:func:`~geomol.data.vocab.atom_index`).
    * ``atom_pos`` [N] long: position code (:func:`~geomol.data.vocab.position_index`).
    * ``block_id`` [N] long: block of each atom; sorted, every block owns ≥ 1 atom. Incremented
      by the number of blocks when batched.
    * ``B`` [Nb] long: block type (index into the :class:`~geomol.data.vocab.BlockVocab`).
    * ``block_len`` [Nb] long: atoms per block.
    * ``segment`` [Nb] long: 0 = receptor, 1 = ligand/partner, ... (blocks sorted by segment).
    * ``y`` [1] float: label (pK for affinity), ``nan`` when unknown.

    A global block (type ``'&'``, one atom of type ``'g'`` at the segment centroid) starts each
    segment when built with ``add_global=True``. After batching, ``batch`` [N] is the graph of
    each atom and :attr:`block_batch` [Nb] the graph of each block.
    """

    def __init__(self, X=None, A=None, atom_pos=None, block_id=None, B=None, block_len=None,
                 segment=None, y=None, **kwargs):
        if X is not None and "num_nodes" not in kwargs:
            kwargs["num_nodes"] = X.size(0)
        super().__init__(X=X, A=A, atom_pos=atom_pos, block_id=block_id, B=B, block_len=block_len,
                         segment=segment, y=y, **kwargs)

    def __inc__(self, key: str, value: Any, *args, **kwargs) -> Any:
        if key == "block_id":
            return self.num_blocks
        return super().__inc__(key, value, *args, **kwargs)

    # ------------------------------------------------------------------ building
    @classmethod
    def from_blocks(
        cls,
        segments: Sequence[Sequence[Block]],
        y: float | None = None,
        *,
        add_global: bool = True,
        vocab: BlockVocab = VOCAB,
        name: str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> "BlockGraph":
        """Build a graph from a list of segments, each a list of :class:`Block`.

        Args:
            segments: ``[receptor_blocks, ligand_blocks, ...]``; segment i gets id i.
            y: label (e.g. pK); ``None`` stores ``nan``.
            add_global: prepend one global block per segment, at the segment centroid.
            vocab: block vocabulary used to type the blocks (must contain fragment types used).
            name: identifier kept on the graph (``graph.name``) and used in error messages.
            dtype: floating dtype of ``X``.

        Raises:
            EmptySelectionError: a segment has no blocks (no silent empty graphs).
        """
        columns = _Columns(vocab, add_global)
        for seg_id, blocks in enumerate(segments):
            if len(blocks) == 0:
                raise EmptySelectionError(f"segment {seg_id} has no blocks", source=name)
            columns.add_segment(seg_id, blocks)
        if not columns.block_types:
            raise EmptySelectionError("complex has no segments", source=name)
        block_len = np.asarray(columns.block_len, dtype=np.int64)
        num_atoms = int(block_len.sum())
        graph = cls(
            X=torch.from_numpy(np.concatenate(columns.coords)).to(dtype),
            A=_concatenated(columns.atom_types, num_atoms),
            atom_pos=_concatenated(columns.position_types, num_atoms),
            block_id=torch.from_numpy(np.repeat(np.arange(len(block_len), dtype=np.int64), block_len)),
            B=torch.tensor(columns.block_types, dtype=torch.long),
            block_len=torch.from_numpy(block_len),
            segment=torch.tensor(columns.segment, dtype=torch.long),
            y=torch.tensor([float("nan") if y is None else float(y)], dtype=dtype),
        )
        if name is not None:
            graph.name = name
        return graph

    # ------------------------------------------------------------------ views
    @property
    def num_atoms(self) -> int:
        return int(self.X.size(0))

    @property
    def num_blocks(self) -> int:
        return int(self.B.size(0))

    @property
    def block_start(self) -> torch.Tensor:
        """[Nb] index of the first atom of each block."""
        return torch.cumsum(self.block_len, 0) - self.block_len

    @property
    def block_batch(self) -> torch.Tensor:
        """[Nb] graph index of each block (zeros for a single, unbatched graph)."""
        batch = getattr(self, "batch", None)
        if batch is None:
            return torch.zeros(self.num_blocks, dtype=torch.long, device=self.B.device)
        return batch[self.block_start]

    @property
    def atom_segment(self) -> torch.Tensor:
        """[N] segment of each atom."""
        return self.segment[self.block_id]

    @property
    def is_global(self) -> torch.Tensor:
        """[Nb] bool, True for global blocks."""
        return self.B == BLOCK_GLOBAL

    def segment_summary(self) -> list[dict[str, int]]:
        """Per segment: number of blocks and atoms, not counting global blocks."""
        real = ~self.is_global
        out = []
        for seg in torch.unique(self.segment).tolist():
            mask = real & (self.segment == seg)
            out.append({"segment": seg, "blocks": int(mask.sum()), "atoms": int(self.block_len[mask].sum())})
        return out


def ligand_atom_mask(graph: BlockGraph) -> torch.Tensor:
    """[N] bool: the atoms of the ligand (segment 1) of a graph or batch, global blocks excluded."""
    return (graph.segment[graph.block_id] == 1) & ~graph.is_global[graph.block_id]
