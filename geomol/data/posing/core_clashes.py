"""The core held on the reference meets the receptor: relax it a little, or say why the pose is refused.

A pose from SMILES keeps its common core's heavy atoms where the reference ligand has them
(:mod:`geomol.data.posing.poses`), so a reference that is itself too close to the receptor passes its
contact on to every analogue. Three cases, by the reference core atom's distance ``d`` to the nearest
receptor heavy atom and :attr:`~geomol.data.posing.refinement.RefinementParameters.max_core_shift` ``s``:

* ``d`` ≥ 2.2 Å (``CLOSE_CONTACT_DISTANCE``): nothing to do here; refinement with the core fixed
  clears the rest of the ligand;
* a contact under 2.2 Å that the core-fixed refinement leaves (in practice a core atom the reference puts
  1.5–2.2 Å from the receptor): :func:`relax_core` relaxes the pose once more with the core restrained
  within ``s`` of the reference's atoms, and :class:`CoreRelaxation` tells the chemist by how much;
* ``d`` under 1.5 Å (``CLASH_DISTANCE``) and ``d + s`` under 2.2 Å: no pose within ``s`` of the
  reference can be clean, and the ligand is refused at once (:func:`reference_core_clash`, a
  :class:`~geomol.errors.PoseClashError`); :func:`clash_reason` words the refusal of a pose that still
  clashes after both stages.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
from rdkit import Chem

from geomol.data.chemistry.checks import CLASH_DISTANCE, CLOSE_CONTACT_DISTANCE, OVERLAP_DISTANCE, atom_label
from geomol.data.posing.refinement import Pocket, PoseContacts, RefinementParameters, pose_contacts, refine_in_pocket

__all__ = ["CoreRelaxation", "relax_core", "clash_reason", "reference_core_clash"]


@dataclass(frozen=True)
class CoreRelaxation:
    """What :func:`relax_core` did to a pose: the contact it cleared and how far the core moved (Å).

    Attributes:
        ligand_atom, receptor_atom: the closest receptor contact of the pose with its core fixed, in words
            (``'C29'``, ``'LEU 377 O (chain A)'``), and ``distance`` between them.
        reference_distance: the reference's own atom to that receptor atom (NaN: the ligand atom is not in the core).
        max_shift: largest displacement of a core heavy atom from the reference's atom.
        rms_shift: RMS of those displacements (the core RMSD to the reference, in place).
        after: the closest ligand–receptor non-metal heavy-atom pair after the relaxation.
    """

    ligand_atom: str
    receptor_atom: str
    distance: float
    reference_distance: float
    max_shift: float
    rms_shift: float
    after: float

    def message(self) -> str:
        """For the chemist who reads the pose (``core_relaxed`` warning, SD data item)."""
        if math.isfinite(self.reference_distance):
            cause = (f"the reference pose is {self.reference_distance:.2f} Å from {self.receptor_atom} (its core atom "
                     f"where this ligand has {self.ligand_atom})")
        else:
            cause = (f"with the core held on the reference, {self.ligand_atom} is {self.distance:.2f} Å from "
                     f"{self.receptor_atom}")
        return (f"{cause}; core relaxed by up to {self.max_shift:.2f} Å (RMS {self.rms_shift:.2f} Å) from the "
                f"reference's atoms; closest receptor non-metal heavy atom now {self.after:.2f} Å")


def relax_core(pose: Chem.Mol, contacts: PoseContacts, held: dict[int, np.ndarray], pocket: Pocket | None,
               parameters: RefinementParameters) -> tuple[Chem.Mol, PoseContacts, CoreRelaxation | None]:
    """The refined pose relaxed once more with its core restrained instead of fixed, when a receptor contact is left.

    A pose whose refinement with the core fixed is clear of the receptor is returned as it is (the same
    object). Otherwise the core's heavy atoms are restrained within ``parameters.max_core_shift`` of
    the reference's atoms and get walls like the other atoms; the relaxed pose is kept
    when it ranks better (:meth:`PoseContacts.rank`), else the pose with the fixed core.

    Args:
        pose: the refined pose (hydrogens, one conformer, Å) and ``contacts`` its :class:`PoseContacts`.
        held: position (Å) of the reference's atom for each core heavy atom of the ligand.

    Returns:
        (the pose kept, its contacts, a :class:`CoreRelaxation` when the core was relaxed, else None).
    """
    if pocket is None or not held or contacts.receptor_clear or parameters.max_core_shift <= 0:
        return pose, contacts, None
    core = sorted(held)
    on_reference = Chem.Mol(pose)  # the restraints are centred on the reference's atoms, not on the aligned core
    for i in core:
        on_reference.GetConformer().SetAtomPosition(i, held[i].tolist())
    relaxed = refine_in_pocket(on_reference, (), pocket, replace(parameters, iterations=parameters.relax_iterations),
                               restrained_atoms=core)
    after = pose_contacts(relaxed, pocket)
    if after.rank() >= contacts.rank():
        return pose, contacts, None
    shifts = np.linalg.norm(relaxed.GetConformer().GetPositions()[core] - np.array([held[i] for i in core]), axis=1)
    if contacts.receptor_distance >= CLASH_DISTANCE:  # the contact left is a close one with a non-metal
        (i, k), distance = contacts.non_metal_atoms, contacts.non_metal_distance
    else:
        i, k, distance = contacts.ligand_atom, contacts.receptor_atom, contacts.receptor_distance
    at_reference = float(np.linalg.norm(held[i] - pocket.coords[k])) if i in held else math.nan
    return relaxed, after, CoreRelaxation(atom_label(pose, i), pocket.label(k), distance, at_reference,
                                          float(shifts.max()), float(np.sqrt(np.mean(shifts ** 2))),
                                          after.non_metal_distance)


def clash_reason(pose: Chem.Mol, contacts: PoseContacts, pocket: Pocket | None, tried: int,
                 held: dict[int, np.ndarray], max_core_shift: float = 0.0) -> str:
    """Why the best refined pose is still refused, naming the atoms (for :class:`~geomol.errors.PoseClashError`).

    Args:
        held: position (Å) of each atom held on the reference (the core), to say whether the
            reference's own atom is already that close to the receptor.
        max_core_shift: Å, how far :func:`relax_core` let the core move (0: it was held exactly).
    """
    if contacts.receptor_distance < CLASH_DISTANCE and pocket is not None:
        i, k = contacts.ligand_atom, contacts.receptor_atom
        reason = (f"ligand atom {atom_label(pose, i)} is {contacts.receptor_distance:.2f} Å from {pocket.label(k)} (under "
                  f"{CLASH_DISTANCE} Å)")
        if i in held:
            at_reference = float(np.linalg.norm(held[i] - pocket.coords[k]))
            within = f" (relaxing the core by up to {max_core_shift} Å did not clear it)" if max_core_shift else ""
            reason += (f"; it is a core atom, held where the reference has its atom{within}, which is itself "
                       f"{at_reference:.2f} Å from it: the reference pose clashes with this receptor structure")
    else:
        i, j = contacts.overlap_atoms
        reason = (f"ligand atoms {atom_label(pose, i)} and {atom_label(pose, j)} are {contacts.overlap_distance:.2f} Å apart without a bond "
                  f"(overlapping atoms, under {OVERLAP_DISTANCE} Å)")
    return f"every pose tried ({tried}, each refined in the pocket) still clashes: {reason}"


def reference_core_clash(pocket: Pocket, reference: Chem.Mol, core: Sequence[int],
                         max_core_shift: float = 0.0) -> str | None:
    """Why no pose held on this core can be accepted, when a core atom of the reference itself clashes; else None.

    The core is held where the reference has it, within ``max_core_shift`` (Å, :func:`relax_core`), so a
    reference core atom under ``CLASH_DISTANCE`` from a receptor heavy atom that cannot reach
    ``CLOSE_CONTACT_DISTANCE`` within that shift stays in clash whatever the refinement does: the ligand
    is refused at once, naming the atom, rather than after every pose has been tried.

    Args:
        reference: the reference ligand (heavy atoms, with its conformer, Å).
        core: the reference's atoms in the common core.
    """
    distances, nearest = pocket.tree.query(reference.GetConformer().GetPositions()[list(core)])
    k = int(np.argmin(distances))
    if distances[k] >= CLASH_DISTANCE or distances[k] + max_core_shift >= CLOSE_CONTACT_DISTANCE:
        return None
    atom = core[k]
    held = (f"held where the reference has it (within {max_core_shift} Å, too little to reach "
            f"{CLOSE_CONTACT_DISTANCE} Å)" if max_core_shift else "held where the reference has it")
    return (f"the reference ligand's core atom {atom_label(reference, atom)} is "
            f"{distances[k]:.2f} Å from {pocket.label(int(nearest[k]))} (under {CLASH_DISTANCE} Å), and the core is "
            f"{held}: the reference pose clashes with this receptor structure. Minimise the reference in the "
            "receptor, or choose another reference")
