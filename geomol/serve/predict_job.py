"""One job, run inside a worker process: predict through :mod:`geomol.api`, then write every result file.

The prediction is the library's, as ``geomol predict-affinity`` makes it: the ligands are expanded with
:func:`geomol.api.ligand_inputs` (posed ligand files) or posed on the reference with
:func:`geomol.api.posed_inputs` (SMILES), then predicted one record at a time with
:func:`geomol.api.iter_affinity` (:func:`~geomol.api.predict_affinity`'s streaming form, for progress).
Whatever that API checks, warns about or reads, the service reports as it is.

Files written into ``results/`` (all in a hidden folder first, renamed into place when complete):

* ``results.csv`` / ``results.json`` — the prediction table (:func:`geomol.inference.tables.write_predictions`:
  the same columns as ``geomol predict-affinity --out``), plus ``measured_pK`` when measured values were given;
* ``poses.sdf`` — every ligand with coordinates (the uploaded pose, or the pose made from its SMILES), with
  its prediction as SD data items;
* ``depictions/<i>.svg`` — a 2D drawing of ligand ``i`` (RDKit), in table order, styled with presentation attributes
  (``fill='#FFFFFF'``), not ``style`` attributes, so that it renders under the server's Content-Security-Policy
  (no inline styles) when opened on its own;
* ``plot.png`` — predicted vs measured pK (with measured values for at least two predicted ligands);
* ``summary.json`` — counts, the comparison with measured values, which files exist, and the warnings geomol
  gave about the inputs as a whole (``notes``: renamed duplicate names, skipped records); written last.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from geomol import api
from geomol.errors import DatasetError
from geomol.inference.affinity import read_receptor
from geomol.serve.store import SUMMARY
from geomol.version import PACKAGE_DIR

_PACKAGE_DIR = str(PACKAGE_DIR) + os.sep

__all__ = ["JobSpec", "run_job", "depiction_svg"]

JobSpec = dict
"""What a worker needs to run a job: ``id``, ``dir`` (the job folder), ``model``, ``pocket_cutoff``,
``files`` (role → server-made file name in ``inputs/``) and ``smiles`` (True when the ligands are SMILES)."""

POSE_PROPERTIES = ("pK", "pK_std", "dG_kcal_mol", "Kd_M")


@contextmanager
def _inside(folder: Path) -> Iterator[None]:
    """Run with ``folder`` as working directory, so that messages name ``ligands.sdf``, not a server path."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _inputs(spec: JobSpec, files: dict[str, str], model) -> tuple[Any, list]:
    """(the receptor to predict against, the ligand inputs): with SMILES the receptor is read here, once, for posing
    and prediction alike."""
    if spec["smiles"]:
        receptor = read_receptor(files["receptor"], model)
        inputs, _ = api.posed_inputs(receptor, files["ligands"], files["reference"])
        return receptor, inputs
    return files["receptor"], api.ligand_inputs(files["ligands"])


_STYLE_ATTRIBUTE = re.compile(r"""\sstyle=(['"])(.*?)\1""")


def _presentation_attributes(svg: str) -> str:
    """RDKit's ``style='fill:none;stroke:#000000'`` as ``fill='none' stroke='#000000'`` (the same look; a CSP that
    forbids inline styles, as the server's does, ignores ``style`` attributes and would draw every shape black)."""

    def attributes(match: re.Match) -> str:
        pairs = (item.split(":", 1) for item in match.group(2).split(";") if ":" in item)
        return "".join(f" {name.strip()}='{value.strip()}'" for name, value in pairs)

    return _STYLE_ATTRIBUTE.sub(attributes, svg)


def depiction_svg(molecule, size: tuple[int, int] = (260, 190)) -> str | None:
    """A 2D drawing of ``molecule`` (RDKit ``Mol``, any coordinates; hydrogens left out) as SVG text, or None."""
    from rdkit import Chem
    from rdkit.Chem import rdDepictor
    from rdkit.Chem.Draw import rdMolDraw2D

    try:
        try:
            mol = Chem.RemoveHs(Chem.Mol(molecule))
        except Exception:  # noqa: BLE001 - a molecule RDKit cannot sanitise is drawn as it is
            mol = Chem.RemoveHs(Chem.Mol(molecule), sanitize=False)
            mol.UpdatePropertyCache(strict=False)
        mol.RemoveAllConformers()  # drawn from the graph: no wedges read from the 3D pose
        Chem.AssignStereochemistry(mol, cleanIt=True, force=True)  # drop chiral tags of atoms that are no centres
        rdDepictor.Compute2DCoords(mol)
        drawer = rdMolDraw2D.MolDraw2DSVG(*size)
        rdMolDraw2D.PrepareAndDrawMolecule(drawer, mol)
        drawer.FinishDrawing()
        return _presentation_attributes(drawer.GetDrawingText())
    except Exception:  # noqa: BLE001 - a molecule RDKit cannot draw simply has no picture
        return None


def _write_poses(path: Path, inputs: Sequence, records: Sequence) -> int:
    from rdkit import Chem

    written = 0
    with Chem.SDWriter(str(path)) as writer:
        for item, record in zip(inputs, records):
            if item.molecule is None:
                continue
            mol = Chem.Mol(item.molecule)
            mol.SetProp("_Name", record.name)
            for name in POSE_PROPERTIES:
                value = getattr(record, name)
                if math.isfinite(value):
                    mol.SetProp(f"geomol_{name}", f"{value:.6g}")
            for name, text in (("error", record.error), ("warnings", " | ".join(record.warnings))):
                if text:
                    mol.SetProp(f"geomol_{name}", text)
            writer.write(mol)
            written += 1
    return written


def _compare(records: Sequence, measured_file: str | None, plot: Path) -> dict | None:
    """Add ``measured_pK`` to the records and plot predicted vs measured; the statistics or a note."""
    if measured_file is None:
        return None
    from geomol.inference.tables import plot_predicted_vs_measured, read_measured

    measured = read_measured(measured_file)
    for record in records:
        if record.name in measured:
            record.extra["measured_pK"] = measured[record.name]
    try:
        return {"plot": True, **plot_predicted_vs_measured(records, measured, plot)}
    except DatasetError as exc:
        return {"plot": False, "note": exc.reason,  # without its source: a path inside the server
                "n": sum(1 for r in records if r.ok and r.name in measured)}


def _write_results(folder: Path, spec: JobSpec, files: dict[str, str], inputs: Sequence, records: Sequence,
                   notes: list[str]) -> dict:
    from geomol.inference.tables import write_predictions

    comparison = _compare(records, files.get("measured"), folder / "plot.png")
    write_predictions(records, folder / "results.csv")
    write_predictions(records, folder / "results.json")
    poses = _write_poses(folder / "poses.sdf", inputs, records)
    (folder / "depictions").mkdir()
    depicted = []
    for index, item in enumerate(inputs):
        svg = depiction_svg(item.molecule) if item.molecule is not None else None
        if svg is not None:
            (folder / "depictions" / f"{index}.svg").write_text(svg, encoding="utf-8")
        depicted.append(svg is not None)
    counts = {"ligands": len(records), "predicted": sum(r.ok for r in records),
              "failed": sum(not r.ok for r in records), "warned": sum(bool(r.ok and r.warnings) for r in records)}
    summary = {"job": spec["id"], "model": spec["model"], "counts": counts, "comparison": comparison,
               "poses": poses, "depictions": depicted, "notes": notes}
    (folder / SUMMARY).write_text(json.dumps(summary, indent=1, allow_nan=False), encoding="utf-8")
    return summary


def run_job(spec: JobSpec, model, progress: Callable[[int, int], None]) -> dict:
    """Predict one job with the loaded affinity ``model`` and write its ``results/`` folder.

    Args:
        spec: :data:`JobSpec`. model: from :func:`geomol.api.load_model`.
        progress: called with (ligands done, ligands in all) after each ligand.

    Returns:
        the summary written to ``results/summary.json`` (``counts``: ligands, predicted, failed, warned).

    Raises:
        GeomolError subclasses: the receptor, the reference or the ligand file cannot be read at all.
    """
    job_dir = Path(spec["dir"])
    partial = job_dir / f".results-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    with _inside(job_dir / "inputs"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        files = spec["files"]
        receptor, inputs = _inputs(spec, files, model)
        records = []
        for record in api.iter_affinity(receptor, inputs, model, pocket_cutoff=spec["pocket_cutoff"]):
            records.append(record)
            progress(len(records), len(inputs))
        notes = list(dict.fromkeys(str(w.message) for w in caught if _from_geomol(w)))
        summary = _write_results(partial, spec, files, inputs, records, notes)
    partial.rename(job_dir / "results")
    return summary


def _from_geomol(caught: warnings.WarningMessage) -> bool:
    """A warning geomol itself gave about the inputs (renamed duplicates, skipped records), not a library's."""
    return os.path.abspath(caught.filename).startswith(_PACKAGE_DIR)
