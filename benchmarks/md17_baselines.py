"""EGNO on every generated MD17-protocol molecule: side by side with the official code, and against the baselines.

For each molecule made by ``geomol simulate molecule NAME --out md_data/md17`` and trained by
``benchmarks/egno_accuracy.py --dataset md17`` (EGNO: two seeds next to the official script; the EGNN baseline:
``--model-arg model=egnn --seed 1 --run-dir RUNS/md17_<molecule>_egnn_seed1``), one row:

* side by side: test S2S at the last common epoch budget of both seeds, geomol's and the official script's, and
  whether the gap between the means is within the seed spread (``egno_accuracy_md17_<molecule>_seed*.json``);
* against the baselines, on the MD17 split's test windows (:func:`geomol.evaluation.md17_windows.md17_test_table`):
  geomol's EGNO (its best-validation checkpoint), the EGNN baseline rolled out (its best checkpoint; trained
  through its own eight-step rollout), no motion and linear extrapolation; S2S of each, EGNO's median bond error
  and broken-bond fraction. With ``--teacher RUN`` also the same EGNN trained with teacher forcing (each step
  from the true previous frame, ``--model-arg teacher_forcing=true``) and rolled out freely at test.

With ``--seeds 1 2`` the run folder names hold ``{seed}``: each trained row averages its test S2S over the seeds
whose run reached the epoch budget of the first seed's run (a seed trained shorter is listed as skipped, never
mixed in), every seed's figure is kept, and "below every baseline" compares these means; whether EGNO's gap to
each trained baseline is within the seed spread (the larger range of one side's seeds) is recorded too. Chemistry
is the first seed's.

    python benchmarks/md17_baselines.py --data-dir md_data/md17 --runs runs/egno_accuracy \\
        --output benchmarks/results/md17_baselines.json
    python benchmarks/md17_baselines.py --seeds 1 2 --egno 'md17_{molecule}_seed{seed}_long' \\
        --egnn 'md17_{molecule}_egnn_seed{seed}_long' --output benchmarks/results/md17_baselines_seeds.json

Prints a table and writes the JSON (with provenance). MSE in Å² over heavy atoms and xyz.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from geomol.evaluation.dynamics_cards import gap_and_spread, seed_noise
from geomol.evaluation.learning_curves import seed_runs
from geomol.evaluation.md17_windows import md17_file, md17_test_table
from geomol.provenance import provenance

RESULTS = Path(__file__).resolve().parent / "results"
MOLECULES = ("aspirin", "benzene_old", "ethanol", "malonaldehyde", "naphthalene", "salicylic", "toluene", "uracil")
ROWS = {"EGNO": "EGNO (geomol)", "EGNN": "EGNN baseline, rolled out", "still": "no motion (last frame)",
        "linear": "linear extrapolation", "teacher": "EGNN one-step, teacher-forced, rolled out"}
# where molecule_row finds the side-by-side records (glob under RESULTS) and the runs (folders under --runs)
NAMES = {"records": "egno_accuracy_md17_{molecule}_seed*.json", "egno": "md17_{molecule}_seed1",
         "egnn": "md17_{molecule}_egnn_seed1", "teacher": None}
TRAINED_ROWS = {"egno": "EGNO", "egnn": "EGNN", "teacher": "teacher"}  # run folder name → row


def molecule_row(molecule: str, data_dir: Path, runs: Path, names: dict[str, str] = NAMES,
                 seeds: tuple[int, ...] = (1,)) -> dict:
    """Side-by-side figures and the test table of one molecule (see the module docstring); ``names``: the
    side-by-side records (a glob under benchmarks/results) and the run folders (``egno``, ``egnn`` and, when
    given, ``teacher``), ``{molecule}`` and ``{seed}`` filled in; ``seeds``: the training seeds averaged."""
    records = [json.loads(p.read_text()) for p in sorted(RESULTS.glob(names["records"].format(molecule=molecule)))]
    found = {row: seed_runs(runs, names[run], list(seeds), molecule=molecule)
             for run, row in TRAINED_ROWS.items() if names.get(run)}
    used = {row: runs_of_row for row, (runs_of_row, _) in found.items()}  # row → {seed: (checkpoint, epoch)}
    label = {(row, seed): f"{ROWS[row]}, seed {seed}" for row, by_seed in used.items() for seed in by_seed}
    table = md17_test_table({label[row, seed]: checkpoint for row, by_seed in used.items()
                             for seed, (checkpoint, _) in by_seed.items()}, molecule, data_dir, progress=False)
    per_seed = {row: {seed: table[label[row, seed]].s2s_mse for seed in by_seed} for row, by_seed in used.items()}
    s2s = {**{row: float(np.mean(list(values.values()))) for row, values in per_seed.items()},
           **{row: table[ROWS[row]].s2s_mse for row in ("still", "linear")}}
    chemistry = table[label["EGNO", seeds[0]]].chemistry
    return {"molecule": molecule, "side_by_side": seed_noise(records), "seeds": [r["seed"] for r in records],
            "test_windows": len(table.starts), "s2s": s2s, "s2s_per_seed": per_seed,
            "seeds_skipped": {row: skipped for row, (_, skipped) in found.items() if skipped},
            "epochs": {row: {seed: epoch + 1 for seed, (_, epoch) in by_seed.items()} for row, by_seed in used.items()},
            "checkpoints": {row: {seed: str(checkpoint) for seed, (checkpoint, _) in by_seed.items()}
                            for row, by_seed in used.items()},
            "egno_below_every_baseline": all(s2s["EGNO"] < value for key, value in s2s.items() if key != "EGNO"),
            "egno_against_trained_baselines": {
                row: gap_and_spread(list(per_seed["EGNO"].values()), list(values.values()))
                for row, values in per_seed.items() if row != "EGNO"},
            "egno_bond_error_median_A": chemistry["bond_error_median_A"],
            "egno_broken_bond_fraction": chemistry["broken_bond_fraction"], "table": table.to_dict()}


def noise_word(comparison: dict) -> str:
    """"within" / "outside" the seed spread, "—" with one seed on a side."""
    return {True: "within", False: "outside"}.get(comparison.get("within_noise"), "—")


def print_table(rows: list[dict]) -> None:
    """The rows of :func:`molecule_row`: side by side with the official code (seed means), the test S2S of EGNO and
    the baselines (seed means), EGNO's chemistry, the seeds per trained row and EGNO's gap to the EGNN baseline
    against the seed spread."""
    print(f"{'molecule':<14}{'geomol S2S':>11}{'official':>10}{'noise':>8} |{'EGNO':>9}{'EGNN':>9}{'EGNN TF':>9}"
          f"{'still':>9}{'linear':>10}{'EGNO best':>10}{'bond med':>9}{'broken':>8}{'seeds':>8}"
          f"{'vs EGNN':>9}")
    for row in rows:
        noise = row["side_by_side"] or {}
        g, o = (float(np.mean(noise.get(side) or [np.nan])) for side in ("geomol", "official"))
        within = noise_word(noise)
        s = row["s2s"]
        best = "yes" if row["egno_below_every_baseline"] else "no"
        print(f"{row['molecule']:<14}{g:>11.5f}{o:>10.5f}{within:>8} |{s['EGNO']:>9.5f}{s['EGNN']:>9.5f}"
              f"{s.get('teacher', np.nan):>9.5f}{s['still']:>9.5f}{s['linear']:>10.4g}{best:>10}"
              f"{row['egno_bond_error_median_A']:>9.3f}{100 * row['egno_broken_bond_fraction']:>7.0f}%"
              f"{'/'.join(str(len(seeds)) for seeds in row['s2s_per_seed'].values()):>8}"
              f"{noise_word(row['egno_against_trained_baselines']['EGNN']):>9}")
        for trained_row, skipped in row["seeds_skipped"].items():
            for seed, why in skipped.items():
                print(f"    {row['molecule']} {trained_row} seed {seed} skipped: {why}")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("md_data/md17"), help="md17_<molecule>.npz files")
    parser.add_argument("--runs", type=Path, default=Path("runs/egno_accuracy"), help="egno_accuracy.py run dirs")
    parser.add_argument("--molecules", nargs="+", default=list(MOLECULES))
    parser.add_argument("--output", type=Path, default=RESULTS / "md17_baselines.json")
    helps = {"records": "side-by-side records, a glob under benchmarks/results", "egno": "EGNO run folder under --runs",
             "egnn": "EGNN baseline run folder under --runs",
             "teacher": "teacher-forced EGNN run folder under --runs (its row only when given)"}
    for key, value in NAMES.items():
        parser.add_argument(f"--{key}", default=value,
                            help=f"{helps[key]}; {{molecule}} and {{seed}} are filled in (default {value})")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1],
                        help="training seeds averaged per trained row (the first sets the epoch budget; default 1)")
    args = parser.parse_args()
    names = {key: getattr(args, key) for key in NAMES}
    if len(args.seeds) > 1:
        for run in TRAINED_ROWS:
            if names[run] and "{seed}" not in names[run]:
                parser.error(f"--{run} {names[run]!r} has no {{seed}}, "
                             f"so --seeds {args.seeds} would read one run twice")
    torch.set_num_threads(1)
    rows = []
    for molecule in args.molecules:
        if not md17_file(args.data_dir, molecule).exists():
            print(f"{molecule}: no {md17_file(args.data_dir, molecule)} (geomol simulate molecule {molecule}): skipped")
            continue
        rows.append(molecule_row(molecule, args.data_dir, args.runs, names, tuple(args.seeds)))
    print_table(rows)
    args.output.write_text(json.dumps({"benchmark": "md17_baselines", "provenance": provenance(),
                                       "molecules": rows}, indent=1) + "\n")
    print(f"written {args.output}")


if __name__ == "__main__":
    main()
