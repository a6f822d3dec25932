"""Evaluation: cross-validation, folds, baselines, learning curves and model-card pieces — the library code that
``benchmarks/`` and ``scripts/`` call. It sits above training, inference and tasks, which never import it; the
metrics and the per-target protocol they all share live below them, in :mod:`geomol.metrics`."""
