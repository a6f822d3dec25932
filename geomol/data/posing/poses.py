"""Ligand poses from SMILES on a reference ligand: maximum common substructure, then constrained ETKDG.

Medicinal chemists have one co-crystallised ligand and a series of analogues as SMILES. Each
analogue is posed like this (:class:`PoseTemplate`):

1. its maximum common substructure (MCS) with the reference is found by RDKit's ``rdFMCS`` with
   ring-aware matching (ring bonds only match ring bonds, and only complete rings), elements
   compared exactly, bond orders compared, under a timeout. The search is seeded by RDKit's RASCAL
   maximum common edge subgraph (:mod:`geomol.data.posing.common_core`; milliseconds for a pair), so rdFMCS
   only grows that core instead of searching from scratch, which for many analogues of 30–40
   heavy atoms ran past the timeout with a far smaller core. When the search still runs out of
   time, it is repeated with any atom matching any atom, and the larger core is kept;
2. each *distinct* way to lay the ligand's core onto the reference's (a symmetric core such as a
   meta-substituted phenyl can be laid two ways) gets conformers embedded with ETKDG (v3) with the
   core atoms held at the reference coordinates (a coordinate map). The heavy atoms are embedded
   and the hydrogens placed on the chosen pose afterwards: 3–4× faster than embedding with
   explicit hydrogens and, on the FEP+ benchmark's expert poses, as accurate
   (``embed_hydrogens=True`` embeds them too);
3. for a ligand without stereocentres each conformer's mirror image joins the candidates
   (distance geometry cannot tell a non-planar core from its mirror image);
4. every conformer is superposed on the reference core (core RMSD), and the pose chosen is the one
   with the smallest ``clash overlap + core_rmsd_weight * core RMSD``, where the clash overlap is the
   sum over ligand–receptor heavy-atom pairs closer than ``clash_distance`` of the shortfall (Å).

Everything is seeded, so the same SMILES, reference, receptor and :class:`PoseParameters` give the
same pose. A ligand that cannot be posed raises a :class:`~geomol.errors.PoseError` subclass
(:class:`~geomol.errors.InvalidSmilesError`, :class:`~geomol.errors.NoCommonCoreError`,
:class:`~geomol.errors.EmbeddingError`); :meth:`PoseTemplate.pose_all` records it per ligand and
goes on with the others.

Posed molecules keep their hydrogens (with coordinates), like molecules read by
:func:`~geomol.data.io.read_ligand`; whether a graph keeps them is decided later by
:func:`~geomol.data.io.ligand_blocks`.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from os import PathLike
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdDistGeom, rdFMCS, rdMolAlign
from rdkit.Geometry import Point3D
from scipy.spatial import cKDTree

from geomol.data.posing.common_core import find_mcs, rascal_seed
from geomol.data.io._source import rdkit_messages, rdkit_reason
from geomol.data.io.structure import Structure
from geomol.errors import ConfigError, EmbeddingError, InvalidSmilesError, NoCommonCoreError, PoseError

__all__ = ["POSE_COLUMNS", "PoseParameters", "PosedLigand", "PoseTemplate", "write_poses"]

MCS_SEEDS = ("rascal", "none")
"""How the common-core search may be seeded (:attr:`PoseParameters.mcs_seed`)."""

POSE_COLUMNS = ("core_atoms", "core_rmsd", "min_receptor_distance", "clashes")
"""Per-ligand pose report columns (see :class:`PosedLigand`)."""


@dataclass(frozen=True)
class PoseParameters:
    """How ligands are posed on a reference (every default is written here, and only here).

    Attributes:
        conformers: ETKDG conformers per ligand, shared among its distinct core mappings.
        seed: random seed of the embedding (the same for every ligand: a pose does not depend on
            the order of the series).
        mcs_timeout: seconds allowed to the MCS search (the best core found so far is used after it).
        mcs_seed: ``'rascal'`` seeds the rdFMCS search with RDKit's RASCAL common edge subgraph
            (fast, and finds larger cores); ``'none'`` runs rdFMCS alone.
        min_core_atoms: fewest heavy atoms of a usable common core.
        max_mappings: most distinct core mappings tried per ligand.
        embed_hydrogens: embed with explicit hydrogens (slower); by default the heavy atoms are
            embedded and hydrogens placed afterwards.
        embed_attempts: embedding attempts per conformer before the core map is relaxed (see
            :meth:`PoseTemplate._embed`); 0 gives every try RDKit's default (10 × the atom count).
        clash_distance: Å; ligand–receptor heavy-atom pairs closer than this count as clashes.
        core_rmsd_weight: weight of the core RMSD (Å) against the clash overlap (Å) in the pose score.
        reference_weight: weight of the distance (Å, capped at ``reference_cap``) from each ligand
            heavy atom outside the core to the nearest reference heavy atom: analogues tend to put
            their substituents where the reference has atoms.
        reference_cap: Å; atoms farther than this from the reference all count the same.
    """

    conformers: int = 8
    seed: int = 0
    mcs_timeout: float = 2.0
    mcs_seed: str = "rascal"
    min_core_atoms: int = 5
    max_mappings: int = 4
    embed_hydrogens: bool = False
    embed_attempts: int = 20
    clash_distance: float = 2.5
    core_rmsd_weight: float = 1.0
    reference_weight: float = 1.0
    reference_cap: float = 2.0

    def __post_init__(self):
        if self.conformers < 1 or self.max_mappings < 1 or self.min_core_atoms < 1 or self.embed_attempts < 0:
            raise ConfigError("conformers, max_mappings and min_core_atoms must be ≥ 1, embed_attempts ≥ 0")
        if not (self.mcs_timeout > 0 and min(self.clash_distance, self.core_rmsd_weight, self.reference_weight,
                                             self.reference_cap) >= 0):
            raise ConfigError("mcs_timeout must be > 0; distances and weights ≥ 0")
        if self.mcs_seed not in MCS_SEEDS:
            raise ConfigError(f"mcs_seed must be one of {MCS_SEEDS}, not {self.mcs_seed!r}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class PosedLigand:
    """One ligand posed from SMILES, or why it could not be.

    Attributes:
        name: the ligand's name (given, else ``#<index>``).
        smiles: the SMILES as given.
        source: where it came from (``'series.smi [line 3]'``), for messages.
        molecule: the pose: RDKit molecule with hydrogens and one conformer (Å); None on error.
        core_atoms: heavy atoms of the common core with the reference.
        core_rmsd: Å, RMSD of the posed core atoms from the reference's after superposition.
        min_receptor_distance: Å, shortest ligand–receptor heavy-atom distance (NaN without receptor).
        clashes: ligand–receptor heavy-atom pairs closer than the clash distance.
        (core_atoms and clashes are None, the distances NaN, for a ligand that could not be posed.)
        error: why the ligand could not be posed ('' when it was).
        error_kind: the :class:`~geomol.errors.PoseError` subclass that said so (``'NoCommonCoreError'``, ...).
    """

    name: str
    smiles: str
    source: str = ""
    molecule: Chem.Mol | None = None
    core_atoms: int | None = None
    core_rmsd: float = math.nan
    min_receptor_distance: float = math.nan
    clashes: int | None = None
    error: str = ""
    error_kind: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    def report(self) -> dict:
        """The :data:`POSE_COLUMNS` of this ligand."""
        return {c: getattr(self, c) for c in POSE_COLUMNS}


def _parse_smiles(smiles: str, source: str) -> Chem.Mol:
    with rdkit_messages() as messages:
        mol = Chem.MolFromSmiles(smiles) if smiles and smiles.strip() else None
    if mol is None:
        reason = rdkit_reason(messages, "empty or unparseable") if smiles and smiles.strip() else "empty SMILES"
        raise InvalidSmilesError(f"invalid SMILES {smiles!r}: {reason}", source=source)
    if mol.GetNumHeavyAtoms() == 0:
        raise InvalidSmilesError(f"SMILES {smiles!r} has no heavy atoms", source=source)
    return mol


def _rdkit_seed(seed: int, mapping: int) -> int:
    """A positive embedding seed per (user seed, core mapping).

    RDKit derives each conformer's seed from the given one multiplicatively, so seed 0 would embed
    the same conformer every time.
    """
    return ((seed + 1) * 7919 + mapping) % (2**31 - 1) or 1


def _heavy_reference(reference: Chem.Mol) -> Chem.Mol:
    """The reference without hydrogens, sanitised, with its conformer (Å)."""
    if reference is None or reference.GetNumConformers() == 0:
        raise PoseError("the reference ligand has no 3D coordinates", source="reference")
    name = reference.GetProp("_Name") if reference.HasProp("_Name") else ""
    try:
        with rdkit_messages():
            heavy = Chem.RemoveHs(reference)
    except Exception as exc:  # noqa: BLE001 - RDKit raises plain runtime errors for unsanitisable molecules
        raise PoseError(f"the reference ligand cannot be sanitised ({exc})", source=f"reference {name!r}") from exc
    return heavy


def _stereocentres(mol: Chem.Mol) -> set[int]:
    """Indices of the atoms with a specified tetrahedral configuration."""
    return {atom.GetIdx() for atom in mol.GetAtoms() if atom.GetChiralTag() != Chem.ChiralType.CHI_UNSPECIFIED}


def _without_stereocentres(mol: Chem.Mol) -> bool:
    """True when no atom has a specified tetrahedral configuration (so a mirror image is the same molecule)."""
    return not _stereocentres(mol)


def _add_mirror_image(mol: Chem.Mol, conf_id: int) -> int:
    """Add the mirror image (x → −x) of conformer ``conf_id`` to ``mol``; returns its id.

    Distance geometry cannot tell a non-planar core from its mirror image, so some conformers
    come out with the core reflected; for a molecule without stereocentres the reflected
    conformer is as valid a conformer, and the better of the two fits the reference core.
    """
    mirrored = Chem.Conformer(mol.GetConformer(conf_id))
    mirrored.SetPositions(mirrored.GetPositions() * np.array([-1.0, 1.0, 1.0]))
    return mol.AddConformer(mirrored, assignId=True)


class PoseTemplate:
    """A reference ligand pose and the receptor around it, prepared once for a series of SMILES.

    Args:
        reference: the reference ligand, an RDKit molecule with a 3D conformer (Å), hydrogens or not
            (e.g. from :func:`~geomol.data.io.read_ligand`).
        receptor: the receptor (a :class:`~geomol.data.io.Structure` or [M, 3] heavy-atom
            coordinates in Å) to score clashes against; None poses without a receptor.
        parameters: :class:`PoseParameters` (defaults when None).
    """

    def __init__(self, reference: Chem.Mol, receptor: Structure | np.ndarray | None = None,
                 parameters: PoseParameters | None = None):
        self.parameters = parameters or PoseParameters()
        self.reference = _heavy_reference(reference)
        self._reference_xyz = self.reference.GetConformer().GetPositions()
        self._reference_tree = cKDTree(self._reference_xyz)
        if isinstance(receptor, Structure):
            receptor = receptor.coords[receptor.is_heavy]
        self._receptor = None if receptor is None or len(receptor) == 0 else cKDTree(np.asarray(receptor, float))

    # ------------------------------------------------------------------ public
    def pose(self, smiles: str, name: str = "", source: str = "") -> PosedLigand:
        """Pose one SMILES; raises a :class:`~geomol.errors.PoseError` subclass when it cannot."""
        source = source or (f"ligand {name!r}" if name else f"SMILES {smiles!r}")
        ligand = _parse_smiles(smiles, source)
        if self.parameters.embed_hydrogens:
            ligand = Chem.AddHs(ligand)
        reference_match, ligand_matches = self._common_core(ligand, source)
        candidates = []
        mappings = self._distinct_mappings(ligand, ligand_matches)
        per_mapping = max(1, -(-self.parameters.conformers // len(mappings)))
        mirrors = _without_stereocentres(ligand)
        for k, ligand_match in enumerate(mappings):
            mapping = list(zip(ligand_match, reference_match))
            conf_ids = self._embed(ligand, mapping, per_mapping, _rdkit_seed(self.parameters.seed, k))
            if mirrors:
                conf_ids += [_add_mirror_image(ligand, conf_id) for conf_id in conf_ids]
            for conf_id in conf_ids:
                candidates.append(self._scored(ligand, conf_id, mapping))
        if not candidates:
            raise EmbeddingError(f"no conformer could be embedded on the {len(reference_match)}-atom core "
                                 "(a stereocentre that cannot match the reference core?)", source=source)
        _, conf_id, core_rmsd, distances, clashes = min(candidates, key=lambda c: c[0])
        pose = Chem.Mol(ligand, confId=conf_id)
        if not self.parameters.embed_hydrogens:
            pose = Chem.AddHs(pose, addCoords=True)
        pose.SetProp("_Name", name or smiles)
        pose.SetProp("smiles", smiles)
        report = PosedLigand(name, smiles, source, pose, len(reference_match), core_rmsd,
                             float(distances.min()) if distances.size else math.nan, clashes)
        for column, value in report.report().items():
            pose.SetProp(column, f"{value:.4g}" if isinstance(value, float) else str(value))
        return report

    def pose_all(self, ligands: Iterable[tuple[str, str] | tuple[str, str, str]]) -> list[PosedLigand]:
        """Pose ``(name, smiles)`` or ``(name, smiles, source)`` items; a failure is recorded, not raised."""
        results = []
        for item in ligands:
            name, smiles = item[0], item[1]
            source = item[2] if len(item) > 2 else ""
            try:
                results.append(self.pose(smiles, name, source))
            except PoseError as exc:
                results.append(PosedLigand(name, smiles, source or f"ligand {name!r}", error=str(exc),
                                           error_kind=type(exc).__name__))
        return results

    # ------------------------------------------------------------------ steps
    def _common_core(self, ligand: Chem.Mol, source: str) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
        """The common core's match in the reference and its matches in the ligand (as embedded).

        Elements are compared first. That search can run out of time when a ring changes one atom
        (pyridine → pyrimidine); then the core is searched again with any atom matching any atom
        (fast, and an aza-analogue's ring belongs where the parent's was) and the larger core is kept.
        """
        p = self.parameters
        heavy = Chem.RemoveHs(ligand)
        timeout = max(1, math.ceil(p.mcs_timeout))
        seed = rascal_seed(self.reference, heavy, timeout) if p.mcs_seed == "rascal" else ""
        result = find_mcs(self.reference, heavy, rdFMCS.AtomCompare.CompareElements, seed, timeout)
        if result.canceled:
            anything = find_mcs(self.reference, heavy, rdFMCS.AtomCompare.CompareAny, "", timeout)
            result = anything if anything.numAtoms > result.numAtoms else result
        if result.numAtoms < p.min_core_atoms:
            raise NoCommonCoreError(f"the common core with the reference has {result.numAtoms} heavy atoms "
                                    f"(at least {p.min_core_atoms} needed)", source=source)
        query = Chem.MolFromSmarts(result.smartsString)
        reference_match = self.reference.GetSubstructMatch(query)
        ligand_matches = ligand.GetSubstructMatches(query, uniquify=False, maxMatches=1000)
        if not reference_match or not ligand_matches:  # the MCS pattern matched both while it was searched
            raise NoCommonCoreError("the common core pattern does not match back", source=source)
        return reference_match, list(ligand_matches)

    def _distinct_mappings(self, ligand: Chem.Mol, matches: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
        """Matches that put different kinds of ligand atoms on the reference core atoms.

        Two matches that differ only by a symmetry of the ligand (a phenyl flipped onto itself with
        its substituents) give the same pose; they are recognised by the ligand atoms' symmetry
        classes (canonical ranks without tie breaking) in reference-core order.
        """
        ranks = list(Chem.CanonicalRankAtoms(ligand, breakTies=False))
        distinct: dict[tuple[int, ...], tuple[int, ...]] = {}
        for match in matches:
            distinct.setdefault(tuple(ranks[i] for i in match), match)
            if len(distinct) == self.parameters.max_mappings:
                break
        return list(distinct.values())

    def _embed(self, ligand: Chem.Mol, mapping: list[tuple[int, int]], count: int, seed: int) -> list[int]:
        """Conformer ids embedded with the core held at the reference coordinates.

        A stereocentre of the ligand in the core can contradict the reference geometry (the series
        has both enantiomers). RDKit would then try an impossible embedding hundreds of times per
        conformer, so the first try gets ``embed_attempts`` attempts; when it fails, the
        stereocentres and their neighbours are released from the coordinate map and embedding is
        tried again, and only if there is nothing to release (or that fails too) is the full map
        tried with RDKit's default number of attempts.
        """
        attempts = self.parameters.embed_attempts
        ids = self._embed_with_map(ligand, mapping, count, seed, attempts)
        if ids:
            return ids
        stereo = _stereocentres(ligand)
        released = stereo | {n.GetIdx() for i in stereo for n in ligand.GetAtomWithIdx(i).GetNeighbors()}
        kept = [(l, r) for l, r in mapping if l not in released]
        if released and len(mapping) > len(kept) >= 3:
            ids = self._embed_with_map(ligand, kept, count, seed, attempts)
        if not ids and attempts:
            ids = self._embed_with_map(ligand, mapping, count, seed, 0)
        return ids

    def _embed_with_map(self, ligand: Chem.Mol, mapping: list[tuple[int, int]], count: int, seed: int,
                        attempts: int) -> list[int]:
        params = rdDistGeom.ETKDGv3()
        params.randomSeed = seed
        params.maxIterations = attempts
        params.numThreads = 1
        params.clearConfs = False
        params.SetCoordMap({l: Point3D(*self._reference_xyz[r]) for l, r in mapping})
        with rdkit_messages():
            return list(rdDistGeom.EmbedMultipleConfs(ligand, count, params))

    def _scored(self, ligand: Chem.Mol, conf_id: int, mapping: list[tuple[int, int]]):
        """(score, conformer id, core RMSD Å, [n_heavy] nearest receptor distances Å, clashes)."""
        p = self.parameters
        core_rmsd = rdMolAlign.AlignMol(ligand, self.reference, prbCid=conf_id, atomMap=mapping)
        xyz = ligand.GetConformer(conf_id).GetPositions()
        core = {l for l, _ in mapping}
        heavy = [a.GetIdx() for a in ligand.GetAtoms() if a.GetAtomicNum() > 1]
        outside = [i for i in heavy if i not in core]
        score = p.core_rmsd_weight * core_rmsd
        if outside and p.reference_weight:
            to_reference, _ = self._reference_tree.query(xyz[outside])
            score += p.reference_weight * float(np.minimum(to_reference, p.reference_cap).sum())
        if self._receptor is None:
            return score, conf_id, core_rmsd, np.empty(0), 0
        nearest, _ = self._receptor.query(xyz[heavy])
        close, _ = self._receptor.query(xyz[heavy], k=16, distance_upper_bound=p.clash_distance)
        close = close[np.isfinite(close)]
        score += float((p.clash_distance - close).sum())
        return score, conf_id, core_rmsd, nearest, int(close.size)


def write_poses(path: str | PathLike, posed: Sequence[PosedLigand], *, hydrogens: bool = True) -> int:
    """Write the posed ligands (those without error) to an SD file, atomically; returns how many.

    Each record is titled with the ligand name and carries ``smiles`` and the :data:`POSE_COLUMNS`
    as SD data items, so that the poses can be inspected (and read back with
    :func:`~geomol.data.io.read_ligands`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    written = 0
    writer = Chem.SDWriter(str(tmp))
    try:
        for item in posed:
            if item.molecule is not None:
                writer.write(item.molecule if hydrogens else Chem.RemoveHs(item.molecule))
                written += 1
    finally:
        writer.close()
    os.replace(tmp, path)
    return written
