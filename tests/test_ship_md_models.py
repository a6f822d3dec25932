"""The cards of the MD-trained models (:mod:`geomol.evaluation.dynamics_cards`, ``scripts/ship_md_models.py``): the
side-by-side table with the official code and its seed-noise verdict, and the evaluation section, from recorded
results (no training)."""
from geomol.evaluation import dynamics_cards as cards
from geomol.inference.dynamics.rollout_evaluation import RolloutScore, RolloutTable
from geomol.provenance import user_command


def _record(seed, geomol, official):
    return {"seed": seed, "table": [{"epoch": e, "geomol_test_s2s": g, "geomol_test_s2t": g / 2, "official_test_s2s": o}
                                    for e, g, o in zip((49, 99), geomol, official)]}


def test_side_by_side_table_and_seed_noise():
    records = [_record(2, (0.30, 0.20), (0.31, 0.22)), _record(1, (0.28, 0.18), (0.29, 0.19))]
    lines = cards.side_by_side_lines(records)
    assert "| 99 | 0.1800 (0.0900) | 0.2000 (0.1000) | 0.1900 | 0.2200 |" in lines
    verdict = cards.seed_noise_lines(records)[0]
    # means 0.19 and 0.205: gap 0.015 within the larger seed spread 0.03
    assert verdict.startswith("After 100 epochs: geomol 0.1900") and "0.0150, is within" in verdict
    apart = [_record(1, (0.3, 0.10), (0.3, 0.30)), _record(2, (0.3, 0.11), (0.3, 0.31))]
    assert "is outside" in cards.seed_noise_lines(apart)[0]


def test_evaluation_section_names_the_best_baseline():
    chemistry = {"bond_error_median_A": 0.02, "bond_error_max_A": 0.2, "angle_error_median_deg": 2.0,
                 "broken_bond_fraction": 0.0, "broken_bond_window_fraction": 0.0, "clash_fraction": 0.0}
    rows = [RolloutScore("EGNO (this model)", "model", 0.12, 0.08, chemistry, 10),
            RolloutScore("EGNN baseline, rolled out", "model", 0.18, 0.1, chemistry, 10),
            RolloutScore("no motion (last frame)", "baseline", 0.2, 0.12, chemistry, 10),
            RolloutScore("linear extrapolation", "baseline", 9.0, 3.0, chemistry, 10),
            RolloutScore("reference MD", "reference MD", None, None, chemistry, 10)]
    table = RolloutTable(rows, [1, 2], list(range(10)), "3 bonds and 2 angles from the topology")
    text = "\n".join(cards.evaluation_lines(table, "+1, +2 frames"))
    assert "0.1200 Å² against 0.1800 for the best baseline (EGNN baseline, rolled out): 33.3 % lower; against EGNN baseline, rolled out: 33.3 % lower, no motion (last frame): 40.0 % lower, linear extrapolation: 98.7 % lower." in text
    assert cards.relative_change(0.2163, 0.2157) == "0.3 % higher"
    assert "moves its bonds by a median 0.020 Å" in text


def test_seed_noise_at_the_last_epoch_both_sides_reached():
    # geomol trained longer than the official side: the verdict compares where both have a value
    records = [_record(1, (0.28, 0.18), (0.29, None)), _record(2, (0.30, 0.20), (0.33, None))]
    verdict = cards.seed_noise_lines(records)[0]
    assert verdict.startswith("After 50 epochs: geomol 0.2900") and "official 0.3100" in verdict
    assert "0.0200, is within the larger spread between one side's seeds (0.0400)" in verdict


def test_chemistry_verdict_against_the_aim():
    good = {"bond_error_median_A": 0.04, "broken_bond_fraction": 0.0}
    bad = {"bond_error_median_A": 0.04, "broken_bond_fraction": 0.25}
    assert "meets the aim" in cards.chemistry_verdict(RolloutScore("A", "model", 0.1, 0.1, good, 3))
    line = cards.chemistry_verdict(RolloutScore("B", "model", 0.1, 0.1, bad, 3))
    assert "broken (> 0.3 Å off) in 25 % of the predicted frames: does not meet" in line


def test_one_seed_per_side_gives_no_verdict():
    line = cards.seed_noise_lines([_record(1, (0.28, 0.18), (0.29, 0.19))])[0]
    assert line.endswith("no seed noise to compare it with.") and "a gap of 0.0100" in line


def test_commands_as_a_user_types_them():
    assert user_command("python geomol/__main__.py simulate protein p.pdb --seed 2") == "geomol simulate protein p.pdb --seed 2"
    assert user_command("python3.11 .../geomol simulate molecule aspirin") == "geomol simulate molecule aspirin"
    assert user_command("python -m geomol.cli fit --config c.yaml") == "geomol fit --config c.yaml"


def test_gap_and_spread_needs_two_seeds_a_side_for_a_verdict():
    # EGNO against a trained baseline (benchmarks/md17_baselines.py --seeds): means 0.0185 and 0.0179
    compared = cards.gap_and_spread([0.0196, 0.0174], [0.0177, 0.0181])
    assert abs(compared["gap"] - 0.0006) < 1e-12 and abs(compared["spread"] - 0.0022) < 1e-12
    assert compared["within_noise"]
    assert not cards.gap_and_spread([0.010, 0.011], [0.020, 0.021])["within_noise"]
    assert cards.gap_and_spread([0.0196], [0.0177, 0.0181]).keys() == {"gap"}
