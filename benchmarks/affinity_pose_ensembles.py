"""Zero-shot from SMILES: pose ensembles, each series scored by the default model's member that never saw its protein.

For every series of ``--source`` (the FEP+ benchmark, or Uni-FEP) in a test fold of the corpus protocol with more
than ``--min-ligands`` ligands (``--max-series``: a seeded sample), every ligand is posed from its SMILES (the
corpus' canonical SMILES) on the series' reference ligand (FEP+: its first ligand, which is not scored; Uni-FEP: its
``ref_ligand.sdf``), refined in the pocket as ``predict-affinity --reference`` does, once per posing seed
``--seeds`` (:class:`~geomol.data.posing.poses.PoseParameters` ``seed``). Every pose, and every expert pose where
the series has them, is scored by the default model's member of the series' test fold (trained without its protein
cluster), and one ligand's pose scores are pooled (:mod:`geomol.evaluation.pose_ensembles`: seed 0 alone, mean,
max, median). Printed: the mean per-series Spearman of each pool and of the expert poses (series with at least
``--min-ligands`` ligands posed every way), and each pool's paired difference to the single pose. Poses are written
once per series and seed under ``--work-dir`` (SD files) and read back on a rerun. Usage::

    OMP_NUM_THREADS=1 nice -n 15 python benchmarks/affinity_pose_ensembles.py --seeds 0 1 2 3 \\
        --output benchmarks/results/affinity_pose_ensembles.json
    OMP_NUM_THREADS=1 nice -n 15 python benchmarks/affinity_pose_ensembles.py --source uni_fep --max-series 40 \\
        --work-dir runs/pose_ensembles_uni_fep --output benchmarks/results/affinity_pose_ensembles_uni_fep.json
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


def _fold_of_series(root: Path, cache_dir: str | None) -> dict[str, int]:
    """The test fold of every corpus series in the protocol's folds (:mod:`geomol.evaluation.corpus_folds`)."""
    from geomol.data.datasets.corpus_items import SOURCES
    from geomol.evaluation.corpus_folds import PROTOCOL_SEED, checked_folds, load_items

    items, clusters = load_items(root, list(SOURCES), None, cache_dir)
    _, fold_of = checked_folds(items, clusters, 5, PROTOCOL_SEED)
    return {item.series: int(fold) for item, fold in zip(items, fold_of)}


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


def score_series(items, member_model, seeds, work: Path) -> dict:
    """Every ligand of one series (its corpus items) posed from SMILES once per seed and scored with every pose; the
    expert poses scored too where the series has them."""
    from geomol.data.io import read_ligands, read_structure
    from geomol.data.posing.poses import PoseParameters, PoseTemplate

    first = items[0]
    posed_series = not first.reference  # FEP+: the series' first ligand in its SD file is the reference
    experts = read_ligands(first.pose) if posed_series else None
    reference = experts[0] if posed_series else read_ligands(first.reference)[0]
    if posed_series:  # the reference itself is not scored
        items = [item for item in items if item.pose_index != 0]
    receptor_path = Path(first.receptor)
    receptor = read_structure(receptor_path)
    names = [f"{i}:{item.ligand}" for i, item in enumerate(items)]
    scores = np.full((len(items), len(seeds)), np.nan)
    for column, seed in enumerate(seeds):
        template = PoseTemplate(reference, receptor, PoseParameters(seed=seed))
        posed = _poses(template, names, [item.smiles for item in items],
                       work / first.series.replace("/", "__") / f"seed{seed}.sdf")
        scores[:, column] = _scores(member_model, receptor_path, [posed.get(n) for n in names])
    expert = (_scores(member_model, receptor_path, [experts[item.pose_index] for item in items]) if posed_series
              else np.full(len(items), np.nan))
    return {"measured": [item.label for item in items], "scores": scores.tolist(), "expert": expert.tolist(),
            "names": names}


def _chosen_series(args, fold_of: dict[str, int]) -> dict[str, list]:
    """The corpus items of every series of ``--source`` in a test fold with at least ``--min-ligands`` ligands (a
    seeded sample of ``--max-series`` of them when given), by series."""
    from geomol.data.datasets.corpus import read_corpus

    by_series = {}
    for item in read_corpus(args.root, [args.source]).items:
        by_series.setdefault(item.series, []).append(item)
    keys = sorted(k for k, v in by_series.items() if k in fold_of and len(v) > args.min_ligands
                  and (not args.series or k.split("/", 1)[1] in args.series))
    if args.max_series and len(keys) > args.max_series:
        keys = sorted(np.random.default_rng(args.seed).choice(keys, size=args.max_series, replace=False).tolist())
    return {k: by_series[k] for k in keys}


def run(args) -> dict:
    from geomol.api import load_model
    from geomol.evaluation.kshot_corpus import member_of_fold
    from geomol.inference.affinity_model import AffinityModel

    clock = time.process_time()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    fold_of = _fold_of_series(args.root, args.cache_dir)
    model = load_model(args.model)
    done_path = args.work_dir / "series.jsonl"
    done = {r["series"]: r for r in map(json.loads, done_path.open())} if done_path.exists() else {}
    chosen = _chosen_series(args, fold_of)
    for key, items in chosen.items():
        if key in done:
            continue
        member = member_of_fold(model, fold_of[key])
        single = AffinityModel([member], model.arguments, model.recipe, domain=model.domain, name=model.name)
        record = {"series": key, "fold": fold_of[key], "seeds": args.seeds,
                  **score_series(items, single, args.seeds, args.work_dir)}
        with done_path.open("a") as out:
            out.write(json.dumps(record) + "\n")
        done[key] = record
        print(f"{key}: {len(record['names'])} ligands, {time.process_time() - clock:.0f} CPU s", flush=True)
    rows = []
    for key in chosen:
        record = done[key]
        scores = np.asarray(record["scores"], dtype=float)[:, :len(args.seeds)]
        expert = record["expert"] if np.isfinite(record["expert"]).any() else None
        found = series_scores(record["measured"], scores, expert, args.min_ligands)
        if found is not None:
            rows.append({"series": key, **found})
    names = (["expert"] if rows and "expert" in rows[0] else []) + list(POOLS)
    summary = summarise_pools(rows, names)
    print(f"{len(rows)} series with at least {args.min_ligands} ligands posed every way; mean Spearman:")
    for name, s in summary.items():
        print(f"  {name:<8} {s['mean_spearman']:.3f}  (− single pose: {s['minus_single']:+.3f} ± "
              f"{s['minus_single_se']:.3f})")
    return {"description": f"{args.source} series posed from SMILES on their reference ligand, one refined pose per "
                           "seed, scored by the default model's member of the series' test fold; per-series "
                           "Spearman of each pool", "source": args.source,
            "seeds": args.seeds, "model": args.model, "summary": summary, "series": rows,
            "cpu_seconds": time.process_time() - clock, "provenance": provenance()}


def build_args(argv=None) -> argparse.Namespace:
    from geomol.data.paths import shared_data_dir

    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--model", default="default")
    parser.add_argument("--source", choices=("fep_benchmark", "uni_fep"), default="fep_benchmark")
    parser.add_argument("--series", nargs="+", default=None, help="only these series (without the source)")
    parser.add_argument("--max-series", type=int, default=None, help="a seeded sample of this many series")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed")
    parser.add_argument("--min-ligands", type=int, default=10)
    parser.add_argument("--root", type=Path, default=shared_data_dir(), help="the corpus' shared data folder")
    parser.add_argument("--cache-dir", default=None, help="where the protein clusters are cached")
    parser.add_argument("--work-dir", type=Path, default=REPO / "runs" / "pose_ensembles")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "affinity_pose_ensembles.json")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    return run_and_write(run, build_args, argv)


if __name__ == "__main__":
    sys.exit(main() and 0)
