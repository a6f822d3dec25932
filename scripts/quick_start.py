"""The README's quick start: its example series and what the cross-validation measured on that target.

``data`` copies one protein-ligand-benchmark target's ligands (every pose, as published) into
``data/example/<target>_series.sdf`` and writes their measured pK (from ``00_data/ligands.yml``, converted
by :func:`geomol.data.datasets.affinity_labels.plb_measurement_pk`) to ``<target>_series_measured.csv``.

``readme`` writes, between the ``<!-- quick-start-cv -->`` markers of README.md, what the corpus
cross-validation measured on that target for the shipped default model, from the recorded results
(``benchmarks/results/affinity_corpus_cv.json``): the Spearman of the fold that held the target's protein
cluster out, beside the heavy-atom count's (:func:`geomol.evaluation.target_trust.trust_sentence`; the CV row is
the one whose expert-pose summary is the one the model's manifest records, so the sentence cannot describe another
model).
``--check`` only compares (a test runs it, so the README cannot drift from the results)::

    python scripts/quick_start.py data --target tnks2
    python scripts/quick_start.py readme
"""
from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
from pathlib import Path

import yaml

from geomol.errors import GeomolError
from geomol.evaluation.target_trust import trust_sentence

REPO = Path(__file__).resolve().parents[1]
MARK_START, MARK_END = "<!-- quick-start-cv -->", "<!-- /quick-start-cv -->"
TARGET = "tnks2"
MODEL = "contact-corpus"


def write_series(target: str, shared: Path, out_dir: Path) -> tuple[Path, Path]:
    """Copy ``plb/<target>``'s ligand poses and write their measured pK; returns (SDF, CSV)."""
    from geomol.data.datasets.affinity_labels import plb_measurement_pk

    folder = shared / "plb" / target
    sdf = out_dir / f"{target}_series.sdf"
    shutil.copyfile(folder / "02_ligands" / "ligands.sdf", sdf)
    table = yaml.safe_load((folder / "00_data" / "ligands.yml").read_text(encoding="utf-8"))
    measured = out_dir / f"{target}_series_measured.csv"
    with open(measured, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "pK"])
        for name, entry in table.items():
            writer.writerow([name, f"{plb_measurement_pk(entry['measurement'], source=str(folder)).pk:.3f}"])
    return sdf, measured


def cv_sentence(target: str = TARGET, model: str = MODEL) -> str:
    """The README's sentence on how the shipped model ranked ``target`` when it had not seen it."""
    cv = json.loads((REPO / "benchmarks" / "results" / "affinity_corpus_cv.json").read_text(encoding="utf-8"))
    manifest = json.loads((REPO / "models" / model / "manifest.json").read_text(encoding="utf-8"))
    try:
        return trust_sentence(cv, manifest, target)
    except GeomolError as exc:
        raise SystemExit(exc.reason) from None


def readme_block(readme: str, sentence: str) -> str:
    """``readme`` with the text between the markers replaced by ``sentence``."""
    start, end = readme.index(MARK_START) + len(MARK_START), readme.index(MARK_END)
    return readme[:start] + "\n" + sentence + "\n" + readme[end:]


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    data = sub.add_parser("data", allow_abbrev=False,
                          help="copy a PLB target's ligands and measured pK into data/example")
    data.add_argument("--target", default=TARGET)
    data.add_argument("--shared", default=None, help="shared data folder (default: $GEOMOL_SHARED_DATA)")
    readme = sub.add_parser("readme", allow_abbrev=False, help="write the cross-validation sentence into README.md")
    readme.add_argument("--check", action="store_true", help="only compare; exit 1 when the README differs")
    args = parser.parse_args()
    if args.command == "data":
        from geomol.data.paths import shared_data_dir

        for path in write_series(args.target, Path(args.shared) if args.shared else shared_data_dir(),
                                 REPO / "data" / "example"):
            print(f"written {path.relative_to(REPO)}")
        return
    path = REPO / "README.md"
    text = path.read_text(encoding="utf-8")
    updated = readme_block(text, cv_sentence())
    if args.check:
        sys.exit(0 if updated == text else 1)
    path.write_text(updated, encoding="utf-8")
    print(f"README.md: {cv_sentence()}")


if __name__ == "__main__":
    main()
