"""The graph a molecule-reading trajectory model sees: built from elements and bonds, never from file indices.

For the heavy atoms of a small molecule (atomic numbers [n] and heavy-atom bonds [B, 2]):

* nodes: one-hot element over :data:`ELEMENT_VOCABULARY` plus an "other" column, one-hot number of heavy-atom
  neighbours (0 … 4+), and whether the atom is in a ring (a bond that is not a bridge of the graph);
* edges: every ordered pair i ≠ j of the same molecule (a small molecule is seen whole: non-bonded atoms repel),
  with the one-hot graph distance (1 … :data:`MAX_HOP` bonds apart, or further / not connected).

Nothing depends on the order of the atoms: a permutation of the input permutes the features, so a model built on
them reads the same molecule in any order, and a molecule it never saw as well. The training datasets
(:mod:`geomol.data.datasets.molecule_windows`) and rollouts (:mod:`geomol.data.dynamics_systems`) both call
:func:`molecule_graph`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["ELEMENT_VOCABULARY", "MAX_HOP", "NODE_FEATURES", "EDGE_FEATURES", "molecule_graph", "hop_distances"]

ELEMENT_VOCABULARY = (6, 7, 8, 9, 15, 16, 17, 35)
"""C, N, O, F, P, S, Cl, Br; any other heavy element sets the "other" column."""
MAX_HOP = 3
MAX_DEGREE = 4
NODE_FEATURES = tuple(f"element {z}" for z in ELEMENT_VOCABULARY) + ("element other",) + tuple(
    f"heavy neighbours {k}" for k in range(MAX_DEGREE)) + (f"heavy neighbours ≥ {MAX_DEGREE}", "in a ring")
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


def molecule_graph(atomic_numbers, bonds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edge_index [2, M], edge_attr [M, len(EDGE_FEATURES)], node_attr [n, len(NODE_FEATURES)]) of one molecule.

    Args:
        atomic_numbers: [n] heavy atoms. bonds: [B, 2] bonds among them (indices into ``atomic_numbers``).
    """
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
    node_attr = np.zeros((n, len(NODE_FEATURES)), dtype=np.float32)
    node_attr[np.arange(n), element] = 1.0
    node_attr[np.arange(n), len(ELEMENT_VOCABULARY) + 1 + degree] = 1.0
    node_attr[:, -1] = _ring_atoms(n, bonds)
    return np.stack([i, j]).astype(np.int64), edge_attr, node_attr
