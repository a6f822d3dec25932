"""A ligand's errors and warnings as :class:`~geomol.data.chemistry.checks.Finding` s: severity, code, message.

Input checks and the applicability domain produce findings with stable codes (``'clash'``,
``'close_contact'``, ``'size_outside_training'``, ...); a ligand that fails for another reason raises a
:class:`~geomol.errors.GeomolError`, whose class names the code here (``StructureReadError`` →
``'unreadable'``, ``NoCommonCoreError`` → ``'no_common_core'``). Each prediction record keeps its
findings beside the ``error`` / ``warnings`` text, so that a program (or the terminal table) can group
and count them by code.
"""
from __future__ import annotations

import re

from geomol.data.chemistry.checks import ERROR, Finding

__all__ = ["error_code", "exception_findings", "code_label"]

_SPECIAL = {"StructureReadError": "unreadable", "GeomolError": "error", "ConfigError": "unusable_input"}


def error_code(kind: str | type | BaseException) -> str:
    """The code of an error kind (exception class, instance or class name): ``'NoCommonCoreError'`` →
    ``'no_common_core'``."""
    name = kind if isinstance(kind, str) else (kind if isinstance(kind, type) else type(kind)).__name__
    if name in _SPECIAL:
        return _SPECIAL[name]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name.removesuffix("Error")).lower() or "error"


def exception_findings(exc: BaseException) -> list[Finding]:
    """The error findings of an exception: those an input check raised with, else one coded by its class."""
    found = getattr(exc, "findings", None)
    if found:
        return list(found)
    return [Finding(ERROR, error_code(exc), str(exc))]


_WORDS = {"pk": "pK", "3d": "3D", "smiles": "SMILES"}


def code_label(code: str) -> str:
    """A code in words, for people (``'close_contact'`` → ``'close contact'``, ``'not_3d'`` → ``'not 3D'``)."""
    return " ".join(_WORDS.get(word, word) for word in code.split("_"))
