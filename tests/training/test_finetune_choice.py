"""Fine-tuning decided from the measured ligands (geomol.training.finetune_choice): leave-pair-out within them says
whether adapting orders held-out pairs better than the model as it is; the decision and its estimate are reported.
One member of the default contact scorer on the tankyrase-2 example keeps every fit small."""
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
from geomol.training.finetune_choice import LEVEL_ONLY, FinetuneChoice, fit_candidates
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


def test_declines_when_the_base_model_already_orders_the_measured_ligands(one_member, graphs):
    """Measured pK = the model's own predictions (+ 1): it orders every held-out pair right, adapting cannot do
    better, so only the level is set and the adapted model ranks as the base model."""
    base = one_member.predict(graphs)[0]
    measured = (base + 1.0).tolist()
    tuned, report = finetune_model(one_member, graphs, measured, _names(graphs), QUICK)
    decision = report.decision
    assert decision.reason == "does_not_help" and decision.settings == LEVEL_ONLY and not decision.adapted
    assert decision.base.accuracy == 1.0 and decision.base.pairs == 8
    after = tuned.predict(graphs)[0]
    torch.testing.assert_close(after - base, torch.full_like(base, 1.0), atol=1e-6, rtol=0)
    fit = tuned.metrics["finetune"]
    assert fit["settings"]["steps"] == 0 and fit["decision"]["reason"] == "does_not_help"
    message = fit["decision"]["message"]
    assert "Not adapted" in message and "base model orders 8 of 8 (100 %)" in message


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
    assert report.decision.reason == "too_few" and report.decision.settings == LEVEL_ONLY
    assert "too few" in report.decision.message()
    adapting = replace(QUICK, unvalidated=FinetuneSettings(steps=20, lr=2e-2, anchor=0.0))
    _, report = finetune_model(one_member, graphs[:3], measured, _names(graphs[:3]), adapting)
    assert report.decision.adapted and "unchecked" in report.decision.message()


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
                 "--out", str(out), "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    decision = json.loads((out / "manifest.json").read_text())["metrics"]["finetune"]["decision"]
    assert decision["reason"] == "too_few" and decision["ligands"] == 3
    assert "decision: " in printed and "too few" in printed
    assert decision["message"].split(" (")[0] in (out / "README.md").read_text()
