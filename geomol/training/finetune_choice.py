"""Whether and how far to fine-tune an affinity model on one target, decided from its measured ligands alone.

A handful of measured ligands can teach a model how one target ranks its ligands, or only add noise to a ranking
that was already good: on proteins where the default model ranked well, always adapting it with 10 measured ligands
lowered the mean Spearman on the other ligands. Which of the two happens is estimated *within* the k measured
ligands, by leave-pair-out cross-validation: for a pair (i, j) of them with different pK, a candidate setting
adapts the model on the other k − 2 (:func:`~geomol.training.finetune.fit_started`, the pair's weight 0) and
predicts both; the pair is ordered right when the predicted difference has the measured sign (a predicted tie
counts half). The model as it is orders the same pairs with its own predictions (a fitted level does not change
them). At most ``max_pairs`` pairs are held out (a seeded random choice); each costs one fit per candidate and
member.

:class:`FinetuneChoice` adapts with the candidate that orders the most held-out pairs right when it beats the model
as it is by more than ``min_gain`` (a fraction of the pairs); otherwise the model keeps its weights and only its
level is set to the measured ligands (``steps = 0``: its ranking is the base model's). Below ``min_ligands`` there
is no pair to hold out with enough ligands left to adapt on, and the level alone is set. The
:class:`FinetuneDecision` records the estimate and says it in words (:meth:`FinetuneDecision.message`); ``geomol
finetune`` prints it and writes it on the model card and in the manifest (``metrics.finetune.decision``).
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
import torch

from geomol.data.blocks import BlockGraph
from geomol.errors import ConfigError
from geomol.training.finetune import FinetuneSettings, fit_started

__all__ = ["LEVEL_ONLY", "DEFAULT_CANDIDATES", "FinetuneChoice", "PairScore", "FinetuneDecision", "held_out_pairs",
           "pair_scores"]

LEVEL_ONLY = FinetuneSettings(steps=0)
"""The model's weights kept, only its level (constant offset) set to the measured ligands."""

DEFAULT_CANDIDATES = (FinetuneSettings(steps=100, anchor=1.0), FinetuneSettings(steps=300, anchor=0.1))
"""How far adapting may go, gentlest first: ``geomol finetune``'s former fixed setting, and a longer, looser one."""


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
        reason: ``"helps"`` (adapted: within-set validation says so), ``"does_not_help"`` (not adapted),
            ``"too_few"`` (not adapted: too few measured ligands to validate) or ``"forced"`` (the user's setting).
        ligands: measured ligands used.
        base: the model as it is on the held-out pairs (``None`` without pairs).
        candidates: each candidate setting on the same pairs.
        min_ligands: the fewest measured ligands a decision validates.
    """

    settings: FinetuneSettings
    reason: str
    ligands: int
    base: PairScore | None = None
    candidates: list[PairScore] = field(default_factory=list)
    min_ligands: int = 4

    @property
    def adapted(self) -> bool:
        """Whether the model's weights move (otherwise only its level is set)."""
        return self.settings.steps > 0

    def estimate(self) -> PairScore | None:
        """The within-set estimate of the setting used (the base model's when not adapted)."""
        return next((s for s in self.candidates if s.settings == self.settings), self.base)

    def message(self) -> str:
        """The decision and its estimate in words, for the user."""
        level = "only its level (a constant) was set to your ligands, so it ranks them as the base model does"
        if self.reason == "too_few":
            return (f"not adapted: {self.ligands} measured ligands are too few to check whether adapting helps "
                    f"(at least {self.min_ligands} are needed to hold out a pair and adapt on the rest); {level}.")
        base = self.base
        lines = [f"within your {self.ligands} measured ligands, each held-out pair predicted by the model adapted on "
                 f"the other {self.ligands - 2} (leave-pair-out, {base.pairs} pairs): the base model orders "
                 f"{base.describe()} right"]
        lines += [f"adapted ({_setting_words(s.settings)}): {s.describe()}" for s in self.candidates]
        text = "; ".join(lines)
        if self.reason == "helps":
            gain = 100 * (self.estimate().accuracy - base.accuracy)
            return f"{text}. Adapted with {_setting_words(self.settings)} (+{gain:.0f} points over the base model)."
        if self.reason == "forced":
            gain = 100 * (self.estimate().accuracy - base.accuracy)
            caution = "" if gain > 0 else " This estimate says adapting does not help here: check the model on " \
                                          "ligands you held out, or leave the setting to geomol."
            return f"{text}. Adapted with your setting ({gain:+.0f} points over the base model).{caution}"
        return f"{text}. Not adapted: no setting ordered more held-out pairs right than the base model; {level}."

    def to_dict(self) -> dict:
        return {"reason": self.reason, "adapted": self.adapted, "settings": asdict(self.settings),
                "ligands": self.ligands, "base": None if self.base is None else self.base.to_dict(),
                "candidates": [s.to_dict() for s in self.candidates], "message": self.message()}


def held_out_pairs(measured: Sequence[float], max_pairs: int, seed: int = 0) -> list[tuple[int, int]]:
    """The pairs (i, j), i < j, of measured ligands with different pK; at most ``max_pairs`` of them, a seeded
    random choice when there are more."""
    y = np.asarray(measured, dtype=float)
    pairs = [(i, j) for i in range(len(y)) for j in range(i + 1, len(y)) if y[i] != y[j]]
    if len(pairs) > max_pairs:
        keep = np.random.default_rng(seed).choice(len(pairs), size=max_pairs, replace=False)
        pairs = [pairs[p] for p in sorted(keep)]
    return pairs


def _ordered_right(pred: torch.Tensor, y: torch.Tensor, i: int, j: int) -> float:
    """1 when the predicted difference of ligands i and j has the measured sign, 0.5 for a predicted tie, else 0."""
    predicted = torch.sign(pred[i] - pred[j])
    return 0.5 if predicted == 0 else float(predicted == torch.sign(y[i] - y[j]))


def pair_scores(model, graphs: Sequence[BlockGraph], measured: Sequence[float],
                candidates: Sequence[FinetuneSettings], pairs: Sequence[tuple[int, int]]
                ) -> tuple[PairScore, list[PairScore]]:
    """The model as it is and every candidate setting on the held-out ``pairs`` (see the module notes).

    Args:
        model: an :class:`~geomol.inference.affinity_model.AffinityModel` of any member kind.
        graphs: the k measured complexes, built with ``model.recipe``; measured: their ``(k,)`` pK.
        pairs: index pairs into them, each with different measured pK.

    Returns:
        The base model's score and each candidate's, on the same pairs; an ensemble's members are adapted each
        and their predictions averaged, as :func:`~geomol.training.finetune.finetune_model` does.
    """
    y = torch.tensor(list(measured), dtype=model.dtype)
    with torch.no_grad():
        inputs = model.members[0].inputs(list(graphs))  # members share their configuration, so their inputs too
        starts = [member.finetune_start().to(y.dtype).eval() for member in model.members]
        frozen = [start.frozen(inputs) for start in starts]
        base = torch.stack([start.head(f) for start, f in zip(starts, frozen)]).mean(0)
    scores = []
    for settings in candidates:
        right = 0.0
        for i, j in pairs:
            weights = torch.ones_like(y)
            weights[[i, j]] = 0.0
            fitted = [fit_started(copy.deepcopy(start), f, y, settings, weights) for start, f in zip(starts, frozen)]
            with torch.no_grad():
                pred = torch.stack([m.head(f) for m, f in zip(fitted, frozen)]).mean(0)
            right += _ordered_right(pred, y, i, j)
        scores.append(PairScore(settings, right, len(pairs)))
    return PairScore(None, sum(_ordered_right(base, y, i, j) for i, j in pairs), len(pairs)), scores


@dataclass(frozen=True)
class FinetuneChoice:
    """Decide whether and how far to fine-tune from the measured ligands themselves (see the module notes).

    Attributes:
        candidates: the settings tried, gentlest first (of equally good ones the first is used); with ``forced``,
            the one setting used whatever its estimate (which is still reported).
        min_gain: the fraction of held-out pairs by which the best candidate must beat the model as it is.
        max_pairs: pairs held out at most (each costs one fit per candidate and member).
        min_ligands: fewer measured ligands than this are not validated; the level alone is set.
        seed: the choice of pairs when there are more than ``max_pairs``.
        forced: use ``candidates[0]`` (the user's setting) and only report its estimate.
    """

    candidates: tuple[FinetuneSettings, ...] = DEFAULT_CANDIDATES
    min_gain: float = 0.0
    max_pairs: int = 30
    min_ligands: int = 4
    seed: int = 0
    forced: bool = False

    def __post_init__(self):
        if not self.candidates or (self.forced and len(self.candidates) != 1):
            raise ConfigError(f"fine-tuning needs candidate settings (exactly one when forced), got {self.candidates}")
        if not 0 <= self.min_gain < 1 or self.max_pairs < 1 or self.min_ligands < 4:
            raise ConfigError(f"fine-tuning choice needs 0 <= min_gain < 1, max_pairs >= 1 and min_ligands >= 4, got "
                              f"{self.min_gain}, {self.max_pairs}, {self.min_ligands}")

    @classmethod
    def of_setting(cls, settings: FinetuneSettings, **options) -> "FinetuneChoice":
        """The user's own setting, used whatever its within-set estimate (reported all the same)."""
        return cls(candidates=(settings,), forced=True, **options)

    def decide(self, model, graphs: Sequence[BlockGraph], measured: Sequence[float]) -> FinetuneDecision:
        """The setting to fine-tune ``model`` with on the measured complexes, and the estimate behind it."""
        k = len(measured)
        pairs = held_out_pairs(measured, self.max_pairs, self.seed) if k >= self.min_ligands else []
        if not pairs:
            settings = self.candidates[0] if self.forced else LEVEL_ONLY
            return FinetuneDecision(settings, "forced" if self.forced else "too_few", k, min_ligands=self.min_ligands)
        base, scores = pair_scores(model, graphs, measured, self.candidates, pairs)
        best = max(scores, key=lambda score: score.right)  # the first of equals: the gentlest
        if self.forced:
            return FinetuneDecision(best.settings, "forced", k, base, scores, self.min_ligands)
        helps = best.right - base.right > self.min_gain * len(pairs)
        return FinetuneDecision(best.settings if helps else LEVEL_ONLY, "helps" if helps else "does_not_help", k,
                                base, scores, self.min_ligands)
