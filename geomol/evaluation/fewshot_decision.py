"""Few-shot fine-tuning decided from the measured ligands, measured in the corpus cross-validation.

For a fold's calibrated contact scorer (the default model's member of that fold, which never saw the fold's
validation or test clusters) and a target of the fold, every draw of k measured ligands records (:func:`draw_record`):

- the Spearman on the target's *other* ligands of the model as it is (``base``), of it always fine-tuned as
  ``geomol finetune`` did before it decided (``always``: :class:`~geomol.training.finetune.FinetuneSettings`'s
  defaults), and of every candidate setting of a :class:`~geomol.training.finetune_choice.FinetuneChoice`;
- the choice's leave-pair-out scores within the k measured ligands (the held-out pairs each setting orders right).

Any margin ``min_gain`` then gives the decided model's Spearman without refitting (:func:`decided_spearman`, through
:meth:`FinetuneChoice.conclude`, the rule ``geomol finetune`` applies), so the margin is chosen on the folds'
*validation* targets (:func:`choose_min_gain`) and the chosen rule is evaluated once on the test targets
(:func:`summarise_decided`). ``benchmarks/affinity_fewshot_decision.py`` is the command line.

A second family of rules reads the base model's own Spearman on the k measured ligands (``base_inset``: no
refitting; :func:`add_inset` adds it to records written before it was kept): an :class:`InsetGate` adapts below a
threshold, alone or with the leave-pair-out rule (:func:`gated_spearman`), chosen on validation targets in the same
way (:func:`choose_gate`). The option chosen there, "adapt with 10 steps, or further where the leave-pair-out rule
says so", is ``geomol finetune``'s rule: :class:`FinetuneChoice`'s defaults (its fallback 10 steps), while the
first rule family (:func:`choose_rule`) starts from :data:`LEAVE_PAIR_OUT_ONLY` (the level alone where the estimate
does not favour adapting); ``docs/predict.md`` has both evaluations.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Callable, Sequence

import numpy as np
import torch

from geomol.metrics.scores import mean_of, spearman
from geomol.training.finetune import FinetuneSettings
from geomol.training.finetune_choice import LEVEL_ONLY, FinetuneChoice, PairScore, fit_candidates

__all__ = ["ALWAYS", "LEAVE_PAIR_OUT_ONLY", "draw_record", "target_records", "add_inset", "decided_spearman",
           "choose_rule", "InsetGate", "gated_spearman", "choose_gate", "summarise_decided", "format_decided",
           "choice_record"]

ALWAYS = FinetuneSettings()
"""What ``geomol finetune`` did on every target before it decided from the measured ligands."""

LEAVE_PAIR_OUT_ONLY = FinetuneChoice(unvalidated=LEVEL_ONLY, fallback=LEVEL_ONLY)
"""The first rule: adapt only where the leave-pair-out estimate favours a candidate by the margin, else (and below
``min_ligands``) set the level alone; the benchmark's rule families start from it."""


def _key(settings: FinetuneSettings) -> str:
    return f"{settings.steps}/{settings.lr:g}/{settings.anchor:g}"


def draw_record(model, data, items: np.ndarray, chosen: np.ndarray, choice: FinetuneChoice) -> dict:
    """One draw: the scorer ``model`` (a calibrated :class:`~geomol.models.contact_scorer.ContactScorer`), the
    target's items ``items`` of :class:`~geomol.training.contact_scorer.ContactData` ``data``, the positions
    ``chosen`` of the k measured ones among them (see the module notes)."""
    rest = np.setdiff1d(np.arange(len(items)), chosen)
    y = torch.as_tensor(data.label[items], dtype=torch.float64)
    start = model.finetune_start().to(torch.float64).eval()
    measured_part, rest_part = (start.frozen(data.batch(items[part])) for part in (chosen, rest))
    y_rest = y[rest].numpy()
    scores = {}

    def seen(settings, member):
        with torch.no_grad():
            scores[_key(settings)] = spearman(member.head(rest_part).numpy(), y_rest)

    candidates = choice.candidates
    fit_candidates(start, measured_part, y[chosen], [*candidates, ALWAYS] if ALWAYS not in candidates
                   else candidates, None, seen)
    with torch.no_grad():
        base = spearman(start.head(rest_part).numpy(), y_rest)
        inset = spearman(start.head(measured_part).numpy(), y[chosen].numpy())
    decision = replace(choice, min_gain=0.0).decide_started([start], [measured_part], y[chosen])
    return {"base": base, "base_inset": inset, "always": scores[_key(ALWAYS)],
            "candidates": {_key(c): scores[_key(c)] for c in candidates},
            "pairs": decision.base.pairs if decision.base else 0,
            "base_right": decision.base.right if decision.base else None,
            "right": {_key(s.settings): s.right for s in decision.candidates}}


def target_records(model, data, items: np.ndarray, ks: Sequence[int], draws: int, rng: np.random.Generator,
                   choice: FinetuneChoice) -> dict[int, list[dict]]:
    """Every k's ``draws`` draw records of one target (k measured ligands drawn at random by ``rng``)."""
    return {k: [draw_record(model, data, items, rng.choice(len(items), size=k, replace=False), choice)
                for _ in range(draws)] for k in ks}


def add_inset(model, data, items: np.ndarray, rows: list[dict], rng: np.random.Generator) -> None:
    """Add ``base_inset`` (the model's Spearman on the k measured ligands themselves) to the draw records of one
    target's ``rows`` (one per k, in the order :func:`target_records` drew them) written before records had it:
    the draws are replayed with the same ``rng``, checked against each record's Spearman on the other ligands."""
    start = model.finetune_start().to(torch.float64).eval()
    with torch.no_grad():
        pred = start.head(start.frozen(data.batch(items))).numpy()
    y = np.asarray(data.label[items], dtype=float)
    for row in rows:
        for record in row["draws"]:
            chosen = rng.choice(len(items), size=row["k"], replace=False)
            rest = np.setdiff1d(np.arange(len(items)), chosen)
            replayed = spearman(pred[rest], y[rest])
            if not np.isclose(replayed, record["base"], atol=1e-9, equal_nan=True):
                raise RuntimeError(f"replayed draw of {row['target']} (k={row['k']}) does not match its record: "
                                   f"Spearman {replayed} against {record['base']}")
            record["base_inset"] = spearman(pred[chosen], y[chosen])


def decided_spearman(record: dict, choice: FinetuneChoice, k: int) -> tuple[float, bool]:
    """The Spearman on the other ligands of the model ``choice`` leaves or adapts in this draw, and whether it
    adapted."""
    if not record["pairs"]:  # nothing to validate: the choice's setting for too few ligands, unless all measured pK
        # are equal (k >= min_ligands without pairs; below it a NaN Spearman on them, as InsetGate reads it)
        spread = k < choice.min_ligands and not np.isnan(record.get("base_inset", 0.0))
        fallback = choice.unvalidated if spread else LEVEL_ONLY
        return (record["candidates"][_key(fallback)], True) if fallback.steps else (record["base"], False)
    settings = {_key(c): c for c in choice.candidates}
    base = PairScore(None, record["base_right"], record["pairs"])
    decision = choice.conclude(k, base, [PairScore(settings[key], right, record["pairs"])
                                         for key, right in record["right"].items()])
    return (record["candidates"][_key(decision.settings)], True) if decision.adapted else (record["base"], False)


@dataclass(frozen=True)
class InsetGate:
    """A rule on the base model's own ranking of the measured ligands (``base_inset``, its Spearman on them; no
    refitting): adapt with ``steps`` Adam steps (the choice's anchor and learning rate) when it is below ``below``,
    otherwise set the level alone (a NaN Spearman, e.g. all measured pK equal: the level alone); with ``or_pairs``
    also adapt where the choice's leave-pair-out rule does (with its setting)."""

    below: float
    steps: int
    or_pairs: bool = False

    def describe(self) -> str:
        return (f"adapt with {self.steps} steps when the base Spearman on the measured ligands < {self.below:g}"
                + (" or the leave-pair-out rule says so" if self.or_pairs else ""))


def gated_spearman(record: dict, gate: InsetGate, choice: FinetuneChoice, k: int) -> tuple[float, bool]:
    """As :func:`decided_spearman` for the rule ``gate`` (its leave-pair-out part from ``choice``)."""
    if gate.or_pairs and record["pairs"]:
        spearman_, adapted = decided_spearman(record, choice, k)
        if adapted:
            return spearman_, True
    if record["base_inset"] < gate.below:  # NaN compares False
        settings = FinetuneSettings(steps=gate.steps, lr=choice.lr, anchor=choice.anchor)
        return record["candidates"][_key(settings)], True
    return record["base"], False


def _decider(rule: FinetuneChoice | tuple[InsetGate, FinetuneChoice]) -> Callable[[dict, int], tuple[float, bool]]:
    if isinstance(rule, FinetuneChoice):
        return lambda record, k: decided_spearman(record, rule, k)
    return lambda record, k: gated_spearman(record, *rule, k)


def _target_means(rows: list[dict], rule: FinetuneChoice | tuple[InsetGate, FinetuneChoice]) -> list[dict]:
    """Per target and k: the mean over draws of base, always and decided (by a :class:`FinetuneChoice`, or an
    :class:`InsetGate` with the choice for its leave-pair-out part), and how often the decision adapted."""
    decide = _decider(rule)
    out = []
    for row in rows:
        draws = row["draws"]
        decided, adapted = zip(*(decide(d, row["k"]) for d in draws))
        out.append({"target": row["target"], "k": row["k"], "base_all": row["base_all"],
                    "base": mean_of(d["base"] for d in draws), "always": mean_of(d["always"] for d in draws),
                    "decided": mean_of(decided), "adapted": float(np.mean(adapted))})
    return out


def _paired(rows: list[dict], method: str) -> tuple[float, float, float]:
    """Mean difference of ``method`` over base across targets, its standard error and the worst target's."""
    diff = np.array([r[method] - r["base"] for r in rows if np.isfinite(r[method] - r["base"])])
    if len(diff) == 0:
        return float("nan"), float("nan"), float("nan")
    se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else float("nan")
    return float(diff.mean()), se, float(diff.min())


def choose_rule(rows: list[dict], choice: FinetuneChoice, grid: Sequence[float]) -> tuple[FinetuneChoice, list[dict]]:
    """The margin of ``grid`` and the setting for too few ligands (the level alone or a candidate) whose decided
    model's worst budget k has the highest lower bound (mean gain over the base model minus one standard error over
    targets) on ``rows`` (validation targets); of equals the largest margin, the level alone. Returns the rule
    and every option's gains per k."""
    table = []
    for fallback in [LEVEL_ONLY, *choice.candidates]:
        for gain in grid:
            rule = replace(choice, min_gain=gain, unvalidated=fallback)
            table.append({"min_gain": gain, "unvalidated_steps": fallback.steps, **_worst_budget(rows, rule),
                          "rule": rule})
    best = max(table, key=lambda r: (round(r["bound"], 4), r["min_gain"], -r["unvalidated_steps"]))
    return best["rule"], [{k: v for k, v in r.items() if k != "rule"} for r in table]


def _worst_budget(rows: list[dict], rule) -> dict:
    """The decided model's mean gain over base per k, its standard error over targets, and the bound: the worst
    k's mean gain minus its standard error."""
    means = _target_means(rows, rule)
    per_k = {k: _paired([m for m in means if m["k"] == k], "decided") for k in sorted({m["k"] for m in means})}
    bound = min(mean - (se if np.isfinite(se) else 0.0) for mean, se, _ in per_k.values())
    return {"bound": bound, "gain_per_k": {k: v[0] for k, v in per_k.items()},
            "se_per_k": {k: v[1] for k, v in per_k.items()}}


def choose_gate(rows: list[dict], choice: FinetuneChoice, thresholds: Sequence[float], steps: Sequence[int]
                ) -> tuple[InsetGate, list[dict]]:
    """The :class:`InsetGate` of the grid (``thresholds`` × ``steps`` × with or without the leave-pair-out rule of
    ``choice``) whose worst budget has the highest bound on ``rows`` (validation targets), as :func:`choose_rule`;
    of equals the lowest threshold (adapting least), the fewest steps, the gate alone. Returns it and every
    option's gains per k."""
    table = [{"below": t, "steps": n, "or_pairs": both, **_worst_budget(rows, (InsetGate(t, n, both), choice))}
             for both in (False, True) for t in thresholds for n in steps]
    best = max(table, key=lambda r: (round(r["bound"], 4), -r["below"], -r["steps"], not r["or_pairs"]))
    return InsetGate(best["below"], best["steps"], best["or_pairs"]), table


def summarise_decided(rows: list[dict], choice: FinetuneChoice | tuple[InsetGate, FinetuneChoice],
                      strong: float = 0.5) -> list[dict]:
    """Per k and group (all targets; those the base model ranks at Spearman ≥ ``strong`` on all their ligands; the
    others): mean Spearman of base, always-adapted and decided, the paired differences to base with their
    standard errors over targets and the worst target's, and the fraction of draws adapted."""
    means = _target_means(rows, choice)
    out = []
    for k in sorted({m["k"] for m in means}):
        for group, keep in (("all", lambda m: True), ("base_strong", lambda m: m["base_all"] >= strong),
                            ("base_weak", lambda m: m["base_all"] < strong)):
            chosen = [m for m in means if m["k"] == k and keep(m)]
            row = {"k": k, "targets": group, "n_targets": len(chosen),
                   **{m: mean_of(r[m] for r in chosen) for m in ("base", "always", "decided", "adapted")}}
            for method in ("always", "decided"):
                row[f"{method}_minus_base"], row[f"{method}_se"], row[f"{method}_worst"] = _paired(chosen, method)
            out.append(row)
    return out


def format_decided(summary: list[dict]) -> str:
    """The summary as a table: mean Spearman, and differences to base ± 1 standard error (worst target)."""
    lines = [f"{'k':>3} {'targets':<12}{'n':>4}{'base':>8}{'always':>8}{'decided':>8}{'adapted':>8}"
             f"{'always−base':>22}{'decided−base':>22}"]
    for r in summary:
        diff = "".join(f"{r[f'{m}_minus_base']:>+8.3f} ±{r[f'{m}_se']:.3f} ({r[f'{m}_worst']:+.2f})"
                       for m in ("always", "decided"))
        lines.append(f"{r['k']:>3} {r['targets']:<12}{r['n_targets']:>4}{r['base']:>8.3f}{r['always']:>8.3f}"
                     f"{r['decided']:>8.3f}{r['adapted']:>8.2f}{diff}")
    return "\n".join(lines)


def choice_record(choice: FinetuneChoice) -> dict:
    """The rule's settings for a result file."""
    return {**{k: v for k, v in asdict(choice).items() if k != "forced"}, "steps": list(choice.steps)}
