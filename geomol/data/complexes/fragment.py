"""Ligand fragmentation into blocks by principal subgraphs learned from a set of molecules.

A small molecule has no residues, so GET either makes one block per atom (the default) or
groups its atoms into *fragments* (``specs/GET.md`` §11.1, "fragment mode"). The fragment types
are principal subgraphs learned by repeated merging: every heavy atom starts as its own
fragment; at each step the most frequent pair of adjacent fragments over the training molecules
(the merged subgraph identified by its canonical SMILES) is merged everywhere it occurs, and its
SMILES becomes a fragment type, until the vocabulary has the requested size or no pair occurs
at least ``min_frequency`` times. A new molecule is fragmented by replaying the learned merges
in learned order, so every atom always ends up in exactly one connected group.

Fragments are learned on heavy-atom graphs; an explicit hydrogen joins the group of the heavy
atom it is bonded to. Fragment SMILES are canonical, non-isomeric (no stereo, no isotopes) and
written from the atom subset without kekulization, so a partial aromatic ring is ``'cc'``.

Example:
    >>> vocab = FragmentVocab.learn(molecules, size=300)
    >>> vocab.save("ligand_fragments.json")
    >>> groups = vocab.fragment(mol)            # [((0, 1, 2, 3, 4, 5), '@c1ccccc1'), ((6,), 'cl'), ...]
    >>> block_vocab = vocab.block_vocab()       # 150 official block types + len(vocab) fragments
"""
from __future__ import annotations

import heapq
import json
import os
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from os import PathLike
from typing import Callable, Iterable, Sequence

from rdkit import Chem

from geomol.data.vocab import VOCAB, BlockVocab, element_block_symbol, fragment_block_symbol
from geomol.errors import ConfigError, DatasetError, StructureReadError

__all__ = ["FragmentVocab", "per_atom_groups"]

Group = tuple[tuple[int, ...], str]
"""(atom indices of the input molecule, block symbol) of one block."""
Composition = tuple[int, ...]
"""Sorted atomic numbers of a fragment's heavy atoms: a cheap necessary condition for a match."""

_FORMAT = "geomol.FragmentVocab"
_VERSION = 1
_UNKNOWN_BLOCK = "?"  # dummy atoms ('*', atomic number 0) must not become the MASK block '*'


@dataclass(frozen=True)
class _HeavyGraph:
    """Heavy-atom view of a molecule, with the hydrogens remembered per heavy atom."""

    mol: Chem.Mol  # heavy atoms only, hydrogens folded into explicit H counts, sanitized if possible
    original_index: tuple[int, ...]  # heavy atom -> atom index in the input molecule
    hydrogens: tuple[tuple[int, ...], ...]  # heavy atom -> input indices of its bonded hydrogens
    lone_hydrogens: tuple[int, ...]  # hydrogens bonded to no heavy atom: one block each
    neighbours: tuple[tuple[int, ...], ...]  # heavy-atom adjacency


def _checked(mol: Chem.Mol | None, source: str | PathLike | None = None, record: str | int | None = None) -> Chem.Mol:
    """``mol`` itself, or :class:`StructureReadError` if it is not a molecule with atoms."""
    if isinstance(mol, Chem.Mol) and mol.GetNumAtoms() > 0:
        return mol
    if record is None and isinstance(mol, Chem.Mol) and mol.HasProp("_Name"):
        record = mol.GetProp("_Name").strip() or None
    reason = ("molecule is None (RDKit could not read it)" if mol is None
              else "molecule has no atoms" if isinstance(mol, Chem.Mol)
              else f"expected an RDKit Mol, got {type(mol).__name__}")
    raise StructureReadError(reason, source if source is not None else "<molecule>", record)


def _hydrogen_owner(atom: Chem.Atom) -> int | None:
    """Index of the heavy atom a hydrogen belongs to (the lowest-index heavy neighbour)."""
    heavy = [n.GetIdx() for n in atom.GetNeighbors() if n.GetAtomicNum() != 1]
    return min(heavy) if heavy else None


def _heavy_graph(mol: Chem.Mol) -> _HeavyGraph:
    """Fold explicit hydrogens into their heavy atoms and normalise the heavy-atom copy.

    Re-sanitizing the copy makes aromaticity and charge conventions the same whatever the
    reader did; if sanitization fails part-way (bad valence in a docked pose), the molecule is
    used as far as it got, which is still deterministic for the same input.
    """
    owner = {a.GetIdx(): _hydrogen_owner(a) for a in mol.GetAtoms() if a.GetAtomicNum() == 1}
    heavy = [i for i in range(mol.GetNumAtoms()) if i not in owner]
    rw = Chem.RWMol(mol)
    rw.RemoveAllConformers()
    for h, parent in owner.items():
        if parent is not None:
            atom = rw.GetAtomWithIdx(parent)
            atom.SetNumExplicitHs(atom.GetNumExplicitHs() + 1)
    rw.BeginBatchEdit()
    for h in owner:
        rw.RemoveAtom(h)
    rw.CommitBatchEdit()
    for atom in rw.GetAtoms():
        atom.SetAtomMapNum(0)
    copy = rw.GetMol()
    copy.UpdatePropertyCache(strict=False)
    Chem.SanitizeMol(copy, Chem.SanitizeFlags.SANITIZE_ALL ^ Chem.SanitizeFlags.SANITIZE_PROPERTIES, catchErrors=True)
    position = {orig: i for i, orig in enumerate(heavy)}
    hydrogens: list[list[int]] = [[] for _ in heavy]
    for h, parent in sorted(owner.items()):
        if parent is not None:
            hydrogens[position[parent]].append(h)
    neighbours = tuple(tuple(sorted(n.GetIdx() for n in a.GetNeighbors())) for a in copy.GetAtoms())
    lone = tuple(sorted(h for h, parent in owner.items() if parent is None))
    return _HeavyGraph(copy, tuple(heavy), tuple(map(tuple, hydrogens)), lone, neighbours)


def _fragment_smiles(mol: Chem.Mol, atoms: Sequence[int]) -> str:
    """Canonical SMILES of the subgraph induced by ``atoms`` (no stereo, no kekulization)."""
    return Chem.MolFragmentToSmiles(mol, atomsToUse=list(atoms), canonical=True, isomericSmiles=False)


def _smiles_composition(smiles: str) -> Composition:
    """Composition of a fragment SMILES as written by :func:`_fragment_smiles`."""
    parsed = Chem.MolFromSmiles(smiles, sanitize=False)
    if parsed is None:
        raise ConfigError(f"invalid fragment SMILES {smiles!r}", "FragmentVocab")
    return tuple(sorted(a.GetAtomicNum() for a in parsed.GetAtoms()))


def _single_atom_symbol(atom: Chem.Atom) -> str:
    return element_block_symbol(atom.GetSymbol()) if atom.GetAtomicNum() > 0 else _UNKNOWN_BLOCK


class _MergeState:
    """Fragments of one molecule while merges are applied; shared by learning and fragmenting.

    Fragments are integer ids; ``pairs`` maps each adjacent fragment pair ``(a, b)``, a < b, to
    the canonical SMILES of its union, and ``pairs_by_smiles`` indexes the same pairs by SMILES
    so that a merge touches only the pairs it changes. A pair whose union composition fails
    ``accept`` (too large while learning, or matching no learned merge while fragmenting) is
    kept with SMILES ``None``: it can never merge, so its SMILES, the costly part, is not written.
    """

    def __init__(self, graph: _HeavyGraph, accept: Callable[[Composition], bool] = lambda c: True):
        self.graph = graph
        self.accept = accept
        self.atoms: dict[int, tuple[int, ...]] = {i: (i,) for i in range(len(graph.neighbours))}
        self.composition: dict[int, Composition] = {i: (a.GetAtomicNum(),) for i, a in enumerate(graph.mol.GetAtoms())}
        self.smiles: dict[int, str] = {}  # multi-atom fragments only
        self.partners: dict[int, set[int]] = {i: set(nb) for i, nb in enumerate(graph.neighbours)}
        self.pairs: dict[tuple[int, int], str | None] = {}
        self.pairs_by_smiles: dict[str, set[tuple[int, int]]] = {}
        self._next_id = len(self.atoms)
        for a, nbs in enumerate(graph.neighbours):
            for b in nbs:
                if a < b:
                    self._add_pair(a, b)

    def pair_counts(self) -> Counter:
        """Number of adjacent fragment pairs per union SMILES."""
        return Counter({s: len(keys) for s, keys in self.pairs_by_smiles.items()})

    def _add_pair(self, a: int, b: int) -> str | None:
        key = (a, b) if a < b else (b, a)
        smiles = None
        if self.accept(tuple(sorted(self.composition[a] + self.composition[b]))):
            smiles = _fragment_smiles(self.graph.mol, self.atoms[a] + self.atoms[b])
            self.pairs_by_smiles.setdefault(smiles, set()).add(key)
        self.pairs[key] = smiles
        return smiles

    def _remove_pair(self, key: tuple[int, int]) -> str | None:
        smiles = self.pairs.pop(key)
        if smiles is not None:
            keys = self.pairs_by_smiles[smiles]
            keys.discard(key)
            if not keys:
                del self.pairs_by_smiles[smiles]
        return smiles

    def merge_all(self, smiles: str) -> Counter:
        """Merge every adjacent pair whose union is ``smiles``; return the pair-count changes.

        Overlapping occurrences (``C-C-C`` for ``'CC'``) are resolved greedily in order of
        their sorted atom indices; a merged fragment cannot take part in a second merge of the
        same step, because any pair containing it is larger than ``smiles``.
        """
        delta: Counter = Counter()
        occurrences = sorted(self.pairs_by_smiles.get(smiles, ()), key=lambda k: sorted(self.atoms[k[0]] + self.atoms[k[1]]))
        for a, b in occurrences:
            if (a, b) in self.pairs:  # not consumed by an earlier occurrence of this step
                self._merge(a, b, smiles, delta)
        return delta

    def _merge(self, a: int, b: int, smiles: str, delta: Counter) -> None:
        partners_a, partners_b = self.partners.pop(a), self.partners.pop(b)
        removed = [self._remove_pair((min(a, o), max(a, o))) for o in partners_a - {b}]
        removed += [self._remove_pair((min(b, o), max(b, o))) for o in partners_b - {a}]
        removed.append(self._remove_pair((a, b)))
        new = self._next_id
        self._next_id += 1
        self.atoms[new] = tuple(sorted(self.atoms.pop(a) + self.atoms.pop(b)))
        self.composition[new] = tuple(sorted(self.composition.pop(a) + self.composition.pop(b)))
        self.smiles.pop(a, None)
        self.smiles.pop(b, None)
        self.smiles[new] = smiles
        self.partners[new] = (partners_a | partners_b) - {a, b}
        added = []
        for other in self.partners[new]:
            self.partners[other] -= {a, b}
            self.partners[other].add(new)
            added.append(self._add_pair(new, other))
        delta.subtract(s for s in removed if s is not None)
        delta.update(s for s in added if s is not None)

    def groups(self) -> list[Group]:
        """The partition of the *input* molecule: hydrogens with their heavy atom, sorted."""
        g = self.graph
        result: list[Group] = []
        for fid, heavy_atoms in self.atoms.items():
            members = [g.original_index[i] for i in heavy_atoms]
            for i in heavy_atoms:
                members.extend(g.hydrogens[i])
            symbol = (fragment_block_symbol(self.smiles[fid]) if fid in self.smiles
                      else _single_atom_symbol(g.mol.GetAtomWithIdx(heavy_atoms[0])))
            result.append((tuple(sorted(members)), symbol))
        result.extend(((h,), element_block_symbol("H")) for h in g.lone_hydrogens)
        return sorted(result)


def per_atom_groups(mol: Chem.Mol, *, source: str | PathLike | None = None) -> list[Group]:
    """The default fragmentation: one block per heavy atom (with its hydrogens), symbol = element.

    Returns the same structure as :meth:`FragmentVocab.fragment`, so callers have one code path.
    Raises :class:`~geomol.errors.StructureReadError` for ``None`` or a molecule without atoms.
    """
    return _MergeState(_heavy_graph(_checked(mol, source))).groups()


class FragmentVocab:
    """An ordered list of learned merges; its distinct SMILES are the fragment block types.

    Args:
        merges: canonical SMILES of each merge step, in learned order. A step may repeat an
            earlier SMILES (the same subgraph re-formed from different parts); it is replayed
            but adds no new type.
        counts: pair frequency of each merge when it was learned (kept for inspection only).
        min_frequency, max_atoms: the settings used when learning (metadata).
    """

    def __init__(self, merges: Sequence[str], counts: Sequence[int] = (), min_frequency: int | None = None,
                 max_atoms: int | None = None):
        self.merges: tuple[str, ...] = tuple(merges)
        self.counts: tuple[int, ...] = tuple(counts)
        self.min_frequency, self.max_atoms = min_frequency, max_atoms
        if self.counts and len(self.counts) != len(self.merges):
            raise ConfigError(f"{len(self.counts)} counts for {len(self.merges)} merges", "FragmentVocab")
        self.fragments: tuple[str, ...] = tuple(dict.fromkeys(self.merges))
        """Canonical SMILES of the multi-atom fragment types, in learned order."""
        self._compositions = frozenset(_smiles_composition(s) for s in self.fragments)

    def __len__(self) -> int:
        return len(self.fragments)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FragmentVocab) and other.merges == self.merges

    def __hash__(self) -> int:
        return hash(self.merges)

    def __repr__(self) -> str:
        return f"FragmentVocab({len(self)} fragment types, {len(self.merges)} merges)"

    def block_vocab(self, base: BlockVocab = VOCAB) -> BlockVocab:
        """``base`` extended with one block type per fragment (symbol ``'@' + SMILES``)."""
        return base.extended(self.fragments)

    def fragment(self, mol: Chem.Mol, *, source: str | PathLike | None = None) -> list[Group]:
        """Partition ``mol`` into blocks by replaying the learned merges in order.

        Returns:
            ``[(atom indices, block symbol), ...]`` sorted by first atom; every atom of ``mol``
            (hydrogens included) is in exactly one group and every group is connected. The
            symbol is ``'@' + SMILES`` for a multi-atom fragment, the lower-case element for a
            single heavy atom (with its hydrogens) or a lone hydrogen.
        Raises:
            StructureReadError: ``mol`` is ``None`` or has no atoms (``source`` names the file).
        """
        state = _MergeState(_heavy_graph(_checked(mol, source)), self._compositions.__contains__)
        for smiles in self.merges:
            if smiles in state.pairs_by_smiles:
                state.merge_all(smiles)
        return state.groups()

    @classmethod
    def learn(cls, mols: Iterable[Chem.Mol], size: int = 300, min_frequency: int = 2,
              progress: bool = False, max_atoms: int | None = None) -> "FragmentVocab":
        """Learn ``size`` multi-atom fragment types (fewer if pairs become rarer than ``min_frequency``).

        Pair frequencies count every adjacent fragment pair in every molecule and are updated
        incrementally after each merge; ties go to the lexicographically smallest SMILES, so the
        result is deterministic for the same molecules in the same order.

        Args:
            max_atoms: optional cap on the heavy atoms of a fragment. Without it, a set of
                congeneric series learns whole shared scaffolds as single blocks.
        Raises:
            StructureReadError: a molecule is ``None`` or empty (record = its position).
            ConfigError: ``size < 0``, ``min_frequency < 1`` or ``max_atoms < 2``.
            DatasetError: ``mols`` is empty.
        """
        if size < 0 or min_frequency < 1 or (max_atoms is not None and max_atoms < 2):
            raise ConfigError(f"need size >= 0, min_frequency >= 1 and max_atoms >= 2 (or None), got size={size}, "
                              f"min_frequency={min_frequency}, max_atoms={max_atoms}", "FragmentVocab.learn")
        accept = (lambda c: True) if max_atoms is None else (lambda c: len(c) <= max_atoms)
        states = [_MergeState(_heavy_graph(_checked(m, "FragmentVocab.learn", i)), accept) for i, m in enumerate(mols)]
        if not states:
            raise DatasetError("no molecules to learn fragments from", "FragmentVocab.learn")
        counter = _PairCounter()
        for i, state in enumerate(states):
            counter.update(i, state.pair_counts())
        merges: list[str] = []
        counts: list[int] = []
        types: set[str] = set()
        with _progress_bar(progress, size) as advance:
            while len(types) < size:
                best = counter.most_frequent()
                if best is None or best[1] < min_frequency:
                    break
                smiles, count = best
                for i in sorted(counter.molecules_with(smiles)):
                    counter.update(i, states[i].merge_all(smiles))
                merges.append(smiles)
                counts.append(count)
                if smiles not in types:
                    types.add(smiles)
                    advance()
        return cls(merges, counts, min_frequency, max_atoms)

    def to_dict(self) -> dict:
        """JSON-ready contents (strings and ints only: safe inside a ``weights_only`` checkpoint)."""
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "min_frequency": self.min_frequency,
            "max_atoms": self.max_atoms,
            "num_fragments": len(self),
            "merges": [{"smiles": s, "count": c} for s, c in zip(self.merges, self.counts or [None] * len(self.merges))],
        }

    @classmethod
    def from_dict(cls, data, source: str | PathLike | None = "FragmentVocab") -> "FragmentVocab":
        """Inverse of :meth:`to_dict`; :class:`DatasetError` (naming ``source``) on malformed data."""
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise DatasetError(f"not a fragment vocabulary (expected \"format\": \"{_FORMAT}\")", source)
        if data.get("version") != _VERSION:
            raise DatasetError(f"unsupported fragment vocabulary version {data.get('version')!r}", source)
        merges = data.get("merges")
        if not isinstance(merges, list) or not all(
                isinstance(m, dict) and isinstance(m.get("smiles"), str) and m["smiles"] for m in merges):
            raise DatasetError("\"merges\" must be a list of {\"smiles\": non-empty string, \"count\": int}", source)
        counts = [m.get("count") for m in merges]
        if not all(isinstance(c, int) for c in counts):
            counts = []
        try:
            return cls([m["smiles"] for m in merges], counts, data.get("min_frequency"), data.get("max_atoms"))
        except ConfigError as exc:
            raise DatasetError(exc.reason, source) from None

    def save(self, path: str | PathLike) -> None:
        """Write the vocabulary as human-readable JSON (atomically: a crash leaves no half file)."""
        tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(self.to_dict(), handle, indent=1)
            handle.write("\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | PathLike) -> "FragmentVocab":
        """Read a vocabulary written by :meth:`save`; :class:`DatasetError` names a bad file."""
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            raise DatasetError("fragment vocabulary file not found", path) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DatasetError(f"cannot read fragment vocabulary: {exc}", path) from None
        return cls.from_dict(data, path)


class _PairCounter:
    """Global pair frequencies with a lazy max-heap and, per SMILES, the molecules that have it."""

    def __init__(self):
        self.counts: Counter = Counter()
        self._heap: list[tuple[int, str]] = []
        self._where: dict[str, set[int]] = {}

    def update(self, molecule: int, delta: Counter) -> None:
        for smiles, change in delta.items():
            if change == 0:
                continue
            self.counts[smiles] += change
            heapq.heappush(self._heap, (-self.counts[smiles], smiles))
            if change > 0:
                self._where.setdefault(smiles, set()).add(molecule)

    def most_frequent(self) -> tuple[str, int] | None:
        """(SMILES, count) of the most frequent pair; stale heap entries are dropped on the way."""
        while self._heap:
            negative, smiles = self._heap[0]
            if self.counts[smiles] == -negative and -negative > 0:
                return smiles, -negative
            heapq.heappop(self._heap)
        return None

    def molecules_with(self, smiles: str) -> set[int]:
        """Molecules that may contain ``smiles`` (a superset; merging is a no-op elsewhere)."""
        return self._where.pop(smiles, set())


@contextmanager
def _progress_bar(enabled: bool, total: int):
    """Yield an ``advance()`` callable: a rich progress bar when ``enabled``, else a no-op."""
    if not enabled:
        yield lambda: None
        return
    from rich.progress import Progress

    with Progress() as bar:
        task = bar.add_task("learning fragments", total=total)
        yield lambda: bar.advance(task)
