"""Size and contact descriptors of a protein–protein interface, for the baselines of protein–protein affinity.

From one structure file and two chain groups (partner A, partner B), heavy atoms only:

* ``interface_residues``: residues of either partner with a heavy atom within 8 Å of a heavy atom of the other;
* ``buried_sasa``: buried solvent-accessible surface, SASA(A) + SASA(B) − SASA(AB) in Å² (``freesasa``,
  Lee–Richards, ProtOr radii; element radii for atoms the classifier does not know);
* ``contacts``: residue pairs across the interface with a heavy-atom pair within 5.5 Å, and their counts by
  the residue classes of the two ends (charged D E K R, polar S T N Q H Y, apolar the rest:
  ``contacts_charged_charged``, ``contacts_charged_polar``, …), the descriptors of contact-count
  affinity models such as PRODIGY's.

``freesasa`` is an optional dependency (``pip install "geomol[ppa]"``); only ``buried_sasa`` needs it.
"""
from __future__ import annotations

from itertools import combinations_with_replacement
from os import PathLike
from typing import Sequence

import numpy as np
from scipy.spatial import cKDTree

from geomol.data.io import Structure, read_structure
from geomol.data.vocab import residue_block_symbol
from geomol.errors import ConfigError, EmptySelectionError, LigandNotFoundError

__all__ = ["INTERFACE_DISTANCE", "CONTACT_DISTANCE", "RESIDUE_CLASSES", "CONTACT_FEATURES", "interface_features",
           "partner_masks", "buried_sasa"]

INTERFACE_DISTANCE = 8.0
"""Å: a residue is an interface residue when a heavy atom of it is this close to the other partner."""
CONTACT_DISTANCE = 5.5
"""Å: two residues of different partners are in contact when two of their heavy atoms are this close."""
RESIDUE_CLASSES = ("charged", "polar", "apolar")
_CHARGED, _POLAR = set("DEKR"), set("STNQHY")
CONTACT_FEATURES = tuple(f"contacts_{a}_{b}" for a, b in combinations_with_replacement(RESIDUE_CLASSES, 2))
"""The six class-pair counts, in a fixed order (a regression's columns)."""
_ELEMENT_RADII = {"C": 1.7, "N": 1.55, "O": 1.52, "S": 1.8, "Se": 1.9, "P": 1.8}  # Å, Bondi


def _residue_class(resname: str) -> str:
    symbol = residue_block_symbol(resname) or ""
    return "charged" if symbol in _CHARGED else "polar" if symbol in _POLAR else "apolar"


def partner_masks(structure: Structure, chains_a: Sequence[str], chains_b: Sequence[str]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """[R] bool residue masks of the two partners.

    Raises:
        LigandNotFoundError: a chain of either group is not in the file (naming it and the chains present).
    """
    present = sorted(set(structure.chains))
    for label, chains in (("A", chains_a), ("B", chains_b)):
        missing = [c for c in chains if c not in present]
        if missing:
            raise LigandNotFoundError(f"partner {label}: chain(s) {', '.join(missing)} not in the file "
                                      f"(chains present: {', '.join(present)})", source=structure.source)
    overlap = sorted(set(chains_a) & set(chains_b))
    if overlap:
        raise ConfigError(f"chain(s) {', '.join(overlap)} listed in both partners", source=structure.source)
    return structure.residue_mask(chains=list(chains_a)), structure.residue_mask(chains=list(chains_b))


def _heavy_atoms(structure: Structure, residues: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """([K, 3] heavy-atom coordinates, [K] residue index of each) of the residues selected by ``residues``."""
    residue_of_atom = np.repeat(np.arange(structure.num_residues), np.diff(structure.residue_start))
    keep = residues[residue_of_atom] & structure.is_heavy
    return structure.coords[keep], residue_of_atom[keep]


def _radii(structure: Structure, atoms: np.ndarray) -> np.ndarray:
    import freesasa

    classifier = freesasa.Classifier()
    residue_of_atom = np.repeat(np.arange(structure.num_residues), np.diff(structure.residue_start))
    radii = []
    for i in np.flatnonzero(atoms):
        radius = classifier.radius(structure.resnames[residue_of_atom[i]], structure.names[i])
        radii.append(radius if radius > 0 else _ELEMENT_RADII.get(structure.elements[i], 1.8))
    return np.asarray(radii)


def buried_sasa(structure: Structure, mask_a: np.ndarray, mask_b: np.ndarray) -> float:
    """SASA(A) + SASA(B) − SASA(AB) in Å² over heavy atoms (residue masks ``mask_a``, ``mask_b``).

    Raises:
        ConfigError: freesasa is not installed.
    """
    try:
        import freesasa
    except ImportError:
        raise ConfigError("the buried surface needs freesasa: pip install \"geomol[ppa]\"") from None
    residue_of_atom = np.repeat(np.arange(structure.num_residues), np.diff(structure.residue_start))
    areas = {}
    for label, residues in (("a", mask_a), ("b", mask_b), ("ab", mask_a | mask_b)):
        atoms = residues[residue_of_atom] & structure.is_heavy
        result = freesasa.calcCoord(structure.coords[atoms].ravel().tolist(), _radii(structure, atoms).tolist())
        areas[label] = result.totalArea()
    return float(areas["a"] + areas["b"] - areas["ab"])


def interface_features(path: str | PathLike | Structure, chains_a: Sequence[str], chains_b: Sequence[str], *,
                       with_sasa: bool = True) -> dict[str, float]:
    """The interface descriptors (module notes) of partners ``chains_a`` and ``chains_b`` of one file.

    Returns:
        ``{'interface_residues', 'contacts', <CONTACT_FEATURES>, 'buried_sasa' (Å², with_sasa only)}``.

    Raises:
        LigandNotFoundError: a chain is missing. EmptySelectionError: no heavy atoms within 8 Å across.
    """
    structure = path if isinstance(path, Structure) else read_structure(path)
    mask_a, mask_b = partner_masks(structure, chains_a, chains_b)
    coords_a, residues_a = _heavy_atoms(structure, mask_a)
    coords_b, residues_b = _heavy_atoms(structure, mask_b)
    tree_a, tree_b = cKDTree(coords_a), cKDTree(coords_b)
    near = tree_a.query_ball_tree(tree_b, INTERFACE_DISTANCE)
    near_a = {residues_a[i] for i, hits in enumerate(near) if hits}
    near_b = {residues_b[j] for hits in near for j in hits}
    if not near_a:
        raise EmptySelectionError(f"no interface: no heavy atom of {','.join(chains_a)} within "
                                  f"{INTERFACE_DISTANCE:g} Å of {','.join(chains_b)}", source=structure.source)
    pairs = tree_a.query_ball_tree(tree_b, CONTACT_DISTANCE)
    contacts = {(residues_a[i], residues_b[j]) for i, hits in enumerate(pairs) for j in hits}
    features = {"interface_residues": float(len(near_a) + len(near_b)), "contacts": float(len(contacts)),
                **{name: 0.0 for name in CONTACT_FEATURES}}
    order = {name: k for k, name in enumerate(RESIDUE_CLASSES)}
    for ra, rb in contacts:
        ends = sorted((_residue_class(structure.resnames[ra]), _residue_class(structure.resnames[rb])), key=order.get)
        features[f"contacts_{ends[0]}_{ends[1]}"] += 1.0
    if with_sasa:
        features["buried_sasa"] = buried_sasa(structure, mask_a, mask_b)
    return features
