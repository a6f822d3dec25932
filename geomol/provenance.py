"""What produced a result file: the command, the code's commit and the library versions.

Every benchmark JSON, cross-validation fold and rollout summary carries ``"provenance": provenance()``::

    {"command": "python benchmarks/affinity_cv.py train --fold 0 ...", "commit": "4bc1d60…", "dirty": false,
     "changed_files": [],
     "versions": {"geomol": "0.1.0", "python": "3.12.3", "torch": "2.13.0", ...},
     "torch_threads": 1, "machine": "x86_64 Linux-…", "cpus": 2, "load_average": [1.9, 2.1, 2.0],
     "cpu": {"model": "AMD EPYC", "logical_cpus": 2, "physical_cores": 2, "caches": {"L1d": "32K", ...}, ...},
     "date": "2026-12-01T02:10:00+00:00"}

``cpu`` (:func:`cpu_description`) says which processor the numbers came from: its model, cores, caches (size and
how many logical CPUs share each) and vector instructions, so that speed figures from two machines can be told
apart without guessing.

``commit`` and ``dirty`` come from the git checkout holding the ``geomol`` package (None when it
is not one, e.g. an installed wheel); ``changed_files`` names the tracked files that made it dirty (e.g. only
an earlier benchmark's result file, when several run one after the other). Absolute paths on the command line are
recorded relative to the working directory when inside it, else as ``.../<last part>`` (:func:`portable_command`):
a result file committed to the repository names no folder of the machine that produced it.
"""
from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from geomol.version import PACKAGE_DIR, __version__

__all__ = ["provenance", "library_versions", "git_commit", "changed_files", "portable_command",
           "portable_arguments", "user_command", "cpu_description"]

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


def _git(root: Path, *args: str) -> str | None:
    """``git -C root args``'s output as printed, or None where git is missing, fails or hangs."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_commit(root: Path | None = None) -> tuple[str | None, bool | None]:
    """(HEAD commit, whether tracked files differ from it) of the checkout at ``root`` (default: the one holding
    geomol); (None, None) outside git."""
    return _checkout_state(root)[:2]


def _checkout_state(root: Path | None = None) -> tuple[str | None, bool | None, list[str] | None]:
    """(HEAD commit, dirty, :func:`changed_files`) of the checkout at ``root``; Nones outside git."""
    commit = _git(root or PACKAGE_DIR.parent, "rev-parse", "HEAD")
    if commit is None:
        return None, None, None
    changed = changed_files(root)
    return commit.strip(), None if changed is None else bool(changed), changed


def changed_files(root: Path | None = None, limit: int = 20) -> list[str] | None:
    """The tracked files of the checkout at ``root`` (default: the one holding geomol) that differ from HEAD,
    sorted, at most ``limit`` and then ``"… and N more"``; None outside git. A record marked dirty by an earlier
    benchmark's result file alone, not by code, can then be told apart."""
    status = _git(root or PACKAGE_DIR.parent, "status", "--porcelain", "--untracked-files=no")
    if status is None:
        return None
    paths = sorted(line[3:].split(" -> ")[-1] for line in status.splitlines() if line.strip())
    return paths if len(paths) <= limit else [*paths[:limit], f"… and {len(paths) - limit} more"]


def _portable_path(value: str, cwd: Path) -> str:
    path = Path(value)
    if not path.is_absolute():
        return value
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else f".../{path.name}"


def portable_arguments(argv: Sequence[str], cwd: str | os.PathLike | None = None) -> list[str]:
    """``argv`` with absolute paths (also as ``--option=PATH`` or ``NAME=PATH``) made relative to ``cwd`` (default:
    the working directory) when inside it, else shortened to ``.../<last part>``."""
    where = Path.cwd() if cwd is None else Path(cwd)
    parts = []
    for arg in argv:
        option, equals, value = arg.partition("=")
        parts.append(f"{option}={_portable_path(value, where)}" if equals and Path(value).is_absolute()
                     else _portable_path(arg, where))
    return parts


def portable_command(argv: Sequence[str], cwd: str | os.PathLike | None = None) -> str:
    """The shell line of ``python`` + ``argv``, paths made portable (:func:`portable_arguments`)."""
    return shlex.join([Path(sys.executable).name, *portable_arguments(argv, cwd)])


_VECTOR_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "asimd", "sve")
"""The instruction-set flags of /proc/cpuinfo that change how fast the compiled loops and the BLAS run."""


def user_command(command: str) -> str:
    """``geomol ...`` for a recorded ``python .../geomol ...`` or ``python -m geomol ...`` command line (what a
    user types, for a model card)."""
    return re.sub(r"^\S*python\S*\s+(-m\s+geomol(\.cli)?|\S*geomol(/__main__\.py)?)\s", "geomol ", command)


def _cpuinfo_fields(text: str) -> dict[str, str]:
    """The first processor's ``key: value`` fields of /proc/cpuinfo text."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _caches(cpu_dir: Path) -> dict[str, dict[str, str | int]]:
    """{"L1d": {"size": "32K", "shared_by": 1}, "L2": ..., "L3": ...} from sysfs (``cpu_dir``: /sys/.../cpu0)."""
    caches = {}
    for index in sorted((cpu_dir / "cache").glob("index*")):
        try:
            level, kind, size = ((index / name).read_text().strip() for name in ("level", "type", "size"))
            shared = (index / "shared_cpu_list").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        name = f"L{level}" + ("d" if kind == "Data" else "")
        caches[name] = {"size": size, "shared_by": _count_cpus(shared)}
    return caches


def _count_cpus(cpu_list: str) -> int:
    """Logical CPUs in a sysfs list such as ``0-3,8``."""
    count = 0
    for part in filter(None, cpu_list.split(",")):
        first, _, last = part.partition("-")
        count += int(last or first) - int(first) + 1
    return count


def cpu_description(cpuinfo: str | None = None, sysfs: str | os.PathLike = "/sys/devices/system/cpu") -> dict:
    """The processor: model name, logical CPUs, physical cores (distinct core ids; the logical count where the
    system gives none), L1d/L2/L3 caches of CPU 0 (size and the number of logical CPUs sharing each), whether it
    runs under a hypervisor, and which vector instruction sets it has. ``cpuinfo``: the text of /proc/cpuinfo
    (read when None); fields a system does not give are left out."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    first = _cpuinfo_fields(cpuinfo)
    flags = set((first.get("flags") or first.get("Features") or "").split())
    cores = {(block.get("physical id", "0"), block["core id"])
             for block in map(_cpuinfo_fields, cpuinfo.split("\n\n")) if "core id" in block}
    logical = cpuinfo.count("processor\t:") or cpuinfo.count("processor :") or os.cpu_count()
    record = {"model": first.get("model name") or first.get("Model") or platform.processor() or platform.machine(),
              "logical_cpus": logical, "physical_cores": len(cores) or logical,
              "hypervisor": "hypervisor" in flags, "vector": [flag for flag in _VECTOR_FLAGS if flag in flags]}
    caches = _caches(Path(sysfs) / "cpu0")
    if caches:
        record["caches"] = caches
    return record


THREAD_ENVIRONMENT = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND", "MKL_NUM_THREADS")
"""Environment variables that change how torch's (and the compiled loops') OpenMP threads run and wait; those set
are recorded (``threads_environment``)."""


def provenance(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The record described in the module notes; ``argv`` defaults to this process's command line."""
    import torch

    commit, dirty, changed = _checkout_state()
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    return {"command": portable_command(sys.argv if argv is None else argv),
            "commit": commit, "dirty": dirty, "changed_files": changed, "versions": library_versions(),
            "torch_threads": torch.get_num_threads(), "machine": f"{platform.machine()} {platform.platform()}",
            "cpus": os.cpu_count(), "load_average": load, "cpu": cpu_description(),
            "threads_environment": {name: os.environ[name] for name in THREAD_ENVIRONMENT if name in os.environ},
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
