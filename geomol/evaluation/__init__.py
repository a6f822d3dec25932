"""Evaluation: metrics (:mod:`~geomol.evaluation.metrics`) and the per-target protocol
(:mod:`~geomol.evaluation.targets`), plain functions on arrays that training, prediction tables and benchmarks
share."""
