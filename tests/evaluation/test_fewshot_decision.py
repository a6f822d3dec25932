"""The few-shot decision benchmark's rules on recorded draws (geomol.evaluation.fewshot_decision): the gate on the
base model's Spearman on the measured ligands adapts exactly below its threshold, the grid's choice follows the
worst budget's gain on constructed records, records written before ``base_inset`` get it by replaying their
draws (a draw that does not replay is refused), and ``geomol finetune``'s default rule is the gate option chosen on
the validation targets ("10 steps, or further where leave-pair-out says so")."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from geomol.evaluation.fewshot_decision import (LEAVE_PAIR_OUT_ONLY, InsetGate, add_inset, choose_gate,
                                                decided_spearman, gated_spearman, summarise_decided)
from geomol.metrics.scores import spearman
from geomol.training.finetune_choice import FinetuneChoice
from tests.conftest import REPO

CHOICE = LEAVE_PAIR_OUT_ONLY  # candidates 10, 30, 100 steps at lr 0.001, anchor 1; margin 0.3; else the level alone
ADOPTED = (InsetGate(1.01, 10, or_pairs=True), CHOICE)  # the gate option chosen on validation targets


def _record(inset: float, base: float, gain10: float, pairs: int = 0, right: dict | None = None) -> dict:
    """A draw: the base model's Spearman on the measured ligands (``inset``) and on the others (``base``), and the
    10-step candidate's gain over it on the others (30 and 100 steps: the base's)."""
    return {"base": base, "base_inset": inset, "always": base,
            "candidates": {"10/0.001/1": base + gain10, "30/0.001/1": base, "100/0.001/1": base},
            "pairs": pairs, "base_right": 5.0 if pairs else None, "right": right or {}}


def test_gate_adapts_below_its_threshold_only():
    gate = InsetGate(below=0.5, steps=10)
    assert gated_spearman(_record(0.2, 0.3, 0.1), gate, CHOICE, 5) == (pytest.approx(0.4), True)
    assert gated_spearman(_record(0.8, 0.3, 0.1), gate, CHOICE, 5) == (0.3, False)
    assert gated_spearman(_record(float("nan"), 0.3, 0.1), gate, CHOICE, 5) == (0.3, False)  # nothing to rank


def test_gate_with_pairs_also_adapts_where_leave_pair_out_says_so():
    """10 held-out pairs, base 5 right, 30 steps 9 right: the leave-pair-out rule adapts with 30 steps even though
    the base ranks the measured ligands well; the gate alone does not."""
    record = _record(0.9, 0.3, 0.1, pairs=10, right={"10/0.001/1": 5.0, "30/0.001/1": 9.0, "100/0.001/1": 6.0})
    record["candidates"]["30/0.001/1"] = 0.55
    assert gated_spearman(record, InsetGate(0.5, 10, or_pairs=True), CHOICE, 10) == (0.55, True)
    assert gated_spearman(record, InsetGate(0.5, 10), CHOICE, 10) == (0.3, False)


def test_choose_gate_picks_the_threshold_that_separates_helpful_from_harmful_draws():
    """Adapting (10 steps) gains 0.2 on targets whose measured ligands the base orders at Spearman 0, and loses 0.2
    where it orders them at 0.8: the gate must sit between (0.5 of the grid), not adapt never or always."""
    rows = []
    for k in (3, 5):
        for t in range(4):
            inset, gain = (0.0, 0.2) if t % 2 == 0 else (0.8, -0.2)
            rows.append({"target": f"t{t}", "k": k, "base_all": 0.4,
                         "draws": [_record(inset, 0.3 + 0.01 * d, gain + 0.01 * d) for d in range(3)]})
    gate, table = choose_gate(rows, CHOICE, [-1.0, 0.5, 1.01], [10, 100])
    assert gate == InsetGate(0.5, 10, False)
    by_option = {(o["below"], o["steps"], o["or_pairs"]): o for o in table}
    assert by_option[(0.5, 10, False)]["gain_per_k"][3] == pytest.approx(0.105)  # half the targets gain 0.21
    assert by_option[(1.01, 10, False)]["gain_per_k"][3] == pytest.approx(0.01)  # +0.21 and −0.19
    assert by_option[(-1.0, 10, False)]["bound"] == 0.0  # never adapting: the base model
    assert len(table) == 3 * 2 * 2


class _Start:
    """A scorer's fine-tuning start whose predictions are fixed per item."""

    def __init__(self, pred):
        self.pred = torch.as_tensor(pred, dtype=torch.float64)

    def to(self, dtype):
        return self

    def eval(self):
        return self

    def frozen(self, items):
        return items

    def head(self, items):
        return self.pred[torch.as_tensor(items)]


class _Model:
    def __init__(self, pred):
        self.start = _Start(pred)

    def finetune_start(self):
        return self.start


class _Data:
    def __init__(self, label):
        self.label = np.asarray(label)

    def batch(self, items):
        return np.asarray(items)


def test_add_inset_replays_the_draws_and_refuses_a_draw_that_does_not_match():
    rng = np.random.default_rng(0)
    pred, label = rng.normal(size=20), rng.normal(size=20)
    items = np.arange(2, 14)  # a target's items among the data's
    draws = np.random.default_rng(7)
    rows = []
    for k in (3, 5):
        row = {"target": "t", "k": k, "draws": []}
        for _ in range(2):
            chosen = draws.choice(len(items), size=k, replace=False)
            rest = np.setdiff1d(np.arange(len(items)), chosen)
            row["draws"].append({"base": spearman(pred[items][rest], label[items][rest]),
                                 "expected": spearman(pred[items][chosen], label[items][chosen])})
        rows.append(row)
    add_inset(_Model(pred), _Data(label), items, rows, np.random.default_rng(7))
    for record in (d for row in rows for d in row["draws"]):
        assert record["base_inset"] == pytest.approx(record["expected"])
    with pytest.raises(RuntimeError, match="does not match"):
        add_inset(_Model(pred), _Data(label), items, rows, np.random.default_rng(8))  # other draws


def test_the_default_rule_is_the_gate_option_chosen_on_validation_targets():
    """FinetuneChoice() (10 steps unless leave-pair-out favours a candidate by the margin) decides every draw as
    "adapt with 10 steps when the measured ligands' Spearman < 1.01, or as leave-pair-out says": on constructed
    draws, and on the benchmark's recorded validation draws (its selection set; the test draws are not read)."""
    right = {"10/0.001/1": 5.0, "30/0.001/1": 9.0, "100/0.001/1": 6.0}
    records = [(_record(0.9, 0.3, 0.1, pairs=10, right=right), 10),
               (_record(0.9, 0.3, 0.1, pairs=10, right=dict.fromkeys(right, 6.0)), 5),
               (_record(-0.5, 0.3, -0.1), 3), (_record(float("nan"), 0.3, 0.1), 3)]
    records[0][0]["candidates"]["30/0.001/1"] = 0.55
    outcomes = [decided_spearman(record, FinetuneChoice(), k) for record, k in records]
    assert outcomes == [gated_spearman(record, *ADOPTED, k) for record, k in records]
    assert [adapted for _, adapted in outcomes] == [True, True, True, False]
    result = json.loads((REPO / "benchmarks" / "results" / "affinity_fewshot_decision.json").read_text())
    valid = [row for row in result["rows"] if row["phase"] == "valid"]
    assert result["inset_gate"]["chosen"] == {"below": 1.01, "steps": 10, "or_pairs": True}
    summary, recorded = summarise_decided(valid, FinetuneChoice()), result["inset_gate"]["validation_summary"]
    assert len(summary) == len(recorded)
    for row, expected in zip(summary, recorded):  # pytest.approx compares flat mappings, not lists of them
        assert row == pytest.approx(expected, nan_ok=True)
