"""How predictions are scored: metrics on arrays (:mod:`~geomol.metrics.scores`: Pearson, Spearman, Kendall τ, RMSE,
AUROC, ...) and the per-target protocol (:mod:`~geomol.metrics.targets`: which items form a target, scores per target
and their summaries). Plain functions on arrays, no model and no data reader: training, prediction tables,
cross-validation and benchmarks all score with them."""
