"""Zero-shot from SMILES: pose ensembles on the FEP+ benchmark series, scored by the fold member that never saw them.

For every series of ``../shared/data/fep_benchmark`` whose protein is in a test fold of the corpus protocol (all of
them), its first ligand is the reference and every other ligand is posed from its SMILES (RDKit SMILES of the expert
pose, hydrogens removed) on it, refined in the pocket as ``predict-affinity --reference`` does, once per posing seed
``--seeds`` (:class:`~geomol.data.posing.poses.PoseParameters` ``seed``). Every pose, and every expert pose, is
scored by the default model's member of the series' test fold (trained without its protein cluster), and one
ligand's pose scores are pooled (:mod:`geomol.evaluation.pose_ensembles`: seed 0 alone, mean, max, median).
Printed: the mean per-series Spearman of each pool and of the expert poses (series with at least 10 ligands posed
every way), and each pool's paired difference to the single pose. Poses are written once per series and seed under
``--work-dir`` (SD files) and read back on a rerun. Usage::

    OMP_NUM_THREADS=1 nice -n 15 python benchmarks/affinity_pose_ensembles.py --seeds 0 1 2 3 \\
        --output benchmarks/results/affinity_pose_ensembles.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from geomol.evaluation.fewshot import run_and_write
from geomol.evaluation.pose_ensembles import POOLS, series_scores, summarise_pools
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]


def _fold_of_series(work: Path) -> dict[str, int]:
    """The test fold of every corpus series, from the k-shot protocol's featurised corpus
    (``benchmarks/affinity_kshot.py`` writes it)."""
    from geomol.evaluation.kshot_corpus import KShotCorpus

    corpus = KShotCorpus.load(work / "corpus.pt")
    out = {}
    for fold, parts in enumerate(corpus.folds):
        for i in parts["test"]:
            out[str(corpus.data.keys[i])] = fold
    return out


def _poses(template, names, smiles, path: Path):
    """The posed molecules by name (written to ``path`` once, read back afterwards)."""
    from geomol.data.io import read_ligands
    from geomol.data.posing.poses import write_poses

    if not path.exists():
        write_poses(path, template.pose_all(list(zip(names, smiles))))
    return {m.GetProp("_Name"): m for m in read_ligands(path)} if path.stat().st_size else {}


def _scores(model, receptor: Path, mols: list) -> np.ndarray:
    from geomol.api import predict_affinity

    present = [i for i, m in enumerate(mols) if m is not None]
    out = np.full(len(mols), np.nan)
    if present:
        for i, record in zip(present, predict_affinity(receptor, [mols[i] for i in present], model=model)):
            out[i] = record.pK if record.ok else np.nan
    return out


def score_series(entry, root: Path, member_model, seeds, work: Path) -> dict:
    from rdkit import Chem

    from geomol.data.io import read_ligands, read_structure
    from geomol.data.posing.poses import PoseParameters, PoseTemplate
    from geomol.units import pk_from_dg

    receptor_path, experts = entry.path(root, "protein.pdb"), read_ligands(entry.path(root, "ligands.sdf"))
    receptor = read_structure(receptor_path)
    ligands = experts[1:]
    names = [f"{i}:{m.GetProp('_Name')}" for i, m in enumerate(ligands, start=1)]
    smiles = [Chem.MolToSmiles(Chem.RemoveHs(m, sanitize=False)) for m in ligands]
    measured = [pk_from_dg(float(m.GetProp("r_exp_dg"))) if m.HasProp("r_exp_dg") else np.nan for m in ligands]
    scores = np.full((len(ligands), len(seeds)), np.nan)
    for column, seed in enumerate(seeds):
        template = PoseTemplate(experts[0], receptor, PoseParameters(seed=seed))
        posed = _poses(template, names, smiles, work / entry.id.replace("/", "__") / f"seed{seed}.sdf")
        scores[:, column] = _scores(member_model, receptor_path, [posed.get(n) for n in names])
    expert = _scores(member_model, receptor_path, ligands)
    return {"measured": measured, "scores": scores.tolist(), "expert": expert.tolist(), "names": names}


def run(args) -> dict:
    from geomol.api import load_model
    from geomol.data.datasets.fep_benchmark import read_fep_metadata
    from geomol.evaluation.kshot_corpus import member_of_fold
    from geomol.inference.affinity_model import AffinityModel

    clock = time.process_time()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    fold_of = _fold_of_series(args.kshot_dir)
    model = load_model(args.model)
    done_path = args.work_dir / "series.jsonl"
    done = {r["series"]: r for r in map(json.loads, done_path.open())} if done_path.exists() else {}
    for entry in read_fep_metadata(args.fep_root):
        key = f"fep_benchmark/{entry.id}"
        if key in done or key not in fold_of or (args.series and entry.id not in args.series):
            continue
        member = member_of_fold(model, fold_of[key])
        single = AffinityModel([member], model.arguments, model.recipe, domain=model.domain, name=model.name)
        record = {"series": key, "fold": fold_of[key], "seeds": args.seeds,
                  **score_series(entry, args.fep_root, single, args.seeds, args.work_dir)}
        with done_path.open("a") as out:
            out.write(json.dumps(record) + "\n")
        done[key] = record
        print(f"{key}: {len(record['names'])} ligands, {time.process_time() - clock:.0f} CPU s", flush=True)
    rows = []
    for key, record in done.items():
        scores = np.asarray(record["scores"], dtype=float)[:, :len(args.seeds)]
        found = series_scores(record["measured"], scores, record["expert"], args.min_ligands)
        if found is not None:
            rows.append({"series": key, **found})
    summary = summarise_pools(rows, ["expert", *POOLS])
    print(f"{len(rows)} series with at least {args.min_ligands} ligands posed every way; mean Spearman:")
    for name, s in summary.items():
        print(f"  {name:<8} {s['mean_spearman']:.3f}  (− single pose: {s['minus_single']:+.3f} ± "
              f"{s['minus_single_se']:.3f})")
    return {"description": "FEP+ series posed from SMILES on their first ligand, one refined pose per seed, scored by "
                           "the default model's member of the series' test fold; per-series Spearman of each pool",
            "seeds": args.seeds, "model": args.model, "summary": summary, "series": rows,
            "cpu_seconds": time.process_time() - clock, "provenance": provenance()}


def build_args(argv=None) -> argparse.Namespace:
    from geomol.data.paths import shared_data_dir

    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--model", default="default")
    parser.add_argument("--series", nargs="+", default=None, help="only these FEP+ series (group/scheme)")
    parser.add_argument("--min-ligands", type=int, default=10)
    parser.add_argument("--fep-root", type=Path, default=shared_data_dir() / "fep_benchmark")
    parser.add_argument("--kshot-dir", type=Path, default=REPO / "runs" / "kshot",
                        help="work folder of affinity_kshot.py (the corpus' folds)")
    parser.add_argument("--work-dir", type=Path, default=REPO / "runs" / "pose_ensembles")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "affinity_pose_ensembles.json")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    return run_and_write(run, build_args, argv)


if __name__ == "__main__":
    sys.exit(main() and 0)
