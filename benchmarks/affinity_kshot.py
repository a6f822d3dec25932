"""k measured ligands of an unseen target: every method of the k-shot protocol in the corpus cross-validation.

The base model is the shipped default model, ``contact-corpus``: its member k was trained on fold k's training
clusters, so on fold k's validation and test series it predicts proteins it has never seen
(:mod:`geomol.evaluation.kshot_corpus`). Per fold:

1. the methods' settings (the residual model's and the ligand-only Gaussian process's priors, the anchored average's
   exponent) are fitted on the fold's *validation* series, every source, never on its test series
   (:func:`~geomol.evaluation.anchor_fit.fit_settings`);
2. the anchoring methods are scored on the same validation series (to choose the one ``predict-affinity --anchors``
   uses per budget, :data:`CHOICES`), and every method (:data:`~geomol.evaluation.kshot.KSHOT_METHODS`) on the
   fold's *test* series of the data sets asked for (``--sources``; ``--sample``: a seeded sample of a large source's,
   fine-tuning being the costly method): ``--draws`` random draws of k measured ligands per budget ``--k``
   (``--source-draws`` for some sources), Spearman on the rest and the ± 's coverage (:mod:`geomol.evaluation.kshot`).

Then one table per data set (FEP+ benchmark series, Uni-FEP series posed from SMILES, PLB), the method chosen per
budget on validation series and its test figures, and the settings fitted on every fold's validation series
together (what ships in the model's manifest, ``metrics.anchoring``, with ``--write-manifest``). The featurised
corpus, fitted settings and rows are kept under ``--work-dir``: rerun the same command to resume. ``--featurise``
featurises only some sources' items (the validation series then come from those sources alone), the folds still the
whole corpus's (``--stored-only``: only their items already in the processed store, the others counted). Usage::

    OMP_NUM_THREADS=1 nice -n 15 python benchmarks/affinity_kshot.py --output benchmarks/results/affinity_kshot.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from pathlib import Path

import numpy as np

from geomol.benchmarking.run_record import checkout_relative
from geomol.evaluation.anchor_fit import fit_settings
from geomol.evaluation.fewshot import run_and_write
from geomol.evaluation.kshot import KSHOT_METHODS, KShotSettings, series_rows
from geomol.evaluation.kshot_corpus import fold_series, member_of_fold, read_kshot_corpus
from geomol.evaluation.kshot_summary import (anchoring_record, anchoring_text, choose_methods, format_kshot,
                                            summarise_kshot)
from geomol.inference.anchoring import AnchorKernel
from geomol.inference.interval_scale import IntervalScale
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
GROUPS = {"FEP+ benchmark (expert poses)": ("fep_benchmark",), "Uni-FEP (posed from SMILES)": ("uni_fep",),
          "PLB (expert poses)": ("plb",), "BindingDB (docked poses)": ("ddg_bindingdb",)}
GROUPS_ALL = ("plb", "fep_benchmark", "uni_fep", "ddg_bindingdb")
CHOICES = ("base", "anchored", "residual")
"""What ``predict-affinity --anchors`` may use, chosen per budget on validation series. Fine-tuning is not among them:
on validation series of the same folds ``geomol finetune``'s rule gained +0.011 to +0.035 over the base model
(``benchmarks/results/affinity_fewshot_decision.json``), and scoring it there again would cost most of the run."""
VALID_METHODS = ("base", "anchored", "residual", "ligand_gp")
"""What is scored on validation series (to choose among :data:`CHOICES`, and as a reference)."""


def _settings(path: Path, series, args) -> tuple[KShotSettings, dict]:
    if path.exists():
        saved = json.loads(path.read_text())
        return KShotSettings(AnchorKernel.from_dict(saved["kernel"]), AnchorKernel.from_dict(saved["ligand_kernel"]),
                             float(saved["power"]), interval=IntervalScale.from_dict(saved.get("interval_scale"))), saved
    settings, record = fit_settings(series, ks=args.fit_k, draws=args.valid_draws, seed=args.seed)
    record["power"] = settings.power
    path.write_text(json.dumps(record, indent=1) + "\n")
    return settings, record


def _sampled(test: dict[int, list], sample: dict[str, int], seed: int) -> set[str]:
    """The test series scored: all, except for the sources of ``sample``, a seeded sample of that many of theirs."""
    keys = sorted(s.target for series in test.values() for s in series)
    out = {k for k in keys if k.split("/", 1)[0] not in sample}
    rng = np.random.default_rng(seed)
    for source, count in sorted(sample.items()):
        mine = [k for k in keys if k.split("/", 1)[0] == source]
        out |= set(rng.choice(mine, size=min(count, len(mine)), replace=False).tolist()) if mine else set()
    return out


def _per_source(values: list[str]) -> dict[str, int]:
    try:
        return {source: int(count) for source, count in (value.split("=", 1) for value in values)}
    except ValueError:
        raise SystemExit(f"expected SOURCE=N, got {values}") from None


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open()] if path.exists() else []


def run(args) -> dict:
    from geomol.api import load_model

    clock = time.process_time()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    corpus = read_kshot_corpus(args.config, args.work_dir, args.cache_dir, args.featurise, args.stored_only)
    print(f"corpus: {len(corpus.ids)} complexes ({corpus.left_out or 'none'} left out: not in the store), "
          f"{time.process_time() - clock:.0f} CPU s", flush=True)
    model = load_model(args.model)
    rows_path = args.work_dir / "rows.jsonl"
    rows = _rows(rows_path)
    done = {(r["phase"], r["fold"], r["target"]) for r in rows}
    fitted, all_valid, phases = {}, [], {}
    for fold in args.folds:
        member = member_of_fold(model, fold)
        valid = fold_series(corpus, member, fold, "valid")
        all_valid += valid
        settings, fitted[fold] = _settings(args.work_dir / f"settings_fold{fold}.json", valid, args)
        print(f"fold {fold}: {len(valid)} validation series, settings {fitted[fold]}", flush=True)
        phases[fold] = (settings, valid, fold_series(corpus, member, fold, "test", sources=args.sources))
    sampled = _sampled({fold: test for fold, (_, _, test) in phases.items()}, args.sample, args.seed)
    for fold, (settings, valid, test) in phases.items():
        for phase, series in (("valid", valid), ("test", [s for s in test if s.target in sampled])):
            for s in series:
                if (phase, fold, s.target) in done:
                    continue
                draws = args.valid_draws if phase == "valid" else args.source_draws.get(s.source, args.draws)
                rng = np.random.default_rng([args.seed, fold, zlib.crc32(s.target.encode())])
                new = [{"phase": phase, **row} for row in series_rows(
                    s, args.k, draws, rng, settings, VALID_METHODS if phase == "valid" else KSHOT_METHODS)]
                with rows_path.open("a") as out:
                    out.writelines(json.dumps(r) + "\n" for r in new)
                rows += new
                print(f"fold {fold} {phase} {s.target} ({len(s)} ligands): {time.process_time() - clock:.0f} CPU s",
                      flush=True)
    test_rows = [r for r in rows if r["phase"] == "test" and r["fold"] in args.folds]
    valid_rows = [r for r in rows if r["phase"] == "valid" and r["fold"] in args.folds]
    chosen = choose_methods(valid_rows, args.k, CHOICES)
    groups = {name: sources for name, sources in GROUPS.items() if set(sources) & set(args.sources)}
    groups["all scored test series"] = tuple(args.sources)
    summary = summarise_kshot(test_rows, groups, args.k)
    valid_summary = summarise_kshot(valid_rows, {"validation series (all sources)": tuple(GROUPS_ALL)}, args.k)
    print("validation series (settings and methods chosen here):\n" + format_kshot(valid_summary))
    print("method chosen per k on validation series: " + ", ".join(f"k={k}: {m}" for k, m in chosen.items()))
    print("test series (evaluated once):\n" + format_kshot(summary))
    shipped, shipped_record = fit_settings(all_valid, ks=args.fit_k, draws=args.valid_draws, seed=args.seed)
    shipped_record["power"] = shipped.power
    print(f"settings fitted on every fold's validation series: {shipped_record}")
    anchoring = anchoring_record(test_rows, shipped_record, chosen, args.k, args.command)
    if args.write_manifest:
        write_anchoring(args.write_manifest, anchoring)
    return {"description": "k measured ligands of a series of an unseen protein; every method's Spearman on the "
                           "rest (mean over draws, then over targets), differences paired per target",
            "model": args.model, "config": checkout_relative(args.config), "k": args.k, "draws": args.draws,
            "valid_draws": args.valid_draws, "source_draws": args.source_draws, "sample": args.sample,
            "sources": args.sources, "featurised_sources": args.featurise or list(GROUPS_ALL),
            "left_out_not_in_store": corpus.left_out, "folds": args.folds,
            "settings_per_fold": fitted, "methods": list(KSHOT_METHODS), "chosen_on_validation": chosen,
            "validation_summary": valid_summary, "summary": summary, "settings_all_folds": shipped_record,
            "anchoring": anchoring,
            "cpu_seconds": time.process_time() - clock, "rows": rows, "provenance": provenance()}


def write_anchoring(model_dir: Path, anchoring: dict) -> None:
    """Put the anchoring settings into a model directory: its manifest's ``metrics.anchoring`` and its card's section
    (between ``<!-- anchoring -->`` markers, before the limitations when there is none yet)."""
    manifest_path, card_path = model_dir / "manifest.json", model_dir / "README.md"
    manifest = json.loads(manifest_path.read_text())
    manifest.setdefault("metrics", {})["anchoring"] = anchoring
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    card = card_path.read_text()
    section = f"<!-- anchoring -->\n{anchoring_text(anchoring)}<!-- /anchoring -->\n"
    end = "<!-- /anchoring -->\n"
    if "<!-- anchoring -->" in card:
        card = card[:card.index("<!-- anchoring -->")] + section + card[card.index(end) + len(end):]
    else:
        card = card.replace("## Limitations", section + "\n## Limitations", 1)
    card_path.write_text(card)
    print(f"wrote the anchoring settings into {manifest_path} and {card_path}")


def build_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=REPO / "models" / "contact-corpus.yaml",
                        help="the base model's train-affinity config (its members' featurisation)")
    parser.add_argument("--model", default="default", help="the base model: one member per fold of the protocol")
    parser.add_argument("--folds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--k", type=int, nargs="+", default=[0, 3, 5, 10, 20])
    parser.add_argument("--fit-k", type=int, nargs="+", default=[3, 5, 10], help="budgets the exponent is chosen on")
    parser.add_argument("--draws", type=int, default=5, help="draws of k per test series")
    parser.add_argument("--source-draws", nargs="+", default=["uni_fep=3"], metavar="SOURCE=N",
                        help="draws of k per test series of these sources instead")
    parser.add_argument("--sample", nargs="+", default=["uni_fep=100"], metavar="SOURCE=N",
                        help="score a seeded sample of N test series of these sources (fine-tuning's cost)")
    parser.add_argument("--valid-draws", type=int, default=2, help="draws of k per validation series")
    parser.add_argument("--sources", nargs="+", default=["fep_benchmark", "uni_fep", "plb"],
                        help="data sets whose test series are scored")
    parser.add_argument("--featurise", nargs="+", default=None, choices=GROUPS_ALL, metavar="SOURCE",
                        help="featurise only these sources' items (validation series come from them too); the folds "
                             "stay the whole corpus's (default: every source)")
    parser.add_argument("--stored-only", action="store_true",
                        help="with --featurise: only the items already in the processed store (the others left out "
                             "and counted in the output)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--work-dir", type=Path, default=REPO / "runs" / "kshot")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "affinity_kshot.json")
    parser.add_argument("--write-manifest", type=Path, default=None, metavar="MODEL_DIR",
                        help="write the settings fitted on every fold's validation series, the methods chosen and "
                             "their test figures into this model directory (metrics.anchoring and its card)")
    args = parser.parse_args(argv)
    args.source_draws, args.sample = _per_source(args.source_draws), _per_source(args.sample)
    args.command = " ".join(["python", "benchmarks/affinity_kshot.py", *(argv if argv is not None else sys.argv[1:])])
    return args


def main(argv=None) -> dict:
    return run_and_write(run, build_args, argv)


if __name__ == "__main__":
    sys.exit(main() and 0)
