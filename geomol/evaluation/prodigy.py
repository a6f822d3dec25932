"""PRODIGY (``prodigy-prot``, Vangone & Bonvin 2015) run through its own package on a complex file.

PRODIGY predicts ΔG from the counts of inter-residue contacts within 5.5 Å by residue class and the
fraction of apolar and charged residues on the non-interacting surface, with fixed coefficients fitted
on its own 81-complex benchmark (IC-NIS model). It is run here as users run it — its parser, its
contacts, its freesasa call, its coefficients — on the same structure files and partner chains as the
other models, so that the comparison is like for like. Optional extra: ``pip install "geomol[ppa]"``.

Its parser is stricter than geomol's: it drops every HETATM record (modified residues such as MSE
included) and every residue with an insertion code (antibody CDR positions such as 100A), and it does not
read gzipped files (they are unpacked to a temporary file first).
"""
from __future__ import annotations

import gzip
import logging
import shutil
import tempfile
from os import PathLike
from pathlib import Path
from typing import Sequence

from geomol.errors import ConfigError, GeomolError

__all__ = ["prodigy_version", "run_prodigy", "PRODIGY_TEMPERATURE_C"]

PRODIGY_TEMPERATURE_C = 25.0
"""°C: PRODIGY's default, used for its Kd (its ΔG does not depend on it)."""


def prodigy_version() -> str:
    """The installed ``prodigy-prot`` version.

    Raises:
        ConfigError: it is not installed.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prodigy-prot")
    except PackageNotFoundError:
        raise ConfigError("PRODIGY is not installed: pip install \"geomol[ppa]\" (prodigy-prot)") from None


def _plain_pdb(path: Path, folder: Path) -> Path:
    """``path`` itself, or its gunzipped copy in ``folder`` (PRODIGY reads .pdb, .ent and .cif only)."""
    if path.suffix != ".gz":
        return path
    plain = folder / path.with_suffix("").name
    with gzip.open(path, "rb") as source, open(plain, "wb") as target:
        shutil.copyfileobj(source, target)
    return plain


def run_prodigy(path: str | PathLike, chains_a: Sequence[str], chains_b: Sequence[str]) -> dict[str, float]:
    """PRODIGY's prediction for partners ``chains_a`` and ``chains_b`` of one structure file.

    Returns:
        ``{'dG_kcal_mol': ΔG (its IC-NIS model), 'contacts': all inter-residue contacts, 'CC', 'CP', 'AC',
        'PP', 'AP', 'AA': contacts by class pair, 'nis_apolar', 'nis_charged': % of the non-interacting
        surface}``.

    Raises:
        ConfigError: prodigy-prot is not installed.
        GeomolError: PRODIGY refused the file (its message, naming the file).
    """
    prodigy_version()
    from prodigy_prot.modules.parsers import parse_structure
    from prodigy_prot.modules.prodigy import Prodigy

    logging.getLogger("Prodigy").setLevel(logging.ERROR)  # its gap report is a warning per chain break
    path = Path(path)
    with tempfile.TemporaryDirectory() as folder:
        try:
            models, _, _ = parse_structure(str(_plain_pdb(path, Path(folder))))
            prodigy = Prodigy(models[0], name=path.name, selection=[",".join(chains_a), ",".join(chains_b)],
                              temp=PRODIGY_TEMPERATURE_C)
            prodigy.predict()
        except (ValueError, KeyError, AssertionError, SystemExit) as exc:  # SystemExit: its parser exits on errors
            raise GeomolError(f"PRODIGY refused the complex: {exc or type(exc).__name__}", source=path) from None
    result = prodigy.as_dict()
    return {"dG_kcal_mol": float(result["ba_val"]), "contacts": float(result["ICs"]),
            **{k: float(result[k]) for k in ("CC", "CP", "AC", "PP", "AP", "AA")},
            "nis_apolar": float(result["nis_a"]), "nis_charged": float(result["nis_c"])}
