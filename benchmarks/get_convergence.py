"""GET trained to convergence on one corpus fold: the learning curve, and the fold's test predictions.

A long run of ``configs/get_affinity_corpus_long.yaml`` (resumed with ``--ckpt_path last`` after every
interruption) writes its learning curve to ``metrics.csv``. Two steps read it (the library's
:mod:`geomol.evaluation.learning_curves` and :func:`geomol.evaluation.get_cv.predict_corpus_fold`):

``curve``
    one row per epoch: steps so far, mean training loss, validation loss and mean per-target Spearman (the
    metric early stopping watches), CPU hours so far (``time/cpu_hours``, :class:`geomol.tasks.callbacks.CPUTime`);
    the best epoch and how many epochs have passed since (a plateau when that reaches the early-stopping
    patience); a plot of both validation metrics against the epoch::

        python benchmarks/get_convergence.py curve runs/get_affinity_corpus_long/fold0 \\
            --output benchmarks/results/get_convergence_fold0.json --plot docs/images/get_convergence_fold0.png

``predict``
    the chosen checkpoint (the best validation score, chosen on the validation slice only) on the fold's test
    complexes, loaded as users load a model, written in the cross-validation's format (``OUT/fold{k}.csv``)::

        python benchmarks/get_convergence.py predict --config configs/get_affinity_corpus_long.yaml \\
            --checkpoint runs/get_affinity_corpus_long/fold0/checkpoints/best-epoch=3.ckpt --out-dir runs/corpus_cv/get_long

    The side-by-side table on the same fold and targets is then the protocol's own::

        python benchmarks/affinity_corpus_cv.py --predictions get_long=runs/corpus_cv/get_long \\
            contact=runs/corpus_cv/contact --ensembles get_long_contact=get_long+contact --reference get_long
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from geomol.evaluation.get_cv import predict_corpus_fold
from geomol.evaluation.learning_curves import GET_MONITOR, format_curve, learning_curve, plateau, plot_curve
from geomol.provenance import provenance


def run_curve(args: argparse.Namespace) -> dict:
    curve = learning_curve(args.run / "metrics.csv")
    result = {"run": str(args.run), "monitor": GET_MONITOR, "curve": curve, **plateau(curve),
              "provenance": provenance()}
    print(format_curve(curve))
    print({key: result[key] for key in ("best_epoch", "best_val_spearman", "epochs_since_best")})
    if args.plot:
        plot_curve(curve, args.plot, f"GET on corpus {args.run.name}: learning curve")
    return result


def run_predict(args: argparse.Namespace) -> dict:
    record = predict_corpus_fold(args.config, args.checkpoint, args.out_dir)
    print(json.dumps({k: v for k, v in record.items() if k != "provenance"}, indent=1))
    return record


def build_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    curve = steps.add_parser("curve", allow_abbrev=False, help="the learning curve of a run folder (its metrics.csv)")
    curve.add_argument("run", type=Path, help="the run's version folder, e.g. runs/get_affinity_corpus_long/fold0")
    curve.add_argument("--output", type=Path, default=None, help="JSON of the curve")
    curve.add_argument("--plot", type=Path, default=None, help="PNG of the curve")
    predict = steps.add_parser("predict", allow_abbrev=False,
                               help="a checkpoint's predictions on the fold's test complexes")
    predict.add_argument("--config", type=Path, required=True, help="the run's geomol fit config (data and fold)")
    predict.add_argument("--checkpoint", type=Path, required=True)
    predict.add_argument("--out-dir", type=Path, required=True, help="writes fold{k}.csv and fold{k}.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = build_args(argv)
    result = run_curve(args) if args.step == "curve" else run_predict(args)
    if getattr(args, "output", None):
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
