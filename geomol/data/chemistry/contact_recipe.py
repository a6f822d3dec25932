"""How a built complex becomes the contact scorer's input, as one typed, versioned, saved record.

:class:`ContactRecipe` sits beside :class:`~geomol.data.complexes.recipe.ComplexRecipe`: the complex recipe
builds the graph (pocket, hydrogens, fragments), the contact recipe reads the graph's ligand atoms and the
receptor atoms around them (:mod:`~geomol.data.chemistry.contact_features`). It owns every choice that shapes
the per-atom rows: the distance shells and search radius, the interaction-role columns, the receptor classes
by shell, the bonded neighbours' context and the rigid moves of the pose. Training saves it with the model
(the manifest's ``features``) and prediction, cross-validation and fine-tuning apply the same record, so a
model's inputs are computed one way wherever it runs.

Rows are *finished*: what the scorer reads (:meth:`ContactRecipe.views`). Count columns the scorer does not
log itself (the radial shells, and every column once the bonded context is appended) are ``log1p``'d here.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from functools import cached_property
from typing import Any, ClassVar, Mapping

import numpy as np

from geomol.data.chemistry.contact_features import (ATOM_CONTACT_FEATURES, CHEMISTRY_CONTACT_FEATURES, COUNT_FEATURES,
                                                    CUTOFF, NEAR, RADIAL_BINS, RADIAL_CONTACT_FEATURES, SHELL,
                                                    graph_ligand_bonds, graph_pose_contacts, rigid_moves)
from geomol.data.chemistry.nucleic_contacts import NUCLEIC_CONTACT_FEATURES
from geomol.errors import ConfigError

__all__ = ["ContactRecipe", "POSE_VIEWS", "log_counts", "with_bond_context"]

POSE_VIEWS = ("smooth", "augment")
"""How moved poses are used: ``smooth`` averages the rows over the pose and its moved copies (one view);
``augment`` keeps every pose as a view (training reads one at random per batch, prediction averages the
scores over all)."""


@dataclass(frozen=True)
class ContactRecipe:
    """The contact scorer's featurisation of a complex graph.

    Attributes:
        roles: append the interaction-role columns (:data:`CHEMISTRY_CONTACT_FEATURES`; the graph must carry
            ``ligand_chemistry``, i.e. come from a ligand molecule).
        nucleic: nucleotides take their atoms' roles from their base templates, and the nucleic-acid columns
            (:data:`~geomol.data.chemistry.nucleic_contacts.NUCLEIC_CONTACT_FEATURES`: base edges, 2'-OH, phosphates,
            stacking, ions) follow the role columns; needs ``roles``.
        radial: append the receptor atoms by class and distance shell (:data:`RADIAL_CONTACT_FEATURES`).
        bond_context: append, to each ligand atom's row, the mean of its bonded neighbours' rows.
        moves: ``K`` fixed random rigid moves of the ligand and their mirror images (``2K`` moved poses,
            :func:`~geomol.data.chemistry.contact_features.rigid_moves`); 0: the pose as given only.
        shift: Å, spread of each move's translation components; turn: degrees, spread of its rotation angle;
        move_seed: the draw of the moves (the same for every ligand).
        pose_views: :data:`POSE_VIEWS`.
        near, shell: Å, the two distance shells of the element counts (``d < near``, ``near ≤ d < shell``; the
            burial count is ``d < shell``).
        cutoff: Å, receptor atoms farther than this from a ligand atom are not read. The complex's pocket must
            be at least this wide (:meth:`check_pocket`), or atoms the features count would be missing.
    """

    roles: bool = False
    radial: bool = False
    nucleic: bool = False
    bond_context: bool = False
    moves: int = 0
    shift: float = 0.3
    turn: float = 8.0
    move_seed: int = 0
    pose_views: str = "smooth"
    near: float = NEAR
    shell: float = SHELL
    cutoff: float = CUTOFF

    VERSION: ClassVar[int] = 1

    def __post_init__(self):
        for name in ("roles", "radial", "bond_context", "nucleic"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"contact recipe: {name} is true or false, got {getattr(self, name)!r}")
        for name in ("moves", "move_seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"contact recipe: {name} is an integer >= 0, got {value!r}")
        if self.pose_views not in POSE_VIEWS:
            raise ConfigError(f"contact recipe: pose_views is one of {POSE_VIEWS}, got {self.pose_views!r}")
        numbers = {name: getattr(self, name) for name in ("shift", "turn", "near", "shell", "cutoff")}
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0
               for v in numbers.values()):
            raise ConfigError(f"contact recipe: {numbers} must be finite numbers >= 0")
        if self.nucleic and not self.roles:
            raise ConfigError("contact recipe: nucleic needs roles (its columns read the ligand atoms' roles)")
        if not 0 < self.near < self.shell <= self.cutoff:
            raise ConfigError(f"contact recipe: the shells need 0 < near < shell <= cutoff, got near {self.near:g}, "
                              f"shell {self.shell:g}, cutoff {self.cutoff:g} Å")
        if self.radial and RADIAL_BINS[-1] > self.cutoff:
            raise ConfigError(f"contact recipe: the radial shells reach {RADIAL_BINS[-1]:g} Å, beyond the "
                              f"{self.cutoff:g} Å cutoff")

    # ------------------------------------------------------------------ record
    def to_dict(self) -> dict[str, Any]:
        """``{"version": 1, <every field>}``: plain values for a manifest or a result file."""
        return {"version": self.VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any] | None, source=None) -> "ContactRecipe":
        """The recipe of a saved record (``None``: the defaults).

        Raises:
            ConfigError: a newer version, an unknown field or a bad value, naming ``source``.
        """
        record = dict(record or {})
        version = record.pop("version", cls.VERSION)
        if version != cls.VERSION:
            raise ConfigError(f"contact recipe version {version!r}: this geomol reads version {cls.VERSION}", source)
        unknown = sorted(set(record) - {f.name for f in fields(cls)})
        if unknown:
            raise ConfigError(f"contact recipe: unknown field(s) {unknown}", source)
        try:
            return cls(**record)
        except ConfigError as exc:
            raise ConfigError(exc.reason, source) from None

    # ------------------------------------------------------------------ what it needs and makes
    @property
    def width(self) -> int:
        """Columns of a finished row."""
        base = (len(ATOM_CONTACT_FEATURES) + len(CHEMISTRY_CONTACT_FEATURES) * self.roles
                + len(NUCLEIC_CONTACT_FEATURES) * self.nucleic + len(RADIAL_CONTACT_FEATURES) * self.radial)
        return 2 * base if self.bond_context else base

    @property
    def n_views(self) -> int:
        """Views of one complex: ``1 + 2 moves`` with ``pose_views='augment'``, else 1."""
        return 1 + 2 * self.moves if self.moves and self.pose_views == "augment" else 1

    def check_pocket(self, pocket_cutoff: float, source=None) -> None:
        """Refuse a pocket narrower than the features read.

        Raises:
            ConfigError: ``pocket_cutoff`` < :attr:`cutoff` (receptor atoms the features count would not be in
                the graph, and the rows would silently change).
        """
        if pocket_cutoff < self.cutoff:
            raise ConfigError(f"the pocket ({pocket_cutoff:g} Å) is smaller than the contact features read "
                              f"({self.cutoff:g} Å around each ligand atom): build the complexes with a pocket "
                              f"cutoff of at least {self.cutoff:g} Å, or use a recipe with a smaller cutoff", source)

    @cached_property
    def rigid_moves(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The moves of the pose (:func:`~geomol.data.chemistry.contact_features.rigid_moves`), or None."""
        return rigid_moves(self.moves, self.shift, self.turn, self.move_seed) if self.moves else None

    def views(self, graph, bonds: np.ndarray | None = None) -> list[np.ndarray]:
        """The finished ``(L, width)`` rows of one complex graph, one array per view (:attr:`n_views`).

        Args:
            graph: a :class:`~geomol.data.blocks.BlockGraph` of one complex (receptor segment 0, ligand 1).
            bonds: the ligand's bonded row pairs when the caller has them
                (:func:`~geomol.data.chemistry.contact_features.graph_ligand_bonds`; rigid moves keep them).
        """
        poses = graph_pose_contacts(graph, chemistry=self.roles, radial=self.radial, moves=self.rigid_moves,
                                    near=self.near, shell=self.shell, cutoff=self.cutoff, nucleic=self.nucleic)
        if self.n_views == 1:
            poses = [poses[0] if len(poses) == 1 else np.mean(poses, axis=0)]
        if self.bond_context and bonds is None:
            bonds = graph_ligand_bonds(graph)
        return [self._finished(rows, bonds) for rows in poses]

    def _finished(self, rows: np.ndarray, bonds: np.ndarray | None) -> np.ndarray:
        """Rows as the scorer reads them: with the bonded neighbours' context, or the radial shells and nucleic-acid
        columns logged."""
        first_shell = rows.shape[1] - (len(RADIAL_CONTACT_FEATURES) if self.radial else 0)  # the shells come last
        first_nucleic = first_shell - (len(NUCLEIC_CONTACT_FEATURES) if self.nucleic else 0)  # before the shells
        counts = [c for c in COUNT_FEATURES if c < first_nucleic] + list(range(first_nucleic, rows.shape[1]))
        if self.bond_context:
            return with_bond_context(rows, bonds, counts)
        if self.radial or self.nucleic:  # wider than the scorer's own log1p columns: logged here
            return log_counts(rows, counts)
        return rows


def log_counts(rows: np.ndarray, counts) -> np.ndarray:
    """``rows`` (float64 copy) with the columns ``counts`` log1p'd, as the scorer reads count columns."""
    logged = rows.astype(np.float64)
    counts = list(counts)
    logged[:, counts] = np.log1p(np.clip(logged[:, counts], 0.0, None))
    return logged


def with_bond_context(rows: np.ndarray, bonds: np.ndarray, counts=None) -> np.ndarray:
    """``(L, 2F)``: each ligand atom's contact row (count columns log1p'd, as the scorer reads them) followed by
    the mean of its bonded neighbours' rows (zeros for an atom without bonds): what the atoms next to it touch.

    Args:
        rows: ``(L, F)`` :func:`~geomol.data.chemistry.contact_features.graph_atom_contacts` rows.
        bonds: ``(B, 2)`` bonded atom pairs (:func:`~geomol.data.chemistry.contact_features.graph_ligand_bonds`).
        counts: the count columns of ``rows`` (default: those of :data:`COUNT_FEATURES` it has).
    """
    logged = log_counts(rows, [c for c in COUNT_FEATURES if c < rows.shape[1]] if counts is None else counts)
    ends, others = np.concatenate([bonds[:, 0], bonds[:, 1]]), np.concatenate([bonds[:, 1], bonds[:, 0]])
    summed = np.zeros_like(logged)
    np.add.at(summed, ends, logged[others])
    degree = np.bincount(ends, minlength=len(rows)).clip(min=1)
    return np.concatenate([logged, summed / degree[:, None]], axis=1)
