"""Whether and how far to fine-tune an affinity model on one target, decided from its measured ligands alone.

A handful of measured ligands can teach a model how one target ranks its ligands, or only add noise to a ranking
that was already good: on proteins where the default model ranked well, always adapting it with 10 measured ligands
lowered the mean Spearman on the other ligands. Which of the two happens is estimated *within* the k measured
ligands, by leave-pair-out cross-validation: for a pair (i, j) of them with different pK, every candidate setting
adapts the model on the other k − 2 (:func:`~geomol.training.finetune.fit_started` with the pair's weight 0) and
predicts both; the pair is ordered right when the predicted difference has the measured sign (a predicted tie
counts half). The model as it is orders the same pairs with its own predictions (a fitted level does not change
them). At most ``max_pairs`` pairs are held out (a seeded random choice). The candidates differ in how far they
go (``steps``, one anchor and learning rate): one fit of the most steps per held-out pair and member serves them
all, read at each candidate's step count (a fit stopped there ranks as one of that many steps).

:class:`FinetuneChoice` adapts with 10 steps (lr 0.001, anchor 1: :data:`DEFAULT`) unless the estimate favours
going further: when the candidate that orders the most held-out pairs right (the fewest steps of equals) beats the
model as it is by more than ``min_gain`` (a fraction of the pairs), it adapts with that candidate instead. With
fewer than ``min_ligands`` measured ligands nothing can be held out and it adapts with 10 steps unchecked; when all
measured ligands have the same pK they say nothing about ranking and only the model's level is set
(``LEVEL_ONLY``: it ranks as the base model). The rule was chosen on validation targets of the corpus
cross-validation, never on test targets, as the option whose worst budget gained most over the model as it is less
one standard error, and evaluated once on test targets (``benchmarks/affinity_fewshot_decision.py``, key
``inset_gate``; ``docs/predict.md``). The candidates' anchor (1) is the one that gained most with 3 and 5 ligands
on the same validation targets (``benchmarks/affinity_fewshot_settings.py``). The first rule
(:data:`~geomol.evaluation.fewshot_decision.LEAVE_PAIR_OUT_ONLY`) set the level alone wherever the estimate did
not favour a candidate and below 4 ligands; where the base model ranks poorly it kept about a tenth of always
adapting's gain.
The :class:`FinetuneDecision` records the estimate and says it in words (:meth:`FinetuneDecision.message`);
``geomol finetune`` prints it and writes it on the model card and in the manifest (``metrics.finetune.decision``).
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from itertools import groupby
from typing import Any, Callable, Sequence

import numpy as np
import torch

from geomol.data.blocks import BlockGraph
from geomol.errors import ConfigError
from geomol.training.finetune import FinetuneSettings, fit_started

__all__ = ["LEVEL_ONLY", "DEFAULT", "FinetuneChoice", "PairScore", "FinetuneDecision", "held_out_pairs",
           "fit_candidates", "pair_scores"]

LEVEL_ONLY = FinetuneSettings(steps=0)
"""The model's weights kept, only its level (constant offset) set to the measured ligands."""

DEFAULT = FinetuneSettings(steps=10)
"""What :class:`FinetuneChoice` adapts with unless the within-set estimate favours going further (and, unchecked,
below ``min_ligands``): 10 Adam steps, lr 0.001, anchor 1."""


@dataclass(frozen=True)
class PairScore:
    """How many held-out pairs of measured ligands a setting orders right.

    Attributes:
        settings: the fine-tuning setting (``None``: the model as it is).
        right: pairs ordered right (a predicted tie counts half).
        pairs: pairs held out.
    """

    settings: FinetuneSettings | None
    right: float
    pairs: int

    @property
    def accuracy(self) -> float:
        """The fraction of held-out pairs ordered right (NaN without pairs)."""
        return self.right / self.pairs if self.pairs else float("nan")

    def to_dict(self) -> dict:
        return {"settings": None if self.settings is None else asdict(self.settings), "right": self.right,
                "pairs": self.pairs, "accuracy": round(self.accuracy, 4)}

    def describe(self) -> str:
        return f"{self.right:g} of {self.pairs} ({100 * self.accuracy:.0f} %)"


def _setting_words(settings: FinetuneSettings) -> str:
    return f"{settings.steps} steps, anchor {settings.anchor:g}" + (f", lr {settings.lr:g}" if settings.lr != 1e-3
                                                                     else "")


@dataclass
class FinetuneDecision:
    """What :meth:`FinetuneChoice.decide` chose and why.

    Attributes:
        settings: the setting used (``LEVEL_ONLY`` when not adapted).
        reason: ``"helps"`` (the within-set estimate favours a candidate by more than the margin: adapted with it),
            ``"default"`` (it does not: the choice's ``fallback``, by default 10 steps), ``"too_few"`` (too few
            measured ligands to validate: the choice's ``unvalidated`` setting, by default 10 steps),
            ``"no_spread"`` (all measured pK equal: the level alone) or ``"forced"`` (the user's setting).
        ligands: measured ligands used.
        base: the model as it is on the held-out pairs (``None`` without pairs).
        candidates: each candidate setting on the same pairs.
        min_gain: the margin over the base model a candidate needed.
        min_ligands: the fewest measured ligands a decision validates.
        fallback: the setting used where the estimate does not favour a candidate by the margin.
        unvalidated: the setting used below ``min_ligands``.
    """

    settings: FinetuneSettings
    reason: str
    ligands: int
    base: PairScore | None = None
    candidates: list[PairScore] = field(default_factory=list)
    min_gain: float = 0.0
    min_ligands: int = 4
    fallback: FinetuneSettings = DEFAULT
    unvalidated: FinetuneSettings = DEFAULT

    @property
    def adapted(self) -> bool:
        """Whether the model's weights move (otherwise only its level is set)."""
        return self.settings.steps > 0

    def estimate(self) -> PairScore | None:
        """The within-set estimate of the setting used (the base model's when not adapted)."""
        return next((s for s in self.candidates if s.settings == self.settings), self.base)

    def rule(self) -> str:
        """The rule that made the decision, in words (for the model card)."""
        if self.reason == "forced":
            return "Your own setting (--steps, --lr or --anchor), used whatever the estimate, which is reported below."
        words = lambda s: f"{_setting_words(s)} (lr {s.lr:g})" if s.steps else "the offset alone"  # noqa: E731
        return (f"Rule: adapt with {words(self.fallback)}, unless the candidate that orders most held-out pairs of "
                f"the measured ligands right orders more than {100 * self.min_gain:.0f} points more of them right "
                f"than the base model: then with that candidate; below {self.min_ligands} measured ligands, "
                f"{words(self.unvalidated)} unchecked; all measured pK equal, the offset alone.")

    def message(self) -> str:
        """The decision and its estimate in words, for the user."""
        level = "only its level (a constant) was set to your ligands, so it ranks ligands as the base model does"
        if self.reason == "no_spread":
            return (f"Not adapted: your {self.ligands} measured ligands all have the same pK, so they say nothing "
                    f"about how to rank ligands; {level}.")
        if self.base is None:
            why = (f"{self.ligands} measured ligands are too few to check whether adapting helps (at least "
                   f"{self.min_ligands} with different pK are needed to hold out a pair and adapt on the rest)")
            if self.reason == "forced":
                return f"Adapted with your setting ({_setting_words(self.settings)}) unchecked: {why}."
            if self.adapted:
                return (f"Adapted with {_setting_words(self.settings)} unchecked: {why}; this is geomol's default "
                        f"setting, which gained on average with so few ligands on validation targets of the "
                        f"training corpus.")
            return f"Not adapted: {why}; {level}."
        base = self.base
        text = "; ".join([f"Within your {self.ligands} measured ligands (leave-pair-out: each held-out pair "
                          f"predicted by the model adapted on the other {self.ligands - 2}, {base.pairs} pairs) the "
                          f"base model orders {base.describe()} right"]
                         + [f"adapted with {_setting_words(s.settings)}: {s.describe()}" for s in self.candidates])
        gain = 100 * (self.estimate().accuracy - base.accuracy)
        margin = f"{100 * self.min_gain:.0f} points"
        if self.reason == "helps":
            further = (f" (further than the default, {_setting_words(self.fallback)})"
                       if self.fallback.steps and self.settings != self.fallback else "")
            return (f"{text}. Adapted with {_setting_words(self.settings)}{further}: {gain:+.0f} points over the "
                    f"base model, more than the {margin} needed.")
        if self.reason == "forced":
            caution = "" if gain > 100 * self.min_gain else (
                " This estimate does not say that adapting helps here: check the model on ligands you held out, "
                "or leave the setting to geomol (no --steps, --lr or --anchor).")
            return f"{text}. Adapted with your setting ({gain:+.0f} points over the base model).{caution}"
        if not self.adapted:
            return (f"{text}. Not adapted: no setting ordered more than {margin} more held-out pairs right than the "
                    f"base model; {level}.")
        own = next((s for s in self.candidates if s.settings == self.settings), None)
        estimate = (f" (its estimate here: {100 * (own.accuracy - base.accuracy):+.0f} points over the base model)"
                    if own is not None else "")
        return (f"{text}. Adapted with the default, {_setting_words(self.settings)}{estimate}: no setting ordered "
                f"more than {margin} more held-out pairs right than the base model, which adapting further needs. "
                f"The default gained on average on validation targets of the training corpus; so few pairs can "
                f"neither confirm nor refute that it helps on yours.")

    def to_dict(self) -> dict:
        return {"reason": self.reason, "adapted": self.adapted, "settings": asdict(self.settings),
                "ligands": self.ligands, "base": None if self.base is None else self.base.to_dict(),
                "candidates": [s.to_dict() for s in self.candidates], "min_gain": self.min_gain,
                "default": asdict(self.fallback), "rule": self.rule(), "message": self.message()}


def held_out_pairs(measured: Sequence[float], max_pairs: int, seed: int = 0) -> list[tuple[int, int]]:
    """The pairs (i, j), i < j, of measured ligands with different pK; at most ``max_pairs`` of them, a seeded
    random choice when there are more."""
    y = np.asarray(measured, dtype=float)
    pairs = [(i, j) for i in range(len(y)) for j in range(i + 1, len(y)) if y[i] != y[j]]
    if len(pairs) > max_pairs:
        keep = np.random.default_rng(seed).choice(len(pairs), size=max_pairs, replace=False)
        pairs = [pairs[p] for p in sorted(keep)]
    return pairs


def fit_candidates(start, frozen: Any, measured: torch.Tensor, candidates: Sequence[FinetuneSettings],
                   weights: torch.Tensor | None, seen: Callable[[FinetuneSettings, Any], None]) -> None:
    """Fine-tune a copy of ``start`` (a :meth:`~geomol.models.affinity_member.AffinityMember.finetune_start`
    member) once per learning rate and anchor among ``candidates``, for their most steps, and call
    ``seen(candidate, member)`` where the fit reaches each candidate's step count (the member then ranks as that
    candidate's fit; ``steps = 0``: the level alone). ``frozen``, ``measured`` and ``weights`` as in
    :func:`~geomol.training.finetune.fit_started`."""
    path = lambda c: (c.lr, c.anchor)  # noqa: E731
    for (lr, anchor), group in groupby(sorted(candidates, key=path), key=path):
        at = {}
        for candidate in group:
            at.setdefault(candidate.steps, []).append(candidate)
        for candidate in at.pop(0, []):
            seen(candidate, start)  # the level does not change a ranking
        if not at:
            continue

        def reached(step, member, at=at):
            for candidate in at.get(step, ()):
                seen(candidate, member)

        fit_started(copy.deepcopy(start), frozen, measured, FinetuneSettings(steps=max(at), lr=lr, anchor=anchor),
                    weights, reached)


def _ordered_right(difference: float, measured_difference: float) -> float:
    """1 when a predicted difference has the measured sign, 0.5 for a predicted tie, else 0."""
    return 0.5 if difference == 0 else float(np.sign(difference) == np.sign(measured_difference))


def pair_scores(starts: Sequence, frozens: Sequence, measured: torch.Tensor,
                candidates: Sequence[FinetuneSettings], pairs: Sequence[tuple[int, int]]
                ) -> tuple[PairScore, list[PairScore]]:
    """The model as it is and every candidate setting on the held-out ``pairs`` (see the module notes).

    Args:
        starts: every member's :meth:`~geomol.models.affinity_member.AffinityMember.finetune_start` copy (not
            changed), in the dtype of ``measured``; frozens: each one's frozen part of the k measured complexes.
        measured: ``(k,)`` pK.
        pairs: index pairs into them, each with different measured pK.

    Returns:
        The base model's score and each candidate's, on the same pairs; an ensemble's members are adapted each
        and their predictions averaged, as :func:`~geomol.training.finetune.finetune_model` does.
    """
    with torch.no_grad():
        base = torch.stack([start.head(f) for start, f in zip(starts, frozens)]).mean(0)
    right = dict.fromkeys(candidates, 0.0)
    for i, j in pairs:
        weights = torch.ones_like(measured)
        weights[[i, j]] = 0.0
        difference = dict.fromkeys(candidates, 0.0)  # Σ over members of pred_i − pred_j

        def seen(candidate, member, f=None):
            with torch.no_grad():
                pred = member.head(f)
            difference[candidate] += float(pred[i] - pred[j])

        for start, f in zip(starts, frozens):
            fit_candidates(start, f, measured, candidates, weights, lambda c, m, f=f: seen(c, m, f))
        for candidate in candidates:
            right[candidate] += _ordered_right(difference[candidate], float(measured[i] - measured[j]))
    base_right = sum(_ordered_right(float(base[i] - base[j]), float(measured[i] - measured[j])) for i, j in pairs)
    return PairScore(None, base_right, len(pairs)), [PairScore(c, right[c], len(pairs)) for c in candidates]


@dataclass(frozen=True)
class FinetuneChoice:
    """Decide whether and how far to fine-tune from the measured ligands themselves (see the module notes).

    Attributes:
        steps: how far the candidates go (Adam steps), fewest first; anchor, lr: theirs (as in
            :class:`~geomol.training.finetune.FinetuneSettings`).
        min_gain: the fraction of held-out pairs by which the best candidate must beat the model as it is.
        max_pairs: pairs held out at most (each costs one fit per member).
        min_ligands: fewer measured ligands than this are not validated (``unvalidated`` is used).
        seed: the choice of pairs when there are more than ``max_pairs``.
        forced: the user's own setting, used whatever its estimate (which is still reported); None: decide.
        unvalidated: the setting used when nothing can be held out (fewer than ``min_ligands``).
        fallback: the setting used where no candidate beats the model as it is by more than ``min_gain``.
            Both are :data:`DEFAULT` (10 steps), chosen on validation targets of the corpus cross-validation;
            ``LEVEL_ONLY`` for both is the first rule (``fewshot_decision.LEAVE_PAIR_OUT_ONLY``).
    """

    steps: tuple[int, ...] = (10, 30, 100)
    anchor: float = 1.0
    lr: float = 1e-3
    min_gain: float = 0.3
    max_pairs: int = 10
    min_ligands: int = 4
    seed: int = 0
    forced: FinetuneSettings | None = None
    unvalidated: FinetuneSettings = DEFAULT
    fallback: FinetuneSettings = DEFAULT

    def __post_init__(self):
        if not self.steps or min(self.steps) < 1:
            raise ConfigError(f"fine-tuning candidates need steps >= 1, got {self.steps}")
        if not 0 <= self.min_gain < 1 or self.max_pairs < 1 or self.min_ligands < 4:
            raise ConfigError(f"fine-tuning choice needs 0 <= min_gain < 1, max_pairs >= 1 and min_ligands >= 4, got "
                              f"{self.min_gain}, {self.max_pairs}, {self.min_ligands}")

    @property
    def candidates(self) -> list[FinetuneSettings]:
        """The settings compared with the model as it is (the user's one when forced)."""
        if self.forced is not None:
            return [self.forced]
        return [FinetuneSettings(steps=s, lr=self.lr, anchor=self.anchor) for s in sorted(set(self.steps))]

    def decide(self, model, graphs: Sequence[BlockGraph], measured: Sequence[float]) -> FinetuneDecision:
        """The setting to fine-tune ``model`` (an :class:`~geomol.inference.affinity_model.AffinityModel`) with on
        the measured complexes ``graphs`` (built with its recipe), and the estimate behind it."""
        y = torch.tensor(list(measured), dtype=model.dtype)
        with torch.no_grad():
            inputs = model.members[0].inputs(list(graphs))  # members share their configuration, so their inputs
            starts = [member.finetune_start().to(y.dtype).eval() for member in model.members]
            frozens = [start.frozen(inputs) for start in starts]
        return self.decide_started(starts, frozens, y)

    def decide_started(self, starts: Sequence, frozens: Sequence, measured: torch.Tensor) -> FinetuneDecision:
        """:meth:`decide` from the members' fine-tuning starts and frozen parts (as :func:`pair_scores` takes)."""
        k = len(measured)
        pairs = held_out_pairs(measured.tolist(), self.max_pairs, self.seed) if k >= self.min_ligands else []
        options = {"min_gain": self.min_gain, "min_ligands": self.min_ligands, "fallback": self.fallback,
                   "unvalidated": self.unvalidated}
        if not pairs:
            if self.forced is not None:
                return FinetuneDecision(self.forced, "forced", k, **options)
            if len(set(measured.tolist())) < 2:  # nothing to rank: the level alone
                return FinetuneDecision(LEVEL_ONLY, "no_spread", k, **options)
            return FinetuneDecision(self.unvalidated, "too_few", k, **options)
        return self.conclude(k, *pair_scores(starts, frozens, measured, self.candidates, pairs))

    def conclude(self, ligands: int, base: PairScore, scores: Sequence[PairScore]) -> FinetuneDecision:
        """The decision for ``ligands`` measured ligands from the held-out pairs' scores (:func:`pair_scores`)."""
        options = {"min_gain": self.min_gain, "min_ligands": self.min_ligands, "fallback": self.fallback,
                   "unvalidated": self.unvalidated}
        if self.forced is not None:
            return FinetuneDecision(self.forced, "forced", ligands, base, list(scores), **options)
        best = max(scores, key=lambda score: score.right)  # the first of equals: the fewest steps
        helps = best.right - base.right > self.min_gain * base.pairs
        return FinetuneDecision(best.settings if helps else self.fallback, "helps" if helps else "default",
                                ligands, base, list(scores), **options)
