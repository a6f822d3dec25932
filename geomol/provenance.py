"""What produced a result file: the command, the code's commit and the library versions.

Every benchmark JSON, cross-validation fold and rollout summary carries ``"provenance": provenance()``::

    {"command": "python benchmarks/affinity_cv.py train --fold 0 ...", "commit": "4bc1d60…", "dirty": false,
     "versions": {"geomol": "0.1.0", "python": "3.12.3", "torch": "2.13.0", ...},
     "torch_threads": 1, "machine": "x86_64 Linux-…", "cpus": 2, "load_average": [1.9, 2.1, 2.0],
     "date": "2026-12-01T02:10:00+00:00"}

``commit`` and ``dirty`` come from the git checkout holding the ``geomol`` package (None when it
is not one, e.g. an installed wheel). Absolute paths on the command line are recorded relative to the
working directory when inside it, else as ``.../<last part>`` (:func:`portable_command`): a result file
committed to the repository names no folder of the machine that produced it.
"""
from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from geomol.version import PACKAGE_DIR, __version__

__all__ = ["provenance", "library_versions", "git_commit", "portable_command"]

_LIBRARIES = ("torch", "lightning", "torch_geometric", "e3nn", "numpy", "rdkit", "biopython", "MDAnalysis",
              "scikit-learn")


def library_versions() -> dict[str, str]:
    """Installed versions of geomol, Python and the libraries that change numbers ("absent" if not installed)."""
    versions = {"geomol": __version__, "python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def git_commit() -> tuple[str | None, bool | None]:
    """(HEAD commit, whether tracked files differ from it) of the checkout holding geomol; (None, None) outside git."""
    root = PACKAGE_DIR.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None, None
    status = git("status", "--porcelain", "--untracked-files=no")
    return commit, bool(status) if status is not None else None


def _portable_path(value: str, cwd: Path) -> str:
    path = Path(value)
    if not path.is_absolute():
        return value
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else f".../{path.name}"


def portable_command(argv: Sequence[str], cwd: str | os.PathLike | None = None) -> str:
    """The shell line of ``python`` + ``argv``, absolute paths (also as ``--option=PATH`` or ``NAME=PATH``) made
    relative to ``cwd`` (default: the working directory) when inside it, else shortened to ``.../<last part>``."""
    where = Path.cwd() if cwd is None else Path(cwd)
    parts = []
    for arg in argv:
        option, equals, value = arg.partition("=")
        parts.append(f"{option}={_portable_path(value, where)}" if equals and Path(value).is_absolute()
                     else _portable_path(arg, where))
    return shlex.join([Path(sys.executable).name, *parts])


def provenance(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The record described in the module notes; ``argv`` defaults to this process's command line."""
    import torch

    commit, dirty = git_commit()
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    return {"command": portable_command(sys.argv if argv is None else argv),
            "commit": commit, "dirty": dirty, "versions": library_versions(),
            "torch_threads": torch.get_num_threads(), "machine": f"{platform.machine()} {platform.platform()}",
            "cpus": os.cpu_count(), "load_average": load,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
