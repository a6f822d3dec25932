"""The graph a molecule-reading trajectory model sees: built from elements and bonds, never from file indices.

For the heavy atoms of a small molecule (atomic numbers [n] and heavy-atom bonds [B, 2]):

* nodes: one-hot element over :data:`ELEMENT_VOCABULARY` plus an "other" column, one-hot number of heavy-atom
  neighbours (0 … 4+), one-hot number of hydrogens bonded to the atom (0 … 3+: what tells a carbonyl oxygen from a
  hydroxyl one, or a CH3 from a C≡N), and whether the atom is in a ring (on a cycle of the graph);
* edges: every ordered pair i ≠ j of the same molecule (a small molecule is seen whole: non-bonded atoms repel),
  with the one-hot graph distance (1 … :data:`MAX_HOP` bonds apart, or further / not connected).

Nothing depends on the order of the atoms: a permutation of the input permutes the features, so a model built on
them reads the same molecule in any order, and a molecule it never saw as well. The training datasets
(:mod:`geomol.data.datasets.trajectories.molecule_windows`) and rollouts (:mod:`geomol.data.dynamics.systems`) both call
:func:`molecule_graph`.
"""
from __future__ import annotations

import functools

import numpy as np

__all__ = ["ELEMENT_VOCABULARY", "MAX_HOP", "NODE_FEATURES", "EDGE_FEATURES", "molecule_graph", "hop_distances",
           "heavy_atom_graph"]

ELEMENT_VOCABULARY = (6, 7, 8, 9, 15, 16, 17, 35)
"""C, N, O, F, P, S, Cl, Br; any other heavy element sets the "other" column."""
MAX_HOP = 3
MAX_DEGREE = 4
MAX_HYDROGENS = 3
NODE_FEATURES = tuple(f"element {z}" for z in ELEMENT_VOCABULARY) + ("element other",) + tuple(
    f"heavy neighbours {k}" for k in range(MAX_DEGREE)) + (f"heavy neighbours ≥ {MAX_DEGREE}",) + tuple(
    f"hydrogens {k}" for k in range(MAX_HYDROGENS)) + (f"hydrogens ≥ {MAX_HYDROGENS}", "in a ring")
EDGE_FEATURES = tuple(f"{k} bond(s) apart" for k in range(1, MAX_HOP + 1)) + (f"> {MAX_HOP} bonds apart",)


def hop_distances(n: int, bonds: np.ndarray) -> np.ndarray:
    """[n, n] number of bonds on the shortest path between atoms (a large number where not connected)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    bonds = np.asarray(bonds, dtype=np.int64).reshape(-1, 2)
    adjacency = coo_matrix((np.ones(len(bonds)), (bonds[:, 0], bonds[:, 1])), shape=(n, n))
    hops = shortest_path(adjacency, directed=False, unweighted=True)
    return np.where(np.isfinite(hops), hops, 1e9)


def _ring_atoms(n: int, bonds: np.ndarray) -> np.ndarray:
    """[n] bool: atoms on a cycle (an atom with a bond whose removal keeps its ends connected)."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(bonds.tolist())
    on_cycle = np.zeros(n, dtype=bool)
    for cycle in nx.cycle_basis(graph):
        on_cycle[cycle] = True
    return on_cycle


def heavy_atom_graph(atomic_numbers, bonds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The heavy atoms of all atoms [m] with bonds [B, 2]: (heavy [n] their indices, [B', 2] the bonds among them
    renumbered 0 … n − 1, [n] the hydrogens bonded to each)."""
    z = np.asarray(atomic_numbers, dtype=np.int64)
    bonds = np.asarray(bonds, dtype=np.int64).reshape(-1, 2)
    heavy = np.flatnonzero(z > 1)
    count = np.zeros(len(z), dtype=np.int64)
    for a, b in bonds[(z[bonds] == 1).any(1)].tolist():
        count[b if z[a] == 1 else a] += 1
    new = np.full(len(z), -1, dtype=np.int64)
    new[heavy] = np.arange(len(heavy))
    pairs = np.sort(new[bonds][(new[bonds] >= 0).all(1)], axis=1)
    pairs = np.unique(pairs, axis=0) if len(pairs) else np.zeros((0, 2), dtype=np.int64)
    return heavy, pairs, count[heavy]


def molecule_graph(atomic_numbers, bonds, hydrogens) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edge_index [2, M], edge_attr [M, len(EDGE_FEATURES)], node_attr [n, len(NODE_FEATURES)]) of one molecule.

    Args:
        atomic_numbers: [n] heavy atoms. bonds: [B, 2] bonds among them (indices into ``atomic_numbers``).
        hydrogens: [n] hydrogens bonded to each heavy atom.

    The arrays depend on the graph alone, so they are computed once per molecule (a rollout asks every window); each
    call gets its own copies.
    """
    key = tuple(tuple(np.asarray(a, dtype=np.int64).ravel().tolist()) for a in (atomic_numbers, bonds, hydrogens))
    return tuple(array.copy() for array in _molecule_graph(*key))


@functools.lru_cache(maxsize=256)
def _molecule_graph(atomic_numbers: tuple, bonds: tuple, hydrogens: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    z = np.asarray(atomic_numbers, dtype=np.int64)
    bonds = np.asarray(bonds, dtype=np.int64).reshape(-1, 2)
    n = len(z)
    hops = hop_distances(n, bonds)
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    edge_attr = np.zeros((len(i), len(EDGE_FEATURES)), dtype=np.float32)
    edge_attr[np.arange(len(i)), np.minimum(hops[i, j], MAX_HOP + 1).astype(np.int64) - 1] = 1.0
    element = np.array([ELEMENT_VOCABULARY.index(a) if a in ELEMENT_VOCABULARY else len(ELEMENT_VOCABULARY)
                        for a in z], dtype=np.int64)
    degree = np.minimum(np.bincount(bonds.ravel(), minlength=n), MAX_DEGREE)
    hydrogens = np.minimum(np.asarray(hydrogens, dtype=np.int64), MAX_HYDROGENS)
    if hydrogens.shape != (n,):
        raise ValueError(f"need one hydrogen count per heavy atom ({n}), got {hydrogens.shape}")
    node_attr = np.zeros((n, len(NODE_FEATURES)), dtype=np.float32)
    node_attr[np.arange(n), element] = 1.0
    first = len(ELEMENT_VOCABULARY) + 1
    node_attr[np.arange(n), first + degree] = 1.0
    node_attr[np.arange(n), first + MAX_DEGREE + 1 + hydrogens] = 1.0
    node_attr[:, -1] = _ring_atoms(n, bonds)
    return np.stack([i, j]).astype(np.int64), edge_attr, node_attr
