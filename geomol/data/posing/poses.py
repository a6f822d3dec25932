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
4. every conformer is superposed on the reference core (core RMSD), and scored by
   ``clash overlap + core_rmsd_weight * core RMSD`` (+ the distance of its non-core atoms from the
   reference's), where the clash overlap is the sum over ligand–receptor heavy-atom pairs closer than
   ``clash_distance`` of the shortfall (Å);
5. the best-scored conformers get their hydrogens and are refined in the pocket one after the other
   (:mod:`geomol.data.posing.refinement`: MMFF94 with the receptor's atoms as fixed walls, the core's
   heavy atoms held on the reference) until one has no clash (no ligand–receptor heavy-atom pair under
   2.2 Å) and no overlapping atoms; when none of them is, a second set of conformers is embedded with
   another seed and refined the same way. The pose kept is the first clean one, else the one with the
   most room; if that one still has a receptor contact under 2.2 Å (the reference's own core atom is
   that close), it is relaxed once more with its core restrained within 0.7 Å of the reference
   (:mod:`geomol.data.posing.core_clashes`; :attr:`PosedLigand.core_relaxation` says by how much). A
   ligand whose pose still has a heavy atom under 1.5 Å from the receptor (or overlapping atoms)
   raises :class:`~geomol.errors.PoseClashError` rather than being scored.
   ``PoseParameters(refinement=None)`` (``--no-refine``) keeps the best-scored conformer as embedded.

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
from dataclasses import asdict, dataclass, field
from os import PathLike
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdFMCS, rdMolAlign
from scipy.spatial import cKDTree

from geomol.data.posing.common_core import find_mcs, rascal_seed
from geomol.data.posing.embedding import add_mirror_image, embed_on_core, rdkit_seed, without_stereocentres
from geomol.data.posing.core_clashes import CoreRelaxation, clash_reason, reference_core_clash, relax_core
from geomol.data.posing.refinement import Pocket, RefinementParameters, best_refined
from geomol.data.io._source import rdkit_messages, rdkit_reason
from geomol.data.io.structure import Structure
from geomol.errors import (ConfigError, EmbeddingError, InvalidSmilesError, NoCommonCoreError, PoseClashError,
                           PoseError)

__all__ = ["POSE_COLUMNS", "PoseParameters", "PosedLigand", "PoseTemplate", "write_poses", "SMALL_CORE_FRACTION"]

MCS_SEEDS = ("rascal", "none")
"""How the common-core search may be seeded (:attr:`PoseParameters.mcs_seed`)."""
SMALL_CORE_FRACTION = 0.4
"""A common core under this share of the larger molecule is posed with a ``small_core`` warning."""

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
        min_core_fraction: smallest share of a usable common core in the larger of the two molecules (its heavy
            atoms over the ligand's or the reference's, whichever has more): 0 takes any core of
            ``min_core_atoms``; 0.5 refuses a ligand that shares less than half of itself, or of the reference,
            with the reference (a drug of another series matched on a benzene ring). Cores under
            :data:`SMALL_CORE_FRACTION` are posed with a ``small_core`` warning.
        max_mappings: most distinct core mappings tried per ligand.
        embed_hydrogens: embed with explicit hydrogens (slower); by default the heavy atoms are
            embedded and hydrogens placed afterwards.
        embed_attempts: embedding attempts per conformer before the core map is relaxed (see
            :func:`~geomol.data.posing.embedding.embed_on_core`); 0 gives every try RDKit's default (10 × the atom count).
        clash_distance: Å; ligand–receptor heavy-atom pairs closer than this count as clashes.
        core_rmsd_weight: weight of the core RMSD (Å) against the clash overlap (Å) in the pose score.
        reference_weight: weight of the distance (Å, capped at ``reference_cap``) from each ligand
            heavy atom outside the core to the nearest reference heavy atom: analogues tend to put
            their substituents where the reference has atoms.
        reference_cap: Å; atoms farther than this from the reference all count the same.
        refinement: how poses are refined in the pocket (:class:`~geomol.data.posing.refinement.RefinementParameters`,
            or a dict of its fields); None keeps the best-scored conformer as embedded. :meth:`to_dict` leaves
            it out when None, and :meth:`from_dict` reads a record without it as unrefined (records written
            before refinement existed, such as the corpus store's cache keys, keep their meaning).
    """

    conformers: int = 8
    seed: int = 0
    mcs_timeout: float = 2.0
    mcs_seed: str = "rascal"
    min_core_atoms: int = 5
    min_core_fraction: float = 0.0
    max_mappings: int = 4
    embed_hydrogens: bool = False
    embed_attempts: int = 20
    clash_distance: float = 2.5
    core_rmsd_weight: float = 1.0
    reference_weight: float = 1.0
    reference_cap: float = 2.0
    refinement: RefinementParameters | None = field(default_factory=RefinementParameters)

    def __post_init__(self):
        if isinstance(self.refinement, dict):
            object.__setattr__(self, "refinement", RefinementParameters(**self.refinement))
        if self.conformers < 1 or self.max_mappings < 1 or self.min_core_atoms < 1 or self.embed_attempts < 0:
            raise ConfigError("conformers, max_mappings and min_core_atoms must be ≥ 1, embed_attempts ≥ 0")
        if not (self.mcs_timeout > 0 and min(self.clash_distance, self.core_rmsd_weight, self.reference_weight,
                                             self.reference_cap) >= 0):
            raise ConfigError("mcs_timeout must be > 0; distances and weights ≥ 0")
        if self.mcs_seed not in MCS_SEEDS:
            raise ConfigError(f"mcs_seed must be one of {MCS_SEEDS}, not {self.mcs_seed!r}")
        if not 0 <= self.min_core_fraction <= 1:
            raise ConfigError(f"min_core_fraction must be between 0 and 1, not {self.min_core_fraction}")

    def to_dict(self) -> dict:
        out = asdict(self)
        if self.refinement is None:
            del out["refinement"]
        if not self.min_core_fraction:  # records written before it existed (cache keys, fingerprints) keep meaning
            del out["min_core_fraction"]
        return out

    @classmethod
    def from_dict(cls, record: dict) -> "PoseParameters":
        """The parameters of a :meth:`to_dict` record; without ``'refinement'``, unrefined."""
        return cls(**{"refinement": None, **record})


class _Candidate(NamedTuple):
    """One embedded conformer and its score (lower is better)."""

    score: float
    conf_id: int
    mapping: list[tuple[int, int]]  # (ligand atom, reference atom) of the core
    core_rmsd: float  # Å


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
        core_relaxation: how far the core was moved off the reference to clear a receptor contact that the
            reference pose itself has (:class:`~geomol.data.posing.core_clashes.CoreRelaxation`, also the SD
            data item ``core_relaxed``); None when the core was held on the reference.
        core_share: the core's heavy atoms over those of the larger of the ligand and the reference (NaN when
            not posed). small_core: below :data:`SMALL_CORE_FRACTION`, why the pose is a guess ('' otherwise).
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
    core_relaxation: CoreRelaxation | None = None
    core_share: float = math.nan
    small_core: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    def report(self) -> dict:
        """The :data:`POSE_COLUMNS` of this ligand."""
        return {c: getattr(self, c) for c in POSE_COLUMNS}


def _core_share(core_atoms: int, ligand: Chem.Mol, reference: Chem.Mol) -> float:
    """The core's heavy atoms over those of the larger of the two molecules."""
    return core_atoms / max(ligand.GetNumHeavyAtoms(), reference.GetNumHeavyAtoms(), 1)


def _core_words(core_atoms: int, ligand: Chem.Mol, reference: Chem.Mol) -> str:
    return (f"the common core with the reference is {core_atoms} heavy atoms, "
            f"{_core_share(core_atoms, ligand, reference):.0%} of the larger molecule (the ligand has "
            f"{ligand.GetNumHeavyAtoms()}, the reference {reference.GetNumHeavyAtoms()})")


def _parse_smiles(smiles: str, source: str) -> Chem.Mol:
    with rdkit_messages() as messages:
        mol = Chem.MolFromSmiles(smiles) if smiles and smiles.strip() else None
    if mol is None:
        reason = rdkit_reason(messages, "empty or unparseable") if smiles and smiles.strip() else "empty SMILES"
        raise InvalidSmilesError(f"invalid SMILES {smiles!r}: {reason}", source=source)
    if mol.GetNumHeavyAtoms() == 0:
        raise InvalidSmilesError(f"SMILES {smiles!r} has no heavy atoms", source=source)
    return mol


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
        pocket = None if receptor is None else Pocket(receptor)
        self._pocket = pocket if pocket is not None and len(pocket) else None

    # ------------------------------------------------------------------ public
    def pose(self, smiles: str, name: str = "", source: str = "") -> PosedLigand:
        """Pose one SMILES; raises a :class:`~geomol.errors.PoseError` subclass when it cannot."""
        source = source or (f"ligand {name!r}" if name else f"SMILES {smiles!r}")
        ligand = _parse_smiles(smiles, source)
        if self.parameters.embed_hydrogens:
            ligand = Chem.AddHs(ligand)
        reference_match, ligand_matches = self._common_core(ligand, source)
        if self.parameters.refinement is not None and self._pocket is not None:
            reason = reference_core_clash(self._pocket, self.reference, reference_match,
                                          self.parameters.refinement.max_core_shift)
            if reason:
                raise PoseClashError(reason, source=source)
        mappings = [list(zip(match, reference_match)) for match in self._distinct_mappings(ligand, ligand_matches)]
        candidates = self._candidates(ligand, mappings, self.parameters.conformers, first_seed=0)
        if not candidates:
            raise EmbeddingError(f"no conformer could be embedded on the {len(reference_match)}-atom core "
                                 "(a stereocentre that cannot match the reference core?)", source=source)
        relaxation = None
        if self.parameters.refinement is None:
            chosen = min(candidates, key=lambda c: c.score)
            pose = self._with_hydrogens(ligand, chosen.conf_id)
        else:
            chosen, pose, relaxation = self._refined(ligand, mappings, candidates, source)
        pose.SetProp("_Name", name or smiles)
        pose.SetProp("smiles", smiles)
        nearest, close = self._receptor_contacts(pose.GetConformer().GetPositions()[_heavy_atoms(pose)])
        report = PosedLigand(name, smiles, source, pose, len(reference_match), chosen.core_rmsd,
                             float(nearest.min()) if nearest.size else math.nan, int(close.size),
                             core_share=_core_share(len(reference_match), ligand, self.reference))
        if report.core_share < SMALL_CORE_FRACTION:
            report.small_core = (f"{_core_words(len(reference_match), ligand, self.reference)}: the pose outside "
                                 "it, and the prediction, rest on little shared structure (a minimum core share "
                                 "refuses such ligands: --min-core-fraction)")
        for column, value in report.report().items():
            pose.SetProp(column, f"{value:.4g}" if isinstance(value, float) else str(value))
        if relaxation is not None:
            report.core_relaxation = relaxation
            pose.SetProp("core_relaxed", relaxation.message())
        return report

    def pose_all(self, ligands: Iterable[tuple[str, str] | tuple[str, str, str]],
                 progress: Callable[[int], None] | None = None) -> list[PosedLigand]:
        """Pose ``(name, smiles)`` or ``(name, smiles, source)`` items; a failure is recorded, not raised.
        ``progress`` is called with the ligands done so far after each one."""
        results = []
        for item in ligands:
            if progress is not None and results:
                progress(len(results))
            name, smiles = item[0], item[1]
            source = item[2] if len(item) > 2 else ""
            try:
                results.append(self.pose(smiles, name, source))
            except PoseError as exc:
                results.append(PosedLigand(name, smiles, source or f"ligand {name!r}", error=str(exc),
                                           error_kind=type(exc).__name__))
        if progress is not None:
            progress(len(results))
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
        if _core_share(result.numAtoms, heavy, self.reference) < p.min_core_fraction:
            raise NoCommonCoreError(f"{_core_words(result.numAtoms, heavy, self.reference)} (at least "
                                    f"{p.min_core_fraction:.0%} asked)", source=source)
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

    def _candidates(self, ligand: Chem.Mol, mappings: list[list[tuple[int, int]]], conformers: int,
                    first_seed: int) -> list[_Candidate]:
        """About ``conformers`` scored conformers (and mirror images), spread over the core mappings."""
        per_mapping = max(1, -(-conformers // len(mappings)))
        mirrors = without_stereocentres(ligand)
        candidates = []
        for k, mapping in enumerate(mappings):
            conf_ids = embed_on_core(ligand, mapping, self._reference_xyz, per_mapping,
                                     rdkit_seed(self.parameters.seed, first_seed + k), self.parameters.embed_attempts)
            if mirrors:
                conf_ids += [add_mirror_image(ligand, conf_id) for conf_id in conf_ids]
            candidates += [self._scored(ligand, conf_id, mapping) for conf_id in conf_ids]
        return candidates

    def _with_hydrogens(self, ligand: Chem.Mol, conf_id: int) -> Chem.Mol:
        pose = Chem.Mol(ligand, confId=conf_id)
        return pose if self.parameters.embed_hydrogens else Chem.AddHs(pose, addCoords=True)

    def _refined(self, ligand: Chem.Mol, mappings: list[list[tuple[int, int]]], candidates: list[_Candidate],
                 source: str) -> tuple[_Candidate, Chem.Mol, CoreRelaxation | None]:
        """The chosen candidate, its pose refined in the pocket and how its core was relaxed (module notes, step 5).

        Raises:
            PoseClashError: every refined pose keeps a heavy atom under 1.5 Å from the receptor, or
                overlapping atoms.
        """
        refinement = self.parameters.refinement

        def attempts() -> Iterator[tuple[_Candidate, Chem.Mol, list[int]]]:
            batch = candidates
            for retry in (False, True):
                if retry:  # seeds beyond the first batch's, one per mapping
                    batch = self._candidates(ligand, mappings, refinement.retry_conformers,
                                             first_seed=self.parameters.max_mappings)
                for candidate in sorted(batch, key=lambda c: c.score)[:refinement.candidates]:
                    held = [atom for atom, _ in candidate.mapping]
                    yield candidate, self._with_hydrogens(ligand, candidate.conf_id), held
                if not refinement.retry_conformers:
                    return

        chosen, pose, contacts, tried = best_refined(attempts(), self._pocket, refinement)
        held = {atom: self._reference_xyz[r] for atom, r in chosen.mapping}
        pose, contacts, relaxation = relax_core(pose, contacts, held, self._pocket, refinement)
        if not contacts.acceptable:
            raise PoseClashError(clash_reason(pose, contacts, self._pocket, tried, held, refinement.max_core_shift),
                                 source=source)
        return chosen, pose, relaxation

    def _receptor_contacts(self, heavy_xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """([n] distance from each of n heavy-atom positions to the nearest receptor heavy atom, distances of the
        atom pairs closer than ``clash_distance``), Å; both empty without a receptor."""
        if self._pocket is None:
            return np.empty(0), np.empty(0)
        nearest, _ = self._pocket.tree.query(heavy_xyz)
        close, _ = self._pocket.tree.query(heavy_xyz, k=16, distance_upper_bound=self.parameters.clash_distance)
        return nearest, close[np.isfinite(close)]

    def _scored(self, ligand: Chem.Mol, conf_id: int, mapping: list[tuple[int, int]]) -> _Candidate:
        p = self.parameters
        core_rmsd = rdMolAlign.AlignMol(ligand, self.reference, prbCid=conf_id, atomMap=mapping)
        xyz = ligand.GetConformer(conf_id).GetPositions()
        core = {l for l, _ in mapping}
        heavy = _heavy_atoms(ligand)
        outside = [i for i in heavy if i not in core]
        score = p.core_rmsd_weight * core_rmsd
        if outside and p.reference_weight:
            to_reference, _ = self._reference_tree.query(xyz[outside])
            score += p.reference_weight * float(np.minimum(to_reference, p.reference_cap).sum())
        _, close = self._receptor_contacts(xyz[heavy])
        score += float((p.clash_distance - close).sum())
        return _Candidate(score, conf_id, mapping, core_rmsd)


def _heavy_atoms(mol: Chem.Mol) -> list[int]:
    return [a.GetIdx() for a in mol.GetAtoms() if a.GetAtomicNum() > 1]


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
