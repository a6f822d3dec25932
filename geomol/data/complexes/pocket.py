"""Pocket and interface selection: the blocks that have any atom near a partner's atoms.

A receptor block is in the pocket when any of its atoms lies within ``cutoff`` Å (distance
≤ cutoff) of any ligand atom, as in the reference GET data. Distances are between *heavy*
atoms on both sides, so the pocket does not depend on whether hydrogens were kept. Two edge
cases: a selected-side block made only of hydrogens (a lone hydrogen kept as its own block) is
measured by its hydrogens, and a partner without any heavy atom is measured by all its atoms.

The search is exact and vectorised: atoms outside the partner's bounding box grown by the
cutoff are discarded first, then distances are computed for chunks of consecutive atoms
against the partner atoms inside the chunk's own grown box. Each chunk holds at most
``max_pairs`` atom pairs, so memory stays bounded (about 8 bytes per pair, 16 MB by default)
for a whole protein against a large partner.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from geomol.data.blocks import Block
from geomol.data.io.structure import distance_mask
from geomol.errors import ConfigError, EmptySelectionError

__all__ = ["atoms_within", "blocks_near", "blocks_within", "heavy_or_all", "partner_atoms",
           "select_pocket", "select_interface", "DEFAULT_CUTOFF"]

DEFAULT_CUTOFF = 10.0
_MAX_PAIRS = 1 << 21
_CHUNK_ATOMS = 1024


def _inside_box(points: np.ndarray, around: np.ndarray, margin: float) -> np.ndarray:
    """[len(points)] bool: points inside the bounding box of ``around`` grown by ``margin``.

    Compared one axis at a time: a reduction across the three columns of an [N, 3] array is
    several times slower than six comparisons of columns.
    """
    lo, hi = around.min(axis=0) - margin, around.max(axis=0) + margin
    inside = (points[:, 0] >= lo[0]) & (points[:, 0] <= hi[0])
    for axis in (1, 2):
        inside &= (points[:, axis] >= lo[axis]) & (points[:, axis] <= hi[axis])
    return inside


def atoms_within(atoms: np.ndarray, reference: np.ndarray, cutoff: float, *, max_pairs: int = _MAX_PAIRS) -> np.ndarray:
    """Which atoms lie within ``cutoff`` Å of any reference atom.

    Args:
        atoms: [N, 3] coordinates (Å).
        reference: [M, 3] coordinates (Å).
        cutoff: distance threshold in Å (inclusive).
        max_pairs: most atom pairs held in memory at once.

    Returns:
        [N] bool.
    """
    if not np.isfinite(cutoff) or cutoff < 0:
        raise ConfigError(f"cutoff must be a finite, non-negative distance in Å, got {cutoff}")
    atoms = np.asarray(atoms, dtype=np.float64).reshape(-1, 3)
    reference = np.asarray(reference, dtype=np.float64).reshape(-1, 3)
    near = np.zeros(len(atoms), dtype=bool)
    if len(atoms) == 0 or len(reference) == 0:
        return near
    candidates = np.flatnonzero(_inside_box(atoms, reference, cutoff))
    for start in range(0, len(candidates), _CHUNK_ATOMS):
        chunk = candidates[start:start + _CHUNK_ATOMS]
        partners = reference[_inside_box(reference, atoms[chunk], cutoff)]
        near[chunk] = _any_within(atoms[chunk], partners, cutoff * cutoff, max_pairs)
    return near


def _any_within(atoms: np.ndarray, partners: np.ndarray, cutoff2: float, max_pairs: int) -> np.ndarray:
    """[len(atoms)] bool, in pieces of at most ``max_pairs`` pairs.

    Squared distances come from ``|a|² + |b|² - 2 a·b`` (one matrix product, several times faster
    than forming all difference vectors); pairs whose value lies within the rounding error of
    that expansion from the cutoff are decided again from exact differences, so the result is
    the exact ``distance ≤ cutoff`` test.
    """
    hit = np.zeros(len(atoms), dtype=bool)
    if len(partners) == 0:
        return hit
    origin = partners.mean(axis=0)  # small coordinates keep the expansion's rounding error small
    atoms, partners = atoms - origin, partners - origin
    sq_atoms, sq_partners = np.einsum("ij,ij->i", atoms, atoms), np.einsum("ij,ij->i", partners, partners)
    tolerance = 64 * np.finfo(np.float64).eps * (sq_atoms.max() + sq_partners.max() + cutoff2)
    cols = min(len(partners), max(1, max_pairs))
    rows = max(1, max_pairs // cols)
    for j in range(0, len(partners), cols):
        part, sq_part = partners[j:j + cols], sq_partners[j:j + cols]
        for i in range(0, len(atoms), rows):
            hit[i:i + rows] |= _piece_within(atoms[i:i + rows], sq_atoms[i:i + rows], part, sq_part, cutoff2, tolerance)
    return hit


def _piece_within(atoms: np.ndarray, sq_atoms: np.ndarray, partners: np.ndarray, sq_partners: np.ndarray,
                  cutoff2: float, tolerance: float) -> np.ndarray:
    """[n] bool: which of ``atoms`` [n, 3] lie within the cutoff of any of ``partners`` [m, 3].

    ``sq_*`` are the squared norms of the rows, ``cutoff2`` the squared cutoff (Å²) and
    ``tolerance`` the bound on the rounding error of the expanded squared distances. These are
    laid out [m, n], so that the reduction over partners runs along whole rows.
    """
    d2 = sq_partners[:, None] + sq_atoms[None, :] - 2.0 * (atoms @ partners.T).T
    hit = (d2 <= cutoff2 - tolerance).any(axis=0)
    border = np.abs(d2 - cutoff2) <= tolerance
    if border.any():
        p, a = np.nonzero(border)
        diff = atoms[a] - partners[p]
        hit[a[np.einsum("ij,ij->i", diff, diff) <= cutoff2]] = True
    return hit


def blocks_within(coords: np.ndarray, atom_block: np.ndarray, is_heavy: np.ndarray, num_blocks: int,
                  partner: np.ndarray, cutoff: float) -> np.ndarray:
    """Sorted indices of the blocks with a counted atom within ``cutoff`` Å of ``partner`` [M, 3].

    Args:
        coords: [N, 3] atom coordinates (Å); atom_block: [N] block of each atom;
            is_heavy: [N] bool, False for hydrogens.
    """
    counted = distance_mask(is_heavy, atom_block, num_blocks)
    return blocks_near(coords[counted], atom_block[counted], num_blocks, partner, cutoff)


def blocks_near(coords: np.ndarray, atom_block: np.ndarray, num_blocks: int, partner: np.ndarray,
                cutoff: float) -> np.ndarray:
    """Sorted indices of the blocks with an atom within ``cutoff`` Å of ``partner`` [M, 3].

    Args:
        coords: [N, 3] coordinates (Å) of the atoms that count (see :func:`distance_mask`).
        atom_block: [N] block of each of these atoms, below ``num_blocks``.
    """
    near = np.zeros(num_blocks, dtype=bool)
    near[atom_block[atoms_within(coords, partner, cutoff)]] = True
    return np.flatnonzero(near)


def _flatten(blocks: Sequence[Block]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(coords [N, 3], block of each atom [N], is_heavy [N]) of a block list."""
    if not blocks:
        return np.zeros((0, 3)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    coords = np.concatenate([b.coords for b in blocks])
    atom_block = np.repeat(np.arange(len(blocks)), [len(b) for b in blocks])
    is_heavy = np.array([e != "H" for b in blocks for e in b.elements], dtype=bool)
    return coords, atom_block, is_heavy


def heavy_or_all(coords: np.ndarray, is_heavy: np.ndarray) -> np.ndarray:
    """[M, 3] the heavy-atom rows of ``coords`` ([N, 3]); all rows when there is no heavy atom."""
    return coords[is_heavy] if is_heavy.any() else coords


def partner_atoms(blocks: Sequence[Block]) -> np.ndarray:
    """[M, 3] coordinates (Å) of the atoms of ``blocks`` that count for distances (heavy atoms)."""
    coords, _, is_heavy = _flatten(blocks)
    return heavy_or_all(coords, is_heavy)


def select_pocket(receptor: Sequence[Block], ligand: Sequence[Block], cutoff: float = DEFAULT_CUTOFF, *,
                  source: str | None = None) -> list[Block]:
    """Receptor blocks with any heavy atom within ``cutoff`` Å of any ligand heavy atom, in order.

    Raises:
        EmptySelectionError: no receptor block is that close (``source`` names the inputs).
    """
    coords, atom_block, is_heavy = _flatten(receptor)
    chosen = blocks_within(coords, atom_block, is_heavy, len(receptor), partner_atoms(ligand), cutoff)
    if len(chosen) == 0:
        raise EmptySelectionError(f"pocket is empty: no receptor atom within {cutoff:g} Å of the ligand", source=source)
    return [receptor[i] for i in chosen]


def select_interface(blocks_a: Sequence[Block], blocks_b: Sequence[Block], cutoff: float = DEFAULT_CUTOFF, *,
                     source: str | None = None) -> tuple[list[Block], list[Block]]:
    """The blocks of each side with any heavy atom within ``cutoff`` Å of the other side.

    Raises:
        EmptySelectionError: the two sides do not come that close.
    """
    picked = []
    for mine, other in ((blocks_a, blocks_b), (blocks_b, blocks_a)):
        coords, atom_block, is_heavy = _flatten(mine)
        chosen = blocks_within(coords, atom_block, is_heavy, len(mine), partner_atoms(other), cutoff)
        picked.append([mine[i] for i in chosen])
    if not picked[0]:
        raise EmptySelectionError(f"interface is empty: the two sides are never within {cutoff:g} Å", source=source)
    return picked[0], picked[1]
