"""Conformers of a ligand embedded (RDKit ETKDG v3) with its common core held at the reference coordinates.

Used by :class:`~geomol.data.posing.poses.PoseTemplate`: :func:`embed_on_core` embeds, with a
fallback for a core stereocentre that contradicts the reference geometry; :func:`add_mirror_image`
adds a conformer's mirror image (a candidate as valid as the conformer for a ligand without
stereocentres, :func:`without_stereocentres`); :func:`rdkit_seed` turns the user's seed into
RDKit's.
"""
from __future__ import annotations

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdDistGeom
from rdkit.Geometry import Point3D

from geomol.data.io._source import rdkit_messages

__all__ = ["rdkit_seed", "stereocentres", "without_stereocentres", "add_mirror_image", "embed_on_core"]


def rdkit_seed(seed: int, mapping: int) -> int:
    """A positive embedding seed per (user seed, core mapping).

    RDKit derives each conformer's seed from the given one multiplicatively, so seed 0 would embed
    the same conformer every time.
    """
    return ((seed + 1) * 7919 + mapping) % (2**31 - 1) or 1


def stereocentres(mol: Chem.Mol) -> set[int]:
    """Indices of the atoms with a specified tetrahedral configuration."""
    return {atom.GetIdx() for atom in mol.GetAtoms() if atom.GetChiralTag() != Chem.ChiralType.CHI_UNSPECIFIED}


def without_stereocentres(mol: Chem.Mol) -> bool:
    """True when no atom has a specified tetrahedral configuration (so a mirror image is the same molecule)."""
    return not stereocentres(mol)


def add_mirror_image(mol: Chem.Mol, conf_id: int) -> int:
    """Add the mirror image (x → −x) of conformer ``conf_id`` to ``mol``; returns its id.

    Distance geometry cannot tell a non-planar core from its mirror image, so some conformers
    come out with the core reflected; for a molecule without stereocentres the reflected
    conformer is as valid a conformer, and the better of the two fits the reference core.
    """
    mirrored = Chem.Conformer(mol.GetConformer(conf_id))
    mirrored.SetPositions(mirrored.GetPositions() * np.array([-1.0, 1.0, 1.0]))
    return mol.AddConformer(mirrored, assignId=True)


def embed_on_core(ligand: Chem.Mol, mapping: list[tuple[int, int]], reference_xyz: np.ndarray, count: int,
                  seed: int, attempts: int) -> list[int]:
    """Ids of up to ``count`` conformers added to ``ligand`` with its core held at the reference coordinates.

    Args:
        mapping: (ligand atom, reference atom) pairs of the common core.
        reference_xyz: [R, 3] reference atom positions (Å).
        seed: RDKit random seed (see :func:`rdkit_seed`).
        attempts: embedding attempts per conformer of the first try (0: RDKit's default).

    A stereocentre of the ligand in the core can contradict the reference geometry (the series
    has both enantiomers). RDKit would then try an impossible embedding hundreds of times per
    conformer, so the first try gets ``attempts`` attempts; when it fails, the stereocentres and
    their neighbours are released from the coordinate map and embedding is tried again, and only
    if there is nothing to release (or that fails too) is the full map tried with RDKit's default
    number of attempts.
    """
    ids = _embed_with_map(ligand, mapping, reference_xyz, count, seed, attempts)
    if ids:
        return ids
    stereo = stereocentres(ligand)
    released = stereo | {n.GetIdx() for i in stereo for n in ligand.GetAtomWithIdx(i).GetNeighbors()}
    kept = [(l, r) for l, r in mapping if l not in released]
    if released and len(mapping) > len(kept) >= 3:
        ids = _embed_with_map(ligand, kept, reference_xyz, count, seed, attempts)
    if not ids and attempts:
        ids = _embed_with_map(ligand, mapping, reference_xyz, count, seed, 0)
    return ids


def _embed_with_map(ligand: Chem.Mol, mapping: list[tuple[int, int]], reference_xyz: np.ndarray, count: int,
                    seed: int, attempts: int) -> list[int]:
    params = rdDistGeom.ETKDGv3()
    params.randomSeed = seed
    params.maxIterations = attempts
    params.numThreads = 1
    params.clearConfs = False
    params.SetCoordMap({l: Point3D(*reference_xyz[r]) for l, r in mapping})
    with rdkit_messages():
        return list(rdDistGeom.EmbedMultipleConfs(ligand, count, params))
