"""How far to trust a shipped affinity model on one target: what the corpus cross-validation measured there.

Read from recorded results only: the cross-validation's result (``benchmarks/results/affinity_corpus_cv.json``:
``variants`` with their expert-pose summaries, ``per_target`` rows with each variant's Spearman, ``folds``) and the
shipped model's manifest (``metrics.cross_validation.expert_pose``). The CV row is the one whose expert-pose summary
is the one the manifest records (:func:`shipped_variant`), so the sentence cannot describe another model. The
README's quick start shows :func:`trust_sentence` (``scripts/quick_start.py readme``).
"""
from __future__ import annotations

import math

from geomol.errors import DatasetError

__all__ = ["shipped_variant", "target_result", "trust_sentence"]


def shipped_variant(cv: dict, manifest: dict) -> str:
    """The CV variant whose expert-pose summary (targets, mean Spearman) is the one the model's manifest records.

    Raises:
        DatasetError: no variant matches (the results and the model come from different runs).
    """
    recorded = manifest["metrics"]["cross_validation"]["expert_pose"]
    for row in cv["variants"]:
        summary = row["expert_pose"]
        if summary.get("targets") == recorded["targets"] and math.isclose(summary["spearman"], recorded["spearman"],
                                                                           abs_tol=1e-9):
            return row["variant"]
    raise DatasetError("no cross-validation row matches the model's recorded metrics")


def target_result(cv: dict, variant: str, target: str) -> dict:
    """Fold, ligands and Spearman (``variant``'s and the heavy-atom count's) of ``plb/<target>`` in the
    cross-validation, with the number of folds.

    Raises:
        DatasetError: ``plb/<target>`` is not a scored target of the cross-validation.
    """
    fields = cv["per_target"]["fields"]
    column = {name: i for i, name in enumerate(fields)}
    row = next((r for r in cv["per_target"]["rows"] if r[column["target"]] == f"plb/{target}"), None)
    if row is None:
        raise DatasetError(f"plb/{target} is not a scored target of the cross-validation")
    return {"fold": row[column["fold"]], "ligands": row[column["n"]], "spearman": row[column[f"{variant}:spearman"]],
            "hac_spearman": row[column["hac_spearman"]], "n_folds": len(cv["folds"])}


def trust_sentence(cv: dict, manifest: dict, target: str) -> str:
    """The sentence on how the shipped model ranked ``target``'s ligands when its protein was held out, beside
    ranking them by size, and the model's mean over the expert-pose targets."""
    found = target_result(cv, shipped_variant(cv, manifest), target)
    summary = manifest["metrics"]["cross_validation"]["expert_pose"]
    relation = "below" if found["spearman"] < found["hac_spearman"] else "above"
    return (f"How far to trust it on this target: in the {found['n_folds']}-fold leave-cluster-out cross-validation, "
            f"the fold that held {target}'s protein out (fold {found['fold']}) ranked its {found['ligands']} ligands "
            f"with Spearman {found['spearman']:.2f}, {relation} ranking them by size (heavy-atom count: "
            f"{found['hac_spearman']:.2f}); across the {summary['targets']} expert-pose targets its mean is "
            f"{summary['spearman']:.2f}. {target.upper()} is in the shipped model's training data, so the Spearman "
            "the command prints is measured on ligands the model was trained on: it shows the workflow, the "
            "cross-validation shows the accuracy to expect on a protein the model has not seen.")
