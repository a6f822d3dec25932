"""EGNO accuracy per epoch budget: geomol's training next to the official script, on the same data.

geomol trains the shipped recipe (``configs/egno_nbody.yaml``, ``configs/egno_mocap_run.yaml`` or
``configs/egno_md17.yaml``: model, optimiser, batch size; validation every 5 epochs) with a chosen seed and
epoch budget, and
evaluates the test split at every validation, as the official scripts do. The learning curve is
written after every validation (``<run-dir>/curve.json``), so an interrupted run still reports.

With ``--official PATH`` (a checkout of github.com/MinkaiXu/EGNO; or ``$GEOMOL_OFFICIAL_EGNO``) the
official script (``main_simulation_simple_no.py`` / ``main_mocap_no.py`` / ``main_md17_no.py``, its own
config with the epoch budget) is run on the same data, written in the official file layout (N-body:
geomol's simulation as ``loc_/vel_/edges_/charges_*.npy``; Mocap: ``motion_run.pkl`` + ``split_run.pkl``
from the npz; MD17: the ``md17_<mol>.npz`` of ``geomol simulate molecule``, linked into a folder of its
own where the official loader writes its split). ``--official-log FILE`` reads the log of an official
run made earlier instead.

MD17 (``--dataset md17 --molecule aspirin --data-dir md_data/md17``): both sides train with the temporal
convolutions on (the paper's model; the official config leaves them off, so ``use_time_conv`` is set in
the official config written for the run), on the CPU (the official script asserts CUDA: the launcher
lets the assertion pass and sets ``no_cuda``).

The table gives, at each epoch checkpoint, the test MSE at the best validation epoch so far (the
scripts' model selection): S2S (last predicted frame, the official metric) and S2T (mean over the
P frames; the official scripts do not compute it). Epochs are the scripts' 0-based indices.

    python benchmarks/egno_accuracy.py --dataset nbody --epochs 120 [--seed 1] [--official PATH]
    python benchmarks/egno_accuracy.py --dataset mocap --epochs 70 --checkpoints 10 70
    python benchmarks/egno_accuracy.py --dataset md17 --molecule aspirin --data-dir md_data/md17 --epochs 300
    python benchmarks/egno_accuracy.py ... --epochs 600 --resume --run-dir RUN   # continue RUN up to 600 epochs

Writes ``benchmarks/results/egno_accuracy_<dataset>[_<molecule>]_seed<seed>.json`` (command, commit, versions,
threads, machine load, both curves, the table).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from geomol.evaluation.learning_curves import best_so_far, parse_official_log
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("GEOMOL_SHARED_DATA", REPO.parent / "shared" / "data"))
CONFIGS = {"nbody": REPO / "configs" / "egno_nbody.yaml", "mocap": REPO / "configs" / "egno_mocap_run.yaml",
           "md17": REPO / "configs" / "egno_md17.yaml"}
OFFICIAL_SCRIPTS = {"nbody": ("main_simulation_simple_no.py", "config_simulation_simple_no.json"),
                    "mocap": ("main_mocap_no.py", "config_mocap_no.json"),
                    "md17": ("main_md17_no.py", "config_md17_no.json")}
# Official script on its own data, this machine class, 1 thread (../shared/BENCHMARKS.md; issue 15)
RECORDED_OFFICIAL = {"nbody": {120: 0.01109, 240: 0.00879, 370: 0.00784, 425: 0.00745, 535: 0.00720},
                     "mocap": {10: 10.89, 70: 2.80}, "md17": {}}
DEFAULT_CHECKPOINTS = {"nbody": [120, 240, 370, 535], "mocap": [10, 70], "md17": [50, 100, 200, 300]}
MD17 = {"molecule": "aspirin", "data_dir": REPO / "md_data" / "md17"}  # set from the command line
VALIDATION_INTERVAL = 5  # epochs, both recipes


# ------------------------------------------------------------------------------------------- geomol
def _recipe(dataset: str) -> dict:
    import yaml

    return yaml.safe_load(CONFIGS[dataset].read_text())


def _md17_file() -> Path:
    return Path(MD17["data_dir"]) / f"md17_{MD17['molecule']}.npz"


def _data_module(dataset: str, recipe: dict, cache_dir: Path):
    from geomol.tasks import MD17DataModule, MocapDataModule, NBodyDataModule

    args = dict(recipe["data"]["init_args"])
    if dataset == "nbody":
        args["cache_dir"] = str(cache_dir)
        return NBodyDataModule(**args)
    if dataset == "md17":
        args["path"] = str(_md17_file())
        return MD17DataModule(**args)
    args["path"] = str(SHARED_DATA / "mocap_run" / "cmu_subject09_run.npz")
    return MocapDataModule(**args)


def _test_scores(module, loader) -> dict[str, float]:
    """Mean S2S and S2T MSE over a loader's samples, and the S2S of its worst sample and of all the others.

    One test trajectory (N-body test index 996: five equal charges flying apart, far outside the training
    distribution) can dominate the mean by itself; the split into worst sample and the rest shows it.
    """
    import torch

    from geomol.models.dynamics import s2s_mse, s2t_mse

    s2s, s2t = [], []
    with torch.no_grad():
        for batch in loader:
            pred = module(batch)
            s2s.append(s2s_mse(pred, batch.X_target, batch.batch, batch.num_graphs))
            s2t.append(s2t_mse(pred, batch.X_target, batch.batch, batch.num_graphs))
    per_sample = torch.cat(s2s)
    worst = int(per_sample.argmax())
    rest = torch.cat([per_sample[:worst], per_sample[worst + 1:]])
    return {"test_s2s": float(per_sample.mean()), "test_s2t": float(torch.cat(s2t).mean()),
            "test_s2s_median": float(per_sample.median()), "test_worst_index": worst,
            "test_worst_s2s": float(per_sample[worst]), "test_s2s_without_worst": float(rest.mean())}


def train_geomol(dataset: str, epochs: int, seed: int, run_dir: Path,
                 model_overrides: dict | None = None, resume: bool = False) -> list[dict]:
    """Train with the recipe (its model arguments updated with ``model_overrides``); returns per validation
    {epoch, val_s2s, val_s2t, seconds} and the test scores of :func:`_test_scores`.

    ``resume``: continue the run in ``run_dir`` from its ``checkpoints/last.ckpt`` (weights, optimiser, epoch;
    the best-checkpoint state too when ``run_dir`` is the folder the run was made in, not a copy) up to
    ``epochs``, appending to its ``curve.json``; ``seconds`` go on from the earlier run's last entry. The order
    of the training batches after the restart is not the one an uninterrupted run would have drawn."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback, ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger

    from geomol.tasks import DynamicsModule

    recipe = _recipe(dataset)
    model_args = dict(recipe["model"]["init_args"])
    for key in ("lr", "weight_decay"):  # YAML 1.1 reads 1e-08 as a string
        model_args[key] = float(model_args[key])
    model_args.update(model_overrides or {})
    pl.seed_everything(seed)
    module = DynamicsModule(**model_args)  # first draws after seeding: the official initial weights for this seed
    module.hparams["_class_path"] = "geomol.tasks.DynamicsModule"  # as `geomol fit` records it: `geomol test` loads it
    data = _data_module(dataset, recipe, run_dir.parent / "nbody_cache")
    data.seed = seed
    last_checkpoint = run_dir / "checkpoints" / "last.ckpt"
    if resume and not last_checkpoint.is_file():
        raise SystemExit(f"--resume: no {last_checkpoint}")
    curve: list[dict] = json.loads((run_dir / "curve.json").read_text()) if resume else []
    start = time.perf_counter() - (curve[-1]["seconds"] if curve else 0.0)

    class TestAtValidation(Callback):
        """Evaluate the test split after every validation, as the official scripts do."""

        def on_validation_end(self, trainer, pl_module):
            if trainer.sanity_checking:
                return
            metrics = trainer.callback_metrics
            test = _test_scores(pl_module, trainer.datamodule.test_dataloader())
            curve.append({"epoch": trainer.current_epoch, "val_s2s": float(metrics["val/s2s_mse"]),
                          "val_s2t": float(metrics["val/s2t_mse"]), **test,
                          "seconds": round(time.perf_counter() - start, 1)})
            (run_dir / "curve.json").write_text(json.dumps(curve, indent=1) + "\n")

    best = ModelCheckpoint(dirpath=run_dir / "checkpoints", monitor="val/s2s_mse", mode="min", save_top_k=1,
                           filename="best-{epoch}")
    last = ModelCheckpoint(dirpath=run_dir / "checkpoints", filename="last", save_top_k=1,
                           enable_version_counter=False)
    trainer = pl.Trainer(max_epochs=epochs, check_val_every_n_epoch=recipe["trainer"]["check_val_every_n_epoch"],
                         num_sanity_val_steps=0, logger=CSVLogger(run_dir, name="", version=""),
                         callbacks=[TestAtValidation(), best, last], enable_progress_bar=False,
                         enable_model_summary=False, use_distributed_sampler=False, default_root_dir=run_dir)
    trainer.fit(module, data, ckpt_path=last_checkpoint if resume else None)
    return curve


# ----------------------------------------------------------------------------------------- official
def _official_data(dataset: str, folder: Path, cache_dir: Path) -> Path:
    """The benchmark data in the official layout; returns the official ``data_dir``."""
    if dataset == "nbody":
        from geomol.data.datasets.trajectories.nbody import load_or_generate, save_official_files

        save_official_files(load_or_generate(cache_dir), folder / "simple")
        return folder
    if dataset == "md17":  # the same file; the official loader writes <mol>_split.pkl beside it
        folder.mkdir(parents=True, exist_ok=True)
        link = folder / _md17_file().name
        if not link.exists():
            link.symlink_to(_md17_file().resolve())
        return folder
    import pickle

    import numpy as np

    data = np.load(SHARED_DATA / "mocap_run" / "cmu_subject09_run.npz")
    trials = [data[k] for k in sorted(k for k in data.files if k.startswith("trial_"))]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "motion_run.pkl", "wb") as handle:
        pickle.dump((data["bones"].tolist(), trials), handle)
    splits = []
    for name in ("train", "valid", "test"):
        rows = data[f"{name}_starts"]
        splits.append({int(t): rows[rows[:, 0] == t, 1] for t in dict.fromkeys(rows[:, 0].tolist())})
    with open(folder / "split_run.pkl", "wb") as handle:
        pickle.dump(tuple(splits), handle)
    return folder


def run_official(dataset: str, official: Path, epochs: int, seed: int, run_dir: Path) -> tuple[list[dict], str]:
    """Run the official script with its config (epochs and data folder replaced); returns its curve and log."""
    script, config = OFFICIAL_SCRIPTS[dataset]
    official, run_dir = official.resolve(), run_dir.resolve()  # the script runs inside its checkout
    data_dir = _official_data(dataset, run_dir / "official_data", run_dir.parent / "nbody_cache")
    settings = json.loads((official / "configs" / config).read_text())
    settings.update(epochs=epochs, seed=seed, data_dir=str(data_dir), exp_name="benchmark")
    config_file = run_dir / "official_config.json"
    config_args = f"'--config_by_file', '{config_file}'"
    cuda_check = ""
    if dataset == "md17":  # the paper's model on the CPU (see the module notes)
        settings.update(mol=MD17["molecule"], use_time_conv=True, no_cuda=True)
        cuda_check = "torch.cuda.is_available = lambda: True; "
        # main_md17_no.py reads 'configs/' + --config (a flag --config_by_file switches it on)
        config_args = f"'--config_by_file', '--config', '{os.path.relpath(config_file, official / 'configs')}'"
    config_file.write_text(json.dumps(settings, indent=1))
    # numpy 2 removed np.Inf, which the official EarlyStopping uses
    launcher = ("import runpy, sys, numpy, torch; numpy.Inf = numpy.inf; torch.set_num_threads(1); " + cuda_check +
                f"sys.argv = ['{script}', {config_args}, "
                f"'--outf', '{run_dir / 'official_out'}']; runpy.run_path('{official / script}', run_name='__main__')")
    env = dict(os.environ, PYTHONPATH=str(official), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    log_path = run_dir / "official.log"  # written as the script prints: an interrupted run stays readable (--official-log)
    with log_path.open("w") as log:
        done = subprocess.run([sys.executable, "-c", launcher], cwd=official, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise SystemExit(f"official script failed (see {log_path})")
    return parse_official_log(log_path.read_text()), " ".join(["python", script, "--config_by_file", config])


# -------------------------------------------------------------------------------------------- table
def table(dataset: str, checkpoints: list[int], geomol: list[dict], official: list[dict] | None) -> list[dict]:
    rows = []
    last = max([r["epoch"] for r in geomol + (official or [])], default=0)
    for upto in sorted(set(checkpoints + [last])):
        if upto > last:
            continue
        row = {"epoch": upto, "official_recorded_s2s": RECORDED_OFFICIAL[dataset].get(upto)}
        for name, curve in (("geomol", geomol), ("official", official or [])):
            # a side reached this checkpoint if it validated within the last interval before it (geomol
            # validates after epochs 4, 9, …; the official scripts at 0, 5, …)
            if not curve or curve[-1]["epoch"] < upto - (VALIDATION_INTERVAL - 1):
                continue
            for key in ("test_s2s", "test_s2t", "test_s2s_without_worst", "test_worst_index"):
                best = best_so_far(curve, upto, key)
                if best is not None:
                    row[f"{name}_{key}"], row[f"{name}_best_epoch"] = best[key], best["epoch"]
        rows.append(row)
    return rows


def _fmt(value, spec=".5g") -> str:
    return "—" if value is None else format(value, spec)


def print_table(dataset: str, rows: list[dict]) -> None:
    print(f"\nEGNO {dataset}: test MSE at the best validation epoch so far")
    print(f"{'epoch ≤':>8} | {'geomol S2S':>11} {'(best ep)':>9} {'geomol S2T':>11} {'S2S w/o worst':>13} "
          f"{'(worst)':>7} | {'official S2S':>12} {'(best ep)':>9} | {'official, recorded':>18}")
    for r in rows:
        print(f"{r['epoch']:>8} | {_fmt(r.get('geomol_test_s2s')):>11} {_fmt(r.get('geomol_best_epoch'), 'd'):>9} "
              f"{_fmt(r.get('geomol_test_s2t')):>11} {_fmt(r.get('geomol_test_s2s_without_worst')):>13} "
              f"{_fmt(r.get('geomol_test_worst_index'), 'd'):>7} | {_fmt(r.get('official_test_s2s')):>12} "
              f"{_fmt(r.get('official_best_epoch'), 'd'):>9} | {_fmt(r.get('official_recorded_s2s')):>18}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.strip().splitlines()[0])
    parser.add_argument("--dataset", choices=list(CONFIGS), default="nbody")
    parser.add_argument("--molecule", default="aspirin", help="MD17: the molecule (md17_<molecule>.npz)")
    parser.add_argument("--data-dir", type=Path, default=MD17["data_dir"],
                        help="MD17: folder of md17_<molecule>.npz (geomol simulate molecule --out)")
    parser.add_argument("--epochs", type=int, required=True, help="epoch budget of both trainings")
    parser.add_argument("--seed", type=int, default=1, help="seed of both trainings (official configs: 1)")
    parser.add_argument("--checkpoints", type=int, nargs="+", help="epochs of the table (default: the recorded ones)")
    parser.add_argument("--official", type=Path, default=os.environ.get("GEOMOL_OFFICIAL_EGNO"),
                        help="official EGNO checkout to run side by side (default $GEOMOL_OFFICIAL_EGNO)")
    parser.add_argument("--official-log", type=Path, help="log of an official run on the same data, instead of running it")
    parser.add_argument("--run-dir", type=Path, help="checkpoints, logs and curves (default runs/egno_accuracy/...)")
    parser.add_argument("--skip-geomol", action="store_true", help="tabulate an earlier run's curve.json in --run-dir")
    parser.add_argument("--resume", action="store_true",
                        help="continue the geomol run in --run-dir from its last checkpoint up to --epochs")
    parser.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="override a model argument of the recipe (YAML value), e.g. node_attr_norm=batch_max "
                             "(the official scripts' per-batch feature scaling); repeatable")
    parser.add_argument("--note", default="", help="free text stored in the JSON (e.g. why a run was stopped)")
    parser.add_argument("--output", type=Path, help="JSON file (default benchmarks/results/egno_accuracy_<dataset>_seed<seed>.json)")
    args = parser.parse_args(argv)
    from geomol.errors import ConfigError
    from geomol.config_files import key_value_overrides

    try:
        model_overrides = key_value_overrides(args.model_arg, "--model-arg")
    except ConfigError as exc:
        parser.error(exc.reason)

    import torch

    torch.set_num_threads(1)
    MD17.update(molecule=args.molecule, data_dir=args.data_dir)
    name = f"{args.dataset}_{args.molecule}" if args.dataset == "md17" else args.dataset
    run_dir = args.run_dir or REPO / "runs" / "egno_accuracy" / f"{name}_seed{args.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()
    if args.skip_geomol:
        geomol = json.loads((run_dir / "curve.json").read_text())
    else:
        geomol = train_geomol(args.dataset, args.epochs, args.seed, run_dir, model_overrides, args.resume)
    official, official_command = None, None
    if args.official_log:
        official, official_command = parse_official_log(args.official_log.read_text()), f"log {args.official_log.name}"
    elif args.official:
        official, official_command = run_official(args.dataset, Path(args.official), args.epochs, args.seed, run_dir)
    rows = table(args.dataset, args.checkpoints or DEFAULT_CHECKPOINTS[args.dataset], geomol, official)
    print_table(args.dataset, rows)
    record = {
        "benchmark": "egno_accuracy", "dataset": args.dataset,
        **({"molecule": args.molecule, "data_file": _md17_file().name} if args.dataset == "md17" else {}),
        "provenance": provenance(),
        "load_average_1_5_15_min": {"start": [round(x, 2) for x in load_start],
                                    "end": [round(x, 2) for x in os.getloadavg()]},
        "epochs_budget": args.epochs, "seed": args.seed, "note": args.note, "resumed": args.resume,
        "model_overrides": model_overrides,
        "geomol_last_epoch": geomol[-1]["epoch"] if geomol else None,
        "geomol_wall_seconds": geomol[-1]["seconds"] if geomol else None,
        "official_command": official_command,
        "official_recorded": {"source": "../shared/BENCHMARKS.md (official script on its own data)",
                              "test_s2s": RECORDED_OFFICIAL[args.dataset]},
        "table": rows, "geomol_curve": geomol, "official_curve": official,
    }
    output = args.output or REPO / "benchmarks" / "results" / f"egno_accuracy_{name}_seed{args.seed}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written {output.relative_to(REPO) if output.is_relative_to(REPO) else output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
