"""Fine-tuning decided from the measured ligands (geomol.training.finetune_choice): the model is adapted with 10
steps by default, further where leave-pair-out within the measured ligands says a longer fit orders held-out pairs
better than the model as it is by the margin, and with 10 steps unchecked below 4 ligands; the decision and its
estimate are reported. One member of the default contact scorer on the tankyrase-2 example keeps every fit small."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

import geomol
from geomol.cli import main
from geomol.inference.affinity import build_complexes
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.ligand_inputs import ligand_inputs
from geomol.models.contact_scorer import ContactScorer
from geomol.training.finetune import FinetuneSettings, finetune_card, finetune_model, fit_started
from geomol.training.finetune_choice import DEFAULT, LEVEL_ONLY, FinetuneChoice, PairScore, fit_candidates
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"
RECEPTOR, LIGANDS = EXAMPLE / "tnks2_protein.pdb", EXAMPLE / "tnks2_ligands.sdf"
QUICK = FinetuneChoice(steps=(20, 60), lr=2e-2, anchor=0.0, min_gain=0.0, max_pairs=8)
"""Strong, short fits: a few held-out pairs show quickly whether adapting helps."""


@pytest.fixture(scope="module")
def one_member():
    base = geomol.load_model("contact-corpus")
    return AffinityModel(base.members[:1], base.arguments, base.recipe, name="contact-one")


@pytest.fixture(scope="module")
def graphs(one_member):
    records, built = build_complexes(str(RECEPTOR), ligand_inputs(str(LIGANDS)), one_member)
    return [g for g in built if g is not None]


def _names(graphs):
    return [g.name for g in graphs]


def test_goes_no_further_than_the_default_when_the_base_model_already_orders_the_measured_ligands(one_member, graphs):
    """Measured pK = the model's own predictions (+ 1): it orders every held-out pair right, no longer fit can do
    better, so the model is adapted with the default 10 steps only, and the message says so with the estimate."""
    base = one_member.predict(graphs)[0]
    measured = (base + 1.0).tolist()
    tuned, report = finetune_model(one_member, graphs, measured, _names(graphs), QUICK)
    decision = report.decision
    assert decision.reason == "default" and decision.settings == DEFAULT and decision.adapted
    assert decision.base.accuracy == 1.0 and decision.base.pairs == 8
    fit = tuned.metrics["finetune"]
    assert fit["settings"] == {"steps": 10, "lr": 1e-3, "anchor": 1.0} and fit["decision"]["reason"] == "default"
    message = fit["decision"]["message"]
    assert "base model orders 8 of 8 (100 %)" in message
    assert "Adapted with the default, 10 steps, anchor 1" in message and "Not adapted" not in message
    card = finetune_card(tuned, report, "tnks2_protein.pdb")
    assert message in card and "10 Adam steps" in card
    assert "Rule: adapt with 10 steps, anchor 1 (lr 0.001), unless the candidate" in card


def test_adapts_when_held_out_pairs_say_it_helps(one_member, graphs):
    """Measured pK in the reverse order of the model's: the base model orders no held-out pair right, a fit on the
    others does, so the model is adapted with the candidate that ordered most pairs right."""
    measured = (-one_member.predict(graphs)[0]).tolist()
    tuned, report = finetune_model(one_member, graphs, measured, _names(graphs), QUICK)
    decision = report.decision
    assert decision.reason == "helps" and decision.adapted and decision.settings in QUICK.candidates
    assert decision.base.accuracy == 0.0 and decision.estimate().accuracy > 0.5
    assert decision.estimate().right == max(s.right for s in decision.candidates)
    fit = report.to_dict()
    assert fit["spearman_after"] > fit["spearman_before"]
    message = fit["decision"]["message"]
    assert message.startswith(f"Within your {len(graphs)} measured ligands") and "Adapted with" in message
    card = finetune_card(tuned, report, "tnks2_protein.pdb")
    assert message in card and f"{decision.settings.steps} Adam steps" in card


def test_too_few_ligands_to_validate_use_the_choices_setting_and_say_so(one_member, graphs):
    measured = one_member.predict(graphs[:3])[0].tolist()
    _, report = finetune_model(one_member, graphs[:3], measured, _names(graphs[:3]), QUICK)
    assert report.decision.reason == "too_few" and report.decision.settings == DEFAULT and report.decision.adapted
    assert "too few" in report.decision.message() and "unchecked" in report.decision.message()
    level = replace(QUICK, unvalidated=LEVEL_ONLY)
    _, report = finetune_model(one_member, graphs[:3], measured, _names(graphs[:3]), level)
    assert not report.decision.adapted and "Not adapted" in report.decision.message()


def test_the_default_rule_adapts_10_steps_where_the_estimate_does_not_favour_more_and_below_4_ligands():
    """The adopted rule (chosen on validation targets): where no candidate beats the model as it is by more than
    the margin, and below 4 measured ligands, adapt with 10 steps (lr 0.001, anchor 1), not the offset alone; all
    measured pK equal: the offset alone (nothing to rank). No fitting: the rule on given pair scores."""
    choice = FinetuneChoice()
    assert (choice.min_gain, choice.steps, choice.min_ligands) == (0.3, (10, 30, 100), 4)
    ten = FinetuneSettings(steps=10, lr=1e-3, anchor=1.0)
    base = PairScore(None, 6.0, 10)
    scores = [PairScore(c, right, 10) for c, right in zip(choice.candidates, (6.0, 7.0, 9.0))]  # +30: not more
    decision = choice.conclude(6, base, scores)
    assert decision.settings == ten and decision.adapted and decision.reason == "default"
    assert decision.to_dict()["default"] == {"steps": 10, "lr": 1e-3, "anchor": 1.0}
    assert "Adapted with the default, 10 steps, anchor 1 (its estimate here: +0 points" in decision.message()
    further = choice.conclude(6, base, [*scores[:2], PairScore(choice.candidates[2], 9.5, 10)])  # +35
    assert further.settings.steps == 100 and further.reason == "helps" and "further than the default" in \
        further.message()
    few = choice.decide_started([], [], torch.tensor([6.0, 7.0, 8.0]))
    assert few.settings == ten and few.reason == "too_few" and few.adapted
    flat = choice.decide_started([], [], torch.full((5,), 7.0))
    assert flat.settings == LEVEL_ONLY and flat.reason == "no_spread" and "same pK" in flat.message()
    first = replace(choice, fallback=LEVEL_ONLY).conclude(6, base, scores)  # the first rule, for the benchmark
    assert not first.adapted and "Not adapted" in first.message()


def test_a_forced_setting_is_used_and_its_estimate_reported(one_member, graphs):
    measured = (one_member.predict(graphs)[0] + 0.5).tolist()
    own = FinetuneSettings(steps=20, lr=2e-2, anchor=0.0)
    _, report = finetune_model(one_member, graphs, measured, _names(graphs), replace(QUICK, forced=own))
    decision = report.decision
    assert decision.reason == "forced" and decision.settings == own
    assert [s.settings for s in decision.candidates] == [own]
    assert "your setting" in decision.message() and "does not say that adapting helps" in decision.message()


def test_a_candidate_read_along_a_longer_fit_ranks_as_its_own_fit(one_member, graphs):
    start = one_member.members[0].finetune_start().double().eval()
    frozen = start.frozen(start.inputs(graphs))
    measured = torch.linspace(5.0, 8.0, len(graphs), dtype=torch.float64)
    read = {}
    fit_candidates(start, frozen, measured, QUICK.candidates, None,
                   lambda c, m: read.__setitem__(c.steps, m.head(frozen).detach()))
    for candidate in QUICK.candidates:
        own = fit_started(start.finetune_start(), frozen, measured, candidate).head(frozen).detach()
        torch.testing.assert_close(read[candidate.steps] - read[candidate.steps].mean(), own - own.mean())


def test_the_contact_scorers_frozen_part_gives_its_forward_pass(one_member, graphs):
    """head(frozen(x)) = forward(x) in float64, with moved-pose views and the non-additive term too."""
    member = one_member.members[0]
    recipe = replace(member.recipe, moves=1, pose_views="augment")
    torch.manual_seed(0)
    scorer = ContactScorer(hidden=8, pooled=4, recipe=recipe).double().eval()
    batch = scorer.inputs(graphs)
    assert batch.views > 1
    with torch.no_grad():
        torch.testing.assert_close(scorer.head(scorer.frozen(batch)), scorer(batch))


def test_the_command_prints_and_records_the_decision(tmp_path, capsys):
    measured = tmp_path / "measured.csv"
    measured.write_text("name,pK\nlig_1a,6.268\nlig_3a,8.060\nlig_5a,7.886\n")
    out = tmp_path / "tnks2-contact"
    assert main(["finetune", "--receptor", str(RECEPTOR), "--ligands", str(LIGANDS), "--measured", str(measured),
                 "--out", str(out), "--threads", "1", "--method", "finetuned"]) == 0  # the default model anchors
    printed = capsys.readouterr().out
    decision = json.loads((out / "manifest.json").read_text())["metrics"]["finetune"]["decision"]
    assert decision["reason"] == "too_few" and decision["ligands"] == 3 and decision["settings"]["steps"] == 10
    printed = " ".join(printed.split())  # the console wraps lines
    assert "decision: Adapted with 10 steps, anchor 1 unchecked" in printed and "too few" in printed
    assert decision["message"].split(" (")[0] in (out / "README.md").read_text()
