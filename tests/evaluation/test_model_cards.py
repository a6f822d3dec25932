"""The corpus model's card is generated from the result files: the acceptance verdict and the tables say what
the numbers say (a model below a bar is marked so), never something typed in."""
from geomol.evaluation import model_cards


def _row(name, sp_ep, beats, sp_all=0.2, cpu=None):
    group = lambda sp, b: {"spearman": sp, "pearson": sp, "kendall": sp / 2, "beats_hac_fraction": b,  # noqa: E731
                           "spearman_with_hac": 0.5, "targets": 45}
    return {"variant": name, "about": f"about {name}", "cpu_seconds": cpu, "expert_pose": group(sp_ep, beats),
            "all": group(sp_all, beats)}


def _cv(model_ep, model_beats):
    rows = [_row("hac", 0.34, 0.0), _row("rf", 0.21, 0.34, cpu=120.0), _row("get_x", model_ep, model_beats, cpu=7200.0)]
    fields = ["target", "source", "fold", "n", "hac_spearman"] + [f"{r['variant']}:{s}" for r in rows
                                                                   for s in ("spearman", "pearson", "kendall",
                                                                             "spearman_with_hac")]
    per_target = [["plb/cdk2", "plb", 0, 10, 0.5] + [0.1, 0.1, 0.1, 0.1] * 3,
                  ["uni_fep/x", "uni_fep", 1, 12, 0.2] + [0.3, 0.3, 0.3, 0.3] * 3]
    return {"variants": rows, "per_target": {"fields": fields, "rows": per_target}}


def test_verdict_marks_every_bar_from_the_numbers():
    passing = model_cards.verdict(_cv(0.60, 0.70), "get_x")
    assert passing.count("| yes |") == 4 and "**no**" not in passing
    failing = model_cards.verdict(_cv(0.36, 0.50), "get_x")
    lines = [line for line in failing.splitlines() if line.startswith("| ") and "bar" not in line]
    assert [line.endswith("| **no** |") for line in lines] == [True, True, False, True]  # 0.36 − 0.21 ≥ 0.05


def test_verdict_measures_the_margin_to_the_strongest_ligand_only_model():
    cv = _cv(0.40, 0.70)
    cv["variants"].append(_row("gbm_series", 0.37, 0.5))
    verdict = model_cards.verdict(cv, "get_x")
    assert "best ligand-only model (0.370)" in verdict
    margin_line = next(line for line in verdict.splitlines() if "ligand-only" in line)
    assert margin_line.endswith("| **no** |")  # 0.40 − 0.37 < 0.05, although 0.40 − rf's 0.21 is not


def test_tables_show_the_shipped_row_and_only_expert_pose_targets():
    cv = _cv(0.40, 0.5)
    table = model_cards.variants_table(cv, "get_x")
    assert "**get_x** (shipped)" in table and "| 2.0 |" in table and "| 0.0 |" in table  # CPU hours
    per_target = model_cards.per_target_table(cv, "get_x")
    assert "plb/cdk2" in per_target and "uni_fep/x" not in per_target
    assert model_cards.fewshot_table(None) == "Not measured for this model."


def test_per_target_plot_is_a_png_of_the_expert_pose_targets(tmp_path, monkeypatch):
    cv = _cv(0.40, 0.5)
    plotted = []
    import matplotlib.axes

    original = matplotlib.axes.Axes.scatter
    monkeypatch.setattr(matplotlib.axes.Axes, "scatter",
                        lambda self, x, y, **kw: plotted.append((list(x), list(y))) or original(self, x, y, **kw))
    model_cards.per_target_plot(cv, "get_x", tmp_path / "targets.png", label="get-corpus")
    assert (tmp_path / "targets.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plotted == [([0.5], [0.1])]  # plb/cdk2 only: HAC 0.5, the model 0.1; the uni_fep target is not expert-pose


def test_rebuild_section_states_the_command_and_the_measured_agreement():
    command = "geomol train-affinity --config models/m.yaml --out models/m --overwrite"
    assert "was not measured" in model_cards.rebuild_section(command, None)
    pair = lambda epochs, mean: {"mean_abs_pk": mean, "shipped_origin": {"epoch": epochs[0]},  # noqa: E731
                                 "rebuilt_origin": {"epoch": epochs[1]}}
    agreement = {"shipped_members": [0, 1, 2], "complexes": 12345, "provenance": {"command": "python b.py"},
                 "ensemble": {"spearman": 0.9912, "mean_abs_pk": 0.0841, "p99_abs_pk": 0.321, "max_abs_pk": 0.602},
                 "members": [pair((3, 3), 0.01), pair((5, 9), 0.3), pair((2, 2), 0.04)]}
    text = model_cards.rebuild_section(command, agreement)
    assert f"    {command}\n" in text and "12,345 complexes (`python b.py`)" in text
    assert "Spearman 0.991, |ΔpK| mean 0.084, 99th percentile 0.32, max 0.60" in text
    assert "the 2 members whose validation chose the same epoch agree within a mean |ΔpK| of 0.040" in text
    agreement["members"] = [pair((3, 3), 0.01)]  # every member chose its epoch: no clause about the others
    assert "same epoch" not in model_cards.rebuild_section(command, agreement)
