"""Exceptions raised by geomol for bad input.

Every exception names the offending file (or object) and the reason, so that a user who
feeds a truncated PDB or a corrupt SDF learns *which* file and *why*, instead of reading a
traceback from deep inside Biopython or RDKit. Long jobs catch :class:`GeomolError`, skip the
item and report it; any other exception is a bug in geomol.
"""
from __future__ import annotations

from os import PathLike

__all__ = [
    "GeomolError",
    "StructureReadError",
    "LigandNotFoundError",
    "EmptySelectionError",
    "UnknownElementError",
    "ConfigError",
    "ModelLoadError",
    "DatasetError",
    "TrajectoryError",
    "MoleculeMismatchError",
    "InputCheckError",
    "PoseError",
    "InvalidSmilesError",
    "NoCommonCoreError",
    "EmbeddingError",
    "PoseClashError",
    "SimulationError",
]


class GeomolError(Exception):
    """Base class of every error geomol raises on purpose.

    Args:
        reason: what is wrong, in words a user understands.
        source: the file (or a description of the object) the problem was found in.
        record: optional location inside the source (line number, molecule index, residue id).
    """

    def __init__(self, reason: str, source: str | PathLike | None = None, record: str | int | None = None):
        self.reason = reason
        self.source = None if source is None else str(source)
        self.record = record
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.source is not None:
            where = f"{self.source}"
            if self.record is not None:
                where += f" [{self.record}]"
            where += ": "
        return f"{where}{self.reason}"

    def __reduce__(self):  # keep the structured fields across process boundaries (DataLoader workers)
        return (type(self), (self.reason, self.source, self.record))


class StructureReadError(GeomolError):
    """A structure file (PDB, mmCIF, SDF, MOL2, ...) is missing, empty, truncated or unparseable."""


class LigandNotFoundError(GeomolError):
    """The requested ligand (residue name, chain or molecule) is not in the file."""


class EmptySelectionError(GeomolError):
    """A selection (pocket, interface, atom selection, chain group) matched nothing."""


class UnknownElementError(GeomolError):
    """An atom's element symbol is not a chemical element."""


class ConfigError(GeomolError):
    """A configuration or option value is inconsistent or out of range."""


class ModelLoadError(GeomolError):
    """A checkpoint or shipped model cannot be found or does not match the model."""


class DatasetError(GeomolError):
    """A dataset directory, index file or split file is missing or malformed."""


class TrajectoryError(GeomolError):
    """A trajectory is unreadable, too short for the request, or inconsistent with its topology."""


class MoleculeMismatchError(TrajectoryError):
    """A structure or trajectory is not the molecule a model was trained on (other atoms, or other bonds)."""


class InputCheckError(GeomolError):
    """A readable input that a model must not be given: a 2D or collapsed ligand, a protein as the ligand,
    a ligand outside any pocket or overlapping the receptor, a receptor that is not a biomolecule."""


class PoseError(GeomolError):
    """A ligand cannot be posed on a reference ligand (see :mod:`geomol.data.posing.poses`)."""


class InvalidSmilesError(PoseError):
    """A SMILES string cannot be parsed or sanitised by RDKit."""


class NoCommonCoreError(PoseError):
    """A ligand shares no common core of enough heavy atoms with the reference ligand."""


class EmbeddingError(PoseError):
    """No 3D conformer of a ligand could be embedded under the reference core's coordinates."""


class PoseClashError(PoseError):
    """Every pose of a ligand, refined in the pocket, still clashes with the receptor (a heavy-atom pair under
    1.5 Å) or holds overlapping atoms: the ligand is reported, not scored."""


class DockingError(PoseError):
    """AutoDock Vina could not dock a ligand (receptor or ligand preparation, or the search, failed)."""


class SimulationError(GeomolError):
    """A molecular-dynamics run cannot go on (the engine failed, or the system blew up)."""
