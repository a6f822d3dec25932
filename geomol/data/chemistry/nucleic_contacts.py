"""Contact features of a ligand atom against a nucleic-acid receptor: base edges, 2'-OH, phosphates, stacking, ions.

Appended to the contact rows by ``ContactRecipe(nucleic=True)``
(:func:`~geomol.data.chemistry.contact_features.graph_pose_contacts`), from the receptor atoms' nucleic roles
(:func:`~geomol.data.chemistry.nucleic_roles.nucleic_atom_roles`) and the ligand atom's interaction roles
(:data:`~geomol.data.chemistry.atom_roles.LIGAND_CHEMISTRY`). Sums over the receptor heavy atoms within the
recipe's cutoff, with the pair's distance d and surface distance s (d minus the two van der Waals radii), Å:

* ``phosphate_cation``: a ligand cation near a phosphate oxygen, Σ clip((5 − d)/1.5, 0, 1) (the backbone's
  charge draws aminoglycosides and other polycations);
* ``phosphate_hbond``: a ligand donor on a phosphate oxygen, Σ clip(−s/0.7, 0, 1);
* ``ribose_2oh_hbond``: a ligand donor or acceptor on a 2'-OH (which both donates and accepts), same term;
* ``watson_crick_hbond``, ``hoogsteen_hbond``, ``sugar_edge_hbond``: a hydrogen bond of matching direction
  (ligand donor on a receptor acceptor, or ligand acceptor from a receptor donor) with a polar atom of that
  edge of a base, same term (the specific recognition of riboswitch and aptamer pockets);
* ``base_stacking``: a ligand aromatic atom over a base ring atom, along the base's normal:
  Σ clip(4.5 − d, 0, 1) · clip((|cos θ| − 0.5)/0.4, 0, 1), θ the angle between the pair's vector and the normal
  (intercalators and planar ligands stack on base faces);
* ``base_contacts``: any ligand atom within 4.5 Å of a base ring atom, Σ clip(4.5 − d, 0, 1);
* ``backbone_contacts``: any ligand atom within 4.5 Å of a sugar or phosphate atom, same term (groove binding);
* ``metal_near``: any ligand atom near a metal ion, Σ clip((4.5 − d)/1.0, 0, 1) (inner-sphere and
  water-bridged coordination, which ``metal`` of the role columns counts only for acceptors at ≤ 3.2 Å).
"""
from __future__ import annotations

import numpy as np

from geomol.data.chemistry.atom_roles import LIGAND_CHEMISTRY, RECEPTOR_ROLES
from geomol.data.chemistry.nucleic_roles import METALS, NUCLEIC_ATOM_ROLES

__all__ = ["NUCLEIC_CONTACT_FEATURES", "nucleic_contact_features"]

NUCLEIC_CONTACT_FEATURES = ("phosphate_cation", "phosphate_hbond", "ribose_2oh_hbond", "watson_crick_hbond",
                            "hoogsteen_hbond", "sugar_edge_hbond", "base_stacking", "base_contacts",
                            "backbone_contacts", "metal_near")
_ROLE = {name: k for k, name in enumerate(RECEPTOR_ROLES)}
_NUCLEIC = {name: len(RECEPTOR_ROLES) + k for k, name in enumerate(NUCLEIC_ATOM_ROLES)}
_LIGAND = {name: k for k, name in enumerate(LIGAND_CHEMISTRY)}


def nucleic_contact_features(receptor_roles: np.ndarray, normals: np.ndarray, nucleotide: np.ndarray,
                             receptor_z: np.ndarray, receptor_xyz: np.ndarray, ligand_chemistry: np.ndarray,
                             ligand_xyz: np.ndarray, pairs: tuple, surface: np.ndarray) -> np.ndarray:
    """:data:`NUCLEIC_CONTACT_FEATURES` of every ligand atom.

    Args:
        receptor_roles: ``(R, len(RECEPTOR_ROLES) + len(NUCLEIC_ATOM_ROLES))`` bool, the receptor roles then the
            nucleic roles of each receptor heavy atom (:func:`~geomol.data.chemistry.nucleic_roles.nucleic_atom_roles`);
        normals: ``(R, 3)`` base-plane normals (zeros off the base rings);
        nucleotide: ``(R,)`` bool, the atoms of nucleotide blocks;
        receptor_z: ``(R,)`` atomic numbers; receptor_xyz: ``(R, 3)`` Å;
        ligand_chemistry: ``(L, len(LIGAND_CHEMISTRY))``; ligand_xyz: ``(L, 3)`` Å;
        pairs: ``(i, j, d)`` ligand atom, receptor atom and distance (Å) of every pair within the cutoff;
        surface: ``(P,)`` the pairs' surface distances (Å).

    Returns:
        ``(L, len(NUCLEIC_CONTACT_FEATURES))`` float64.
    """
    out = np.zeros((len(ligand_xyz), len(NUCLEIC_CONTACT_FEATURES)))
    i, j, d = pairs
    if len(i) == 0:
        return out
    roles = np.asarray(receptor_roles, dtype=bool)[j]
    chem = np.asarray(ligand_chemistry)[i] > 0
    donor, acceptor = chem[:, _LIGAND["donor"]], chem[:, _LIGAND["acceptor"]]
    hbond = np.clip(-surface / 0.7, 0.0, 1.0)
    matched = (donor & roles[:, _ROLE["acceptor"]]) | (acceptor & roles[:, _ROLE["donor"]])
    phosphate, base_ring = roles[:, _NUCLEIC["phosphate"]], roles[:, _NUCLEIC["base_ring"]]
    near = np.clip(4.5 - d, 0.0, 1.0)
    vector = ligand_xyz[i] - receptor_xyz[j]
    cosine = np.abs(np.einsum("ij,ij->i", vector, normals[j])) / np.maximum(d, 1e-6)
    backbone = np.asarray(nucleotide)[j] & ~base_ring & ~np.isin(receptor_z[j], (7,)) & ~(
        roles[:, _NUCLEIC["watson_crick"]] | roles[:, _NUCLEIC["hoogsteen"]])
    terms = (
        np.where(chem[:, _LIGAND["cation"]] & phosphate, np.clip((5.0 - d) / 1.5, 0.0, 1.0), 0.0),
        np.where(donor & phosphate, hbond, 0.0),
        np.where((donor | acceptor) & roles[:, _NUCLEIC["ribose_2oh"]], hbond, 0.0),
        *(np.where(matched & roles[:, _NUCLEIC[edge]], hbond, 0.0) for edge in ("watson_crick", "hoogsteen",
                                                                                  "sugar_edge")),
        np.where(chem[:, _LIGAND["aromatic"]] & base_ring, near * np.clip((cosine - 0.5) / 0.4, 0.0, 1.0), 0.0),
        np.where(base_ring, near, 0.0),
        np.where(backbone, near, 0.0),
        np.where(np.isin(receptor_z[j], list(METALS)), np.clip(4.5 - d, 0.0, 1.0), 0.0),
    )
    for k, term in enumerate(terms):
        out[:, k] = np.bincount(i, weights=term, minlength=len(ligand_xyz))
    return out
