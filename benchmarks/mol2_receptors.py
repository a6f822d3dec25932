"""Every MOL2 receptor of ``../shared/data/ddg_bindingdb`` through ``read_structure``, checked against the file.

Per receptor, the file's own counts are taken independently of the reader (lines of the
``@<TRIPOS>ATOM`` and ``@<TRIPOS>SUBSTRUCTURE`` sections) and compared with what
:func:`geomol.data.io.read_structure` returns, hydrogens kept:

* residues read == distinct (substructure id, substructure name) pairs of the atom lines (minus
  waters), and how often that differs from the number of ``SUBSTRUCTURE`` lines (a converter that
  lost insertion codes names several residues under one substructure id; they stay apart);
* atoms read == atom lines − lone pairs / dummy atoms − water atoms (the only atoms dropped, and reported);
* amino-acid residues with a CA atom per chain == the manifest's ``receptor_chain_lengths``.

Also the read time per file (one thread). Usage::

    python benchmarks/mol2_receptors.py [--limit N] [--output benchmarks/results/mol2_receptors.json]
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
DDG = shared_data_dir() / "ddg_bindingdb"
_NOT_ATOMS = ("LP", "DU")


def file_counts(text: str) -> dict:
    """Atom lines, substructures, lone pairs/dummies and water atoms/residues of the first molecule."""
    section, atoms, substructures = "", [], []
    for line in text.splitlines():
        if line.startswith("@<TRIPOS>"):
            section = line[9:].strip()
            if section == "MOLECULE" and atoms:
                break
            continue
        if line.strip() and section in ("ATOM", "SUBSTRUCTURE"):
            (atoms if section == "ATOM" else substructures).append(line.split())
    water = {s[0] for s in substructures if len(s) > 6 and s[6] in ("HOH", "WAT")}
    named = {(a[6], a[7]) for a in atoms if len(a) > 7 and a[6] not in water}
    return {"atoms": len(atoms), "substructures": len(substructures), "named_residues": len(named),
            "water_residues": len(water),
            "water_atoms": sum(a[6] in water for a in atoms if len(a) > 6),
            "not_atoms": sum(a[5].split(".")[0].upper() in _NOT_ATOMS for a in atoms)}


def _manifest() -> dict[str, dict[str, int]]:
    with open(DDG / "manifest.csv", newline="") as handle:
        return {row["pdb_id"]: {c: int(n) for c, n in (p.split(":") for p in row["receptor_chain_lengths"].split(";") if p)}
                for row in csv.DictReader(handle)}


def check(pdb_id: str, chain_lengths: dict[str, int]) -> dict:
    from geomol.data.io import read_structure, read_text
    from geomol.data.io.structure import is_polymer_residue
    from geomol.errors import GeomolError

    path = DDG / pdb_id / "receptor.mol2.gz"
    expected = file_counts(read_text(path))
    start = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            structure = read_structure(path, keep_hydrogens=True)
    except GeomolError as exc:
        return {"pdb_id": pdb_id, "error": str(exc), **expected}
    seconds = time.perf_counter() - start
    per_chain = Counter(structure.chains[r] for r in range(structure.num_residues)
                        if is_polymer_residue(structure.resnames[r])
                        and "CA" in structure.names[structure.residue_start[r]:structure.residue_start[r + 1]])
    atoms_expected = expected["atoms"] - expected["not_atoms"] - expected["water_atoms"]
    return {"pdb_id": pdb_id, "error": "", **expected, "atoms_read": structure.num_atoms,
            "residues_read": structure.num_residues, "seconds": seconds,
            "warnings": [_portable(str(w.message)) for w in caught],
            "atoms_match": structure.num_atoms == atoms_expected, "residues_match": structure.num_residues == expected["named_residues"],
            "substructure_lines_match": structure.num_residues == expected["substructures"] - expected["water_residues"],
            "chains_match": None if not chain_lengths else all(per_chain.get(c, 0) == n for c, n in chain_lengths.items())}


def _portable(message: str) -> str:
    """The message with this machine's shared-data folder written as ``$GEOMOL_SHARED_DATA``."""
    return message.replace(str(shared_data_dir()), "$GEOMOL_SHARED_DATA")


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="only this many receptors, evenly spaced in sorted order")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "mol2_receptors.json")
    args = parser.parse_args()
    ids = sorted(p.name for p in DDG.iterdir() if (p / "receptor.mol2.gz").exists())
    if args.limit and args.limit < len(ids):
        ids = [ids[i * len(ids) // args.limit] for i in range(args.limit)]
    manifest = _manifest()
    rows = [check(pdb_id, manifest.get(pdb_id, {})) for pdb_id in ids]
    read = [r for r in rows if not r["error"]]
    summary = {"receptors": len(rows), "read": len(read), "errors": [(r["pdb_id"], r["error"]) for r in rows if r["error"]],
               "atoms_match": sum(r["atoms_match"] for r in read), "residues_match": sum(r["residues_match"] for r in read),
               "substructure_lines_match": sum(r["substructure_lines_match"] for r in read),
               "chains_match": sum(bool(r["chains_match"]) for r in read),
               "chains_compared": sum(r["chains_match"] is not None for r in read),
               "lone_pairs_or_dummies_dropped": sum(r["not_atoms"] for r in read),
               "with_warnings": sum(bool(r["warnings"]) for r in read),
               "median_seconds_per_file": statistics.median(r["seconds"] for r in read) if read else None,
               "total_atoms": sum(r["atoms_read"] for r in read), "total_residues": sum(r["residues_read"] for r in read)}
    print(f"{summary['read']}/{summary['receptors']} MOL2 receptors read; residue counts match {summary['residues_match']} "
          f"(the SUBSTRUCTURE line count: {summary['substructure_lines_match']}), "
          f"atom counts match {summary['atoms_match']}, chain lengths match the manifest {summary['chains_match']}/"
          f"{summary['chains_compared']}; {summary['lone_pairs_or_dummies_dropped']} lone pairs/dummies dropped; "
          f"median {summary['median_seconds_per_file']:.3f} s per file")
    for pdb_id, error in summary["errors"]:
        print(f"  {pdb_id}: {error}")
    record = {"benchmark": "mol2_receptors", "provenance": provenance(), "threads": 1,
              "summary": summary, "receptors": rows}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=1) + "\n")
    return 0 if not summary["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
