"""Ligand poses from SMILES (geomol.data.posing) against the expert poses of the FEP+ benchmark, refined and not.

For every series of ``../shared/data/fep_benchmark`` (``benchmark_metadata.csv`` order): the first
ligand of ``<scheme>_ligands.sdf`` is the reference; every other ligand is posed from its SMILES
(RDKit ``MolToSmiles`` of the expert pose, hydrogens removed) on it, with the series' protein
(heavy atoms) as receptor, twice: as embedded (``refinement=None``, the posing before refinement
existed) and refined in the pocket (the default). Measured per ligand and way of posing:

* heavy-atom RMSD to the expert pose, symmetry-aware and without re-alignment
  (``rdMolAlign.CalcRMS``), in Å; core atoms and core RMSD from the pose report. Some series list
  one molecule several times in alternative poses (rotamers, flipped rings); the RMSD to the
  nearest of them is reported too (``rmsd_nearest_alternative``);
* what the prediction's input checks see (``geomol.data.chemistry.checks``): the closest
  ligand–receptor heavy-atom pair (an error under 1.5 Å, a clash warning under 2.2 Å for a
  receptor non-metal) and the closest pair of non-bonded ligand atoms, hydrogens included
  (overlapping under 1.0 Å); the expert poses are measured the same way;
* CPU seconds of the posing (one thread; MCS + embedding + scoring + refinement, not the file reading);
* whether the core was relaxed off the reference (a receptor contact the reference itself has) and by
  how much: largest and RMS core heavy-atom displacement from the reference's atoms (Å).

The clash figures are also given without the series whose reference ligand itself clashes with
the receptor (a pose that keeps the reference's core cannot do better than the reference).

With a model (default: the shipped default), each series' ligands are predicted from the expert
and from both kinds of generated poses, and the per-series Spearman correlation of predicted pK with
the measured −ΔG is compared on the ligands all three predict (series with ≥ 4 of them).

Usage::

    python benchmarks/poses.py --output benchmarks/results/poses_refinement.json   # all 83 series
    python benchmarks/poses.py --limit 10            # 10 series evenly spaced over the metadata
    python benchmarks/poses.py --series jacs_set/cdk2 jacs_set/ptp1b --no-affinity --parameter conformers=16
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GEOMOL_SHARED_DATA", REPO.parent / "shared" / "data"))
FEP = SHARED / "fep_benchmark"
WAYS = ("unrefined", "refined", "vina")


def _series(args) -> list[dict]:
    with open(FEP / "benchmark_metadata.csv", newline="") as handle:
        rows = [{"group": r["Group abbreviation"], "scheme": r["Input file naming scheme"], "protein": r["Protein"]}
                for r in csv.DictReader(handle)]
    if args.series:
        chosen = [r for r in rows if r["scheme"] in args.series or f"{r['group']}/{r['scheme']}" in args.series]
        missing = set(args.series) - {r["scheme"] for r in chosen} - {f"{r['group']}/{r['scheme']}" for r in chosen}
        if missing:
            sys.exit(f"unknown series: {sorted(missing)}")
        return chosen
    if args.limit and args.limit < len(rows):
        return [rows[i * len(rows) // args.limit] for i in range(args.limit)]
    return rows


def _heavy(mol):
    from rdkit import Chem

    return Chem.RemoveHs(mol, sanitize=False)


def _rmsd(pose, expert) -> float:
    from rdkit.Chem import rdMolAlign

    try:
        return rdMolAlign.CalcRMS(_heavy(pose), _heavy(expert), maxMatches=10000)
    except RuntimeError:  # RDKit perceives the expert's (unsanitised) bonds differently: no atom match
        return float("nan")


def _contacts(mol, pocket) -> dict:
    from geomol.data.posing.refinement import pose_contacts

    found = pose_contacts(mol, pocket)
    return {"min_receptor_distance": found.receptor_distance, "min_non_metal_distance": found.non_metal_distance,
            "min_intra_distance": found.overlap_distance}


def _pose_series(row: dict, parameters: dict) -> tuple[list[dict], list, dict, bool]:
    """Per-ligand rows, expert molecules, generated poses by way (None where posing failed), reference clash."""
    from rdkit import Chem

    from geomol.data.io import read_ligands, read_structure
    from geomol.data.posing.poses import PoseTemplate
    from geomol.data.posing.refinement import Pocket, pose_contacts

    folder, series = FEP / row["group"], f"{row['group']}/{row['scheme']}"
    experts = read_ligands(folder / f"{row['scheme']}_ligands.sdf")
    receptor = read_structure(folder / f"{row['scheme']}_protein.pdb")
    pocket = Pocket(receptor)
    reference_clashes = not pose_contacts(experts[0], pocket).clean
    templates = {way: PoseTemplate(experts[0], receptor, p) for way, p in parameters.items()}
    setup = time.process_time()
    vina = _VinaLocalOptimisation.for_series(folder / f"{row['scheme']}_protein.pdb", experts[0]) \
        if "vina" in parameters else None
    setup = time.process_time() - setup  # receptor preparation and Vina maps, once per series
    smiles_of = [Chem.MolToSmiles(_heavy(m)) for m in experts]
    rows, poses = [], {way: [] for way in parameters}
    for index, expert in enumerate(experts[1:], start=1):
        smiles = smiles_of[index]
        base = {"series": series, "ligand": index, "name": expert.GetProp("_Name"),
                "duplicates": smiles_of[1:].count(smiles), "heavy_atoms": expert.GetNumHeavyAtoms(),
                "reference_clashes": reference_clashes,
                **{f"expert_{k}": v for k, v in _contacts(expert, pocket).items()}}
        for way, template in templates.items():
            cpu = time.process_time()
            posed = template.pose_all([(base["name"], smiles)])[0]
            shift = float("nan")
            if way == "vina":
                posed, shift = vina.optimised(posed)
            cpu = time.process_time() - cpu
            out = {**base, "way": way, "cpu_seconds": cpu, "error": posed.error, "error_kind": posed.error_kind,
                   "median_atom_shift": shift, "series_setup_cpu_seconds": setup if way == "vina" else 0.0,
                   "core_atoms": posed.core_atoms, "core_rmsd": posed.core_rmsd, "rmsd": float("nan"),
                   "rmsd_nearest_alternative": float("nan")}
            relaxed = posed.core_relaxation
            out |= {"core_relaxed": relaxed is not None, "core_max_shift": relaxed.max_shift if relaxed else 0.0,
                    "core_rms_shift": relaxed.rms_shift if relaxed else 0.0}
            if posed.ok:
                out["rmsd"] = _rmsd(posed.molecule, expert)
                out["rmsd_nearest_alternative"] = min(
                    _rmsd(posed.molecule, other) for other, other_smiles in zip(experts[1:], smiles_of[1:])
                    if other_smiles == smiles)
                out |= _contacts(posed.molecule, pocket)
            rows.append(out)
            poses[way].append(posed.molecule)
    return rows, experts[1:], poses, reference_clashes


class _VinaLocalOptimisation:
    """AutoDock Vina's local optimisation (``Vina.optimize``) of the embedded pose: the alternative to refinement.

    The receptor's ATOM records are prepared by Meeko (as ``geomol screen --dock`` does; hetero groups left out,
    Meeko cannot type most of them), Vina's maps cover the reference's box plus 8 Å per side. Vina moves the
    whole ligand (position, orientation, torsions): the core is not held. A receptor Meeko cannot prepare
    makes every ligand of the series an error (``ReceptorNotPrepared``).
    """

    def __init__(self, vina=None, reason: str = ""):
        self._vina, self._reason = vina, reason

    @classmethod
    def for_series(cls, receptor: Path, reference) -> "_VinaLocalOptimisation":
        from rdkit import Chem
        from vina import Vina

        from geomol.errors import DockingError
        from geomol.screen.dock import receptor_pdbqt

        protein = b"".join(line for line in receptor.read_bytes().splitlines(True)
                           if line.startswith((b"ATOM", b"TER", b"END")))
        try:
            with _quiet():
                rigid, _ = receptor_pdbqt(receptor.name, protein)
        except DockingError as exc:
            return cls(reason=str(exc).splitlines()[0])
        vina = Vina(sf_name="vina", cpu=1, seed=1, verbosity=0)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "receptor.pdbqt"
            path.write_text(rigid)
            vina.set_receptor(str(path))
        xyz = Chem.RemoveHs(reference, sanitize=False).GetConformer().GetPositions()
        vina.compute_vina_maps(center=((xyz.min(0) + xyz.max(0)) / 2).tolist(),
                               box_size=(xyz.max(0) - xyz.min(0) + 16.0).tolist())
        return cls(vina)

    def optimised(self, posed) -> tuple:
        """(the PosedLigand with Vina's locally optimised pose, median heavy-atom shift from the embedded pose in Å)."""
        from meeko import MoleculePreparation, PDBQTMolecule, PDBQTWriterLegacy, RDKitMolCreate
        from rdkit import Chem

        if not posed.ok:
            return posed, float("nan")
        if self._vina is None:
            return dataclasses.replace(posed, molecule=None, error=self._reason,
                                       error_kind="ReceptorNotPrepared"), float("nan")
        with _quiet():
            text, ok, error = PDBQTWriterLegacy.write_string(MoleculePreparation().prepare(posed.molecule)[0])
            self._vina.set_ligand_from_string(text)
            self._vina.optimize()
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "optimised.pdbqt"
                self._vina.write_pose(str(path), overwrite=True)
                (molecule,) = RDKitMolCreate.from_pdbqt_mol(PDBQTMolecule(path.read_text(), skip_typing=True))
        embedded, moved = Chem.RemoveHs(posed.molecule), Chem.RemoveHs(molecule)
        match = list(moved.GetSubstructMatch(embedded))
        shift = float(np.median(np.linalg.norm(moved.GetConformer().GetPositions()[match]
                                               - embedded.GetConformer().GetPositions(), axis=1))) if match else math.nan
        return dataclasses.replace(posed, molecule=molecule), shift


@contextlib.contextmanager
def _quiet():
    """Meeko's and Vina's printing and warnings kept out of the table."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _predicted(model, receptor: Path, mols: list) -> list[float]:
    from geomol.api import predict_affinity

    present = [i for i, m in enumerate(mols) if m is not None]
    records = predict_affinity(receptor, [mols[i] for i in present], model=model) if present else []
    out = [float("nan")] * len(mols)
    for i, record in zip(present, records):
        out[i] = record.pK
    return out


def _spearman(model, row: dict, experts: list, poses: dict) -> dict | None:
    """Per-series Spearman of predicted pK vs −ΔG from expert and generated poses, on the ligands all of them predict."""
    from scipy.stats import spearmanr

    measured = [-float(m.GetProp("r_exp_dg")) if m.HasProp("r_exp_dg") else float("nan") for m in experts]
    receptor = FEP / row["group"] / f"{row['scheme']}_protein.pdb"
    predicted = {"expert": _predicted(model, receptor, experts)}
    predicted |= {way: _predicted(model, receptor, mols) for way, mols in poses.items()}
    common = [i for i in range(len(experts))
              if np.isfinite(measured[i]) and all(np.isfinite(p[i]) for p in predicted.values())]
    if len(common) < 4:
        return None
    out = {"series": f"{row['group']}/{row['scheme']}", "ligands": len(common)}
    for kind, values in predicted.items():
        out[kind] = float(spearmanr([values[i] for i in common], [measured[i] for i in common])[0])
    return out


def _fractions(rows: list[dict], prefix: str = "") -> dict:
    """Fractions of the rows with a clash error, any flagged clash, and overlapping atoms."""
    from geomol.data.chemistry.checks import CLASH_DISTANCE, CLOSE_CONTACT_DISTANCE, OVERLAP_DISTANCE

    near = np.array([r[f"{prefix}min_receptor_distance"] for r in rows])
    non_metal = np.array([r[f"{prefix}min_non_metal_distance"] for r in rows])
    intra = np.array([r[f"{prefix}min_intra_distance"] for r in rows])
    flagged = (near < CLASH_DISTANCE) | (non_metal < CLOSE_CONTACT_DISTANCE)
    return {"ligands": len(rows), "fraction_clash_under_1_5A": float(np.mean(near < CLASH_DISTANCE)),
            "fraction_clash_under_2_2A": float(np.mean(flagged)),
            "fraction_overlapping_atoms": float(np.mean(intra < OVERLAP_DISTANCE))}


def _core_relaxed(posed: list[dict]) -> dict:
    """How many poses had their core moved off the reference (a receptor contact the reference has), by how much (Å)."""
    relaxed = [r for r in posed if r["core_relaxed"]]
    out = {"poses": len(relaxed), "series": sorted({r["series"] for r in relaxed})}
    if relaxed:
        out |= {"max_shift_A": max(r["core_max_shift"] for r in relaxed),
                "median_max_shift_A": float(np.median([r["core_max_shift"] for r in relaxed])),
                "median_rms_shift_A": float(np.median([r["core_rms_shift"] for r in relaxed]))}
    return out


def _summary(rows: list[dict], correlations: list[dict], way: str) -> dict:
    mine = [r for r in rows if r["way"] == way]
    posed = [r for r in mine if not r["error"]]
    rmsd = np.array([r["rmsd"] for r in posed if np.isfinite(r["rmsd"])])
    shifts = np.array([r["median_atom_shift"] for r in posed])
    failed: dict[str, int] = {}
    for r in mine:
        if r["error"]:
            failed[r["error_kind"]] = failed.get(r["error_kind"], 0) + 1
    summary = {"ligands": len(mine), "posed": len(posed), "failed": len(mine) - len(posed), "failed_by_kind": failed,
               "median_rmsd_A": float(np.median(rmsd)), "mean_rmsd_A": float(rmsd.mean()),
               "fraction_under_2A": float((rmsd < 2).mean()), "fraction_under_1A": float((rmsd < 1).mean()),
               "fraction_under_2A_nearest_alternative": float(np.mean([r["rmsd_nearest_alternative"] < 2
                                                                       for r in posed])),
               "median_core_atoms": float(np.median([r["core_atoms"] for r in posed])),
               "median_core_rmsd_A": float(np.median([r["core_rmsd"] for r in posed])),
               "mean_cpu_seconds_per_ligand": statistics.fmean(r["cpu_seconds"] for r in mine),
               "median_cpu_seconds_per_ligand": statistics.median(r["cpu_seconds"] for r in mine),
               "p99_cpu_seconds_per_ligand": float(np.percentile([r["cpu_seconds"] for r in mine], 99)),
               "median_atom_shift_A": (float(np.nanmedian(shifts)) if np.isfinite(shifts).any() else None),
               "series_setup_cpu_seconds": sorted({r["series_setup_cpu_seconds"] for r in mine}),
               "core_relaxed": _core_relaxed(posed),
               "contacts": _fractions(posed),
               "contacts_reference_clean": _fractions([r for r in posed if not r["reference_clashes"]])}
    usable = [c for c in correlations if np.isfinite(c["expert"]) and np.isfinite(c[way])]
    if usable:
        summary |= {"spearman_series": len(usable), "mean_spearman_expert": statistics.fmean(c["expert"] for c in usable),
                    "mean_spearman_generated": statistics.fmean(c[way] for c in usable)}
    return summary


def _print(summaries: dict, experts: dict, series: int) -> None:
    print(f"{series} series")
    print(f"{'poses':<10}{'failed':>7}{'med RMSD':>9}{'< 2 Å':>7}{'clash<1.5':>10}{'clash<2.2':>10}{'overlap':>8}"
          f"{'CPU s':>7}{'Spearman':>9}")
    for way, s in summaries.items():
        c = s["contacts"]
        print(f"{way:<10}{s['failed']:>7}{s['median_rmsd_A']:>7.2f} Å{s['fraction_under_2A']:>7.1%}"
              f"{c['fraction_clash_under_1_5A']:>10.1%}{c['fraction_clash_under_2_2A']:>10.1%}"
              f"{c['fraction_overlapping_atoms']:>8.1%}{s['mean_cpu_seconds_per_ligand']:>7.3f}"
              f"{s.get('mean_spearman_generated', float('nan')):>9.3f}")
    print(f"{'expert':<10}{'':>7}{'':>9}{'':>7}{experts['fraction_clash_under_1_5A']:>10.1%}"
          f"{experts['fraction_clash_under_2_2A']:>10.1%}{experts['fraction_overlapping_atoms']:>8.1%}{'':>7}"
          f"{next(iter(summaries.values())).get('mean_spearman_expert', float('nan')):>9.3f}")
    for way, s in summaries.items():
        relaxed = s["core_relaxed"]
        if relaxed["poses"]:
            print(f"{way}: core relaxed off the reference in {relaxed['poses']} poses ({len(relaxed['series'])} series), "
                  f"core atom shift median {relaxed['median_max_shift_A']:.2f} Å (RMS {relaxed['median_rms_shift_A']:.2f}"
                  f" Å), largest {relaxed['max_shift_A']:.2f} Å")
        c = s["contacts_reference_clean"]
        print(f"{way}, series whose reference does not clash ({c['ligands']} poses): clash < 1.5 Å "
              f"{c['fraction_clash_under_1_5A']:.1%}, < 2.2 Å {c['fraction_clash_under_2_2A']:.1%}, overlapping "
              f"{c['fraction_overlapping_atoms']:.1%}")


def _parameters(args) -> dict:
    from geomol.data.posing.poses import PoseParameters
    from geomol.data.posing.refinement import RefinementParameters

    def parsed(cls, items: list[str]) -> dict:
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        casts = {"int": int, "float": float, "bool": lambda v: v.lower() in ("1", "true", "yes"), "str": str}
        chosen = dict(item.split("=", 1) for item in items)
        return {k: casts[types[k]](v) for k, v in chosen.items()}

    pose = parsed(PoseParameters, args.parameter)
    refinement = RefinementParameters(**parsed(RefinementParameters, args.refinement_parameter))
    ways = {"unrefined": PoseParameters(**pose, refinement=None), "refined": PoseParameters(**pose, refinement=refinement),
            "vina": PoseParameters(**pose, refinement=None)}  # the embedded pose, then Vina's local optimisation
    return {way: ways[way] for way in args.ways}


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--series", nargs="+", metavar="SCHEME", help="series by file naming scheme (cdk2: every "
                        "group's) or group/scheme (jacs_set/cdk2)")
    parser.add_argument("--limit", type=int, help="this many series, evenly spaced over the metadata order")
    parser.add_argument("--parameter", nargs="+", default=[], metavar="KEY=VALUE",
                        help="PoseParameters fields other than their defaults (e.g. conformers=16)")
    parser.add_argument("--refinement-parameter", nargs="+", default=[], metavar="KEY=VALUE",
                        help="RefinementParameters fields other than their defaults (e.g. iterations=200)")
    parser.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS[:2]),
                        help="which posings to run (default: unrefined refined; vina: the embedded pose locally "
                             "optimised by AutoDock Vina, the alternative to refinement, needs vina and meeko)")
    parser.add_argument("--model", default="default", help="affinity model for the Spearman comparison")
    parser.add_argument("--no-affinity", action="store_true", help="skip the affinity comparison")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "poses.json")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from geomol.inference import load_model
    from geomol.provenance import provenance

    torch.set_num_threads(1)
    parameters = _parameters(args)
    model = None if args.no_affinity else load_model(args.model)
    rows, correlations, series = [], [], _series(args)
    start = time.perf_counter()
    for row in series:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # counted reader warnings of the prepared proteins
            series_rows, experts, poses, _ = _pose_series(row, parameters)
            rows += series_rows
            correlation = _spearman(model, row, experts, poses) if model is not None else None
        if correlation:
            correlations.append(correlation)
        done = {way: [r["rmsd"] for r in series_rows if r["way"] == way and not r["error"]] for way in parameters}
        print(f"{row['group'] + '/' + row['scheme']:<50}{len(experts):>4} ligands  median RMSD "
              + ", ".join(f"{way} {np.nanmedian(d) if d else float('nan'):.2f} Å" for way, d in done.items()),
              flush=True)
    summaries = {way: _summary(rows, correlations, way) for way in parameters}
    first = next(iter(parameters))
    expert_rows = [r for r in rows if r["way"] == first]
    experts = _fractions(expert_rows, "expert_")
    _print(summaries, experts, len(series))
    record = {"benchmark": "poses", "provenance": provenance(), "rdkit_embedding_threads": 1,
              "parameters": {way: p.to_dict() for way, p in parameters.items()},
              "model": None if model is None else args.model, "series": [f"{r['group']}/{r['scheme']}" for r in series],
              "wall_seconds": round(time.perf_counter() - start, 1), "summary": summaries,
              "expert_contacts": experts,
              "expert_contacts_reference_clean": _fractions([r for r in expert_rows if not r["reference_clashes"]],
                                                            "expert_"),
              "spearman_per_series": correlations, "ligands": rows}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=1, default=float) + "\n")
    print(f"written {args.output.relative_to(REPO) if args.output.is_relative_to(REPO) else args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
