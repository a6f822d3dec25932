"""The cards of the generative trajectory models (:mod:`geomol.evaluation.flow_cards`, ``scripts/ship_flow_models.py``)
from recorded results: a table per ensemble record and, for a model of many molecules, which molecules outside its
training set it samples within the bar."""
from types import SimpleNamespace

from geomol.evaluation import flow_cards as cards


def _row(run, js, off=0.0):
    kinds = dict(zip(cards.KINDS, js))
    return {"model": "egno-many", "run": run, "starts": [1, 2], "windows": 10, "js_divergence": kinds,
            "js_floor_half_against_half": kinds, "js_frozen_structure": kinds, "bond_deviation_from_md_mean_max_A": 0.2,
            "reference_bond_deviation_max_A": 0.1, "frames_with_a_bond_off_md_mean": off, "clash_frame_fraction": 0.0,
            "speed": {"simulated_ps_per_cpu_second": 50.0}}


def _record(command, rows):
    return {"meta": {"command": command}, "settings": {"starts": 2, "windows": 10, "seed": 0},
            "engine": {"aspirin": {"simulated_ps_per_cpu_second": 0.05}}, "rows": rows}


def _summary(molecule):
    return {"molecule": molecule, "smiles": "C", "atoms": 5, "frames": 100, "simulated_ps": 0.05,
            "engine": {"version": "0.8.0"}, "settings": {"temperature": 500, "timestep": 0.5, "seed": 1},
            "provenance": {"command": f"geomol simulate molecule {molecule}"}}


MAIN = _record("python benchmarks/rollout_ensembles.py --name main",
               [_row("aspirin", (0.5, 0.5, 0.5)), _row("furan", (0.05, 0.02, 0.01)),
                _row("paracetamol", (0.081, 0.1, 0.1))])
MORE = _record("python benchmarks/rollout_ensembles.py --name more",
               [_row("furan", (0.9, 0.9, 0.9)), _row("dmf", (0.1, 0.4, None)),
                _row("pyrimidine", (0.01, 0.01, 0.01), 1e-3), _row("tert_butanol", (0.02, 0.03, None))])


def test_zero_shot_lines_count_each_unseen_molecule_once_against_every_line():
    lines = cards.zero_shot_lines([MAIN, MORE], trained={"aspirin"})
    # furan from the first record (0.05/0.02/0.01), not the second; no torsion (None) passes that line
    assert lines[0].startswith("On 5 molecules outside its training set, 2 sampled within JS bond ≤ 0.08, angle ≤ "
                               "0.12, torsion ≤ 0.35") and lines[0].endswith(": furan, tert_butanol.")
    assert lines[1:] == ["- paracetamol: bond 0.081", "- dmf: bond 0.100, angle 0.400",
                         "- pyrimidine: 0.1 % of frames with a bond off"]
    assert cards.zero_shot_lines([MAIN], trained={"aspirin", "furan", "paracetamol"}) == []


def test_a_card_has_a_table_per_record_and_the_unseen_molecules_of_a_many_molecule_model():
    model = SimpleNamespace(protocol=SimpleNamespace(target_offsets=[375, 3000], frame_interval=0.0005,
                                                     velocity_span=375),
                            network=SimpleNamespace(sampling_steps=12, sampling_noise=0.75))
    text = cards.card("egno-many", model, [_summary("aspirin"), _summary("ethanol")], [MAIN, MORE],
                      train_command="geomol fit ...", limitations=["Heavy atoms only."])
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections == ["## Data (made here; not shipped)", "## Training",
                        "## Rollouts on runs it never saw, judged as MD is judged", "## More runs it never saw",
                        "## Molecules it never saw", "## Limitations", "## Reproduce", "## Use"]
    assert text.count("| egno-many | furan (2 starts × 10 windows) |") == 2
    assert "| 50.0 | 0.0500 | 1,000× |" in text  # aspirin's speed-up over the engine
    assert "12 steps of the flow's SDE with η = 0.75" in text and "- Heavy atoms only." in text
    reproduce = text.split("## Reproduce")[1]
    assert "--name main" in reproduce and "--name more" in reproduce
    one = cards.card("egno-one", model, [_summary("aspirin")], [MAIN])
    assert "## More runs it never saw" not in one and "## Molecules it never saw" not in one
    assert "aspirin's heavy atoms" in one
