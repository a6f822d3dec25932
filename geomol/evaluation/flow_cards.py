"""The card of a generative trajectory model (EGNOFlow; ``scripts/ship_flow_models.py``), from recorded results.

What the model learned from (the ``geomol simulate`` runs' summary JSONs: :func:`data_lines`), how it rolls out
on runs it never saw (tables of ``benchmarks/rollout_ensembles.py`` records, :func:`ensemble_lines`: JS divergences
of bonds, angles and torsions beside the MD's half-against-half floor and a frozen structure; bonds off their MD
means; clashes; simulated ps per CPU second against GFN2-xTB on the same molecule) and, for a model of many
molecules, which molecules outside its training set it samples within :data:`ZERO_SHOT_LINES`
(:func:`zero_shot_lines`). :func:`card` puts them together.
"""
from __future__ import annotations

from typing import Sequence

from geomol.provenance import user_command

__all__ = ["KINDS", "ZERO_SHOT_LINES", "data_lines", "ensemble_lines", "zero_shot_lines", "sampler_words", "card"]

KINDS = ("bond", "angle", "torsion")
ZERO_SHOT_LINES = {"bond": 0.08, "angle": 0.12, "torsion": 0.35}
"""Largest JS divergence per kind (with no frame's bond more than 0.3 Å off its MD mean) at which a molecule the
model never saw counts as sampled well: the bar of the roadmap's many-molecule model."""


def _cells(values: dict) -> str:
    return " / ".join("–" if values[k] is None else f"{values[k]:.3f}" for k in KINDS)


def data_lines(summaries: list[dict]) -> list[str]:
    """One Markdown item per training run: molecule, SMILES, atoms, the command that made it, frames, engine."""
    lines = []
    for s in summaries:
        settings = s["settings"]
        command = user_command(s["provenance"]["command"])
        lines.append(f"- {s['molecule']} (`{s['smiles']}`, {s['atoms']} atoms): `{command}`: {s['frames']} frames "
                     f"({s['simulated_ps']:.1f} ps), GFN2-xTB (tblite {s['engine']['version']}), "
                     f"{settings['temperature']:.0f} K, {settings['timestep']} fs steps, seed {settings['seed']}")
    return lines


def ensemble_lines(record: dict) -> list[str]:
    """The Markdown table of a ``benchmarks/rollout_ensembles.py`` record, a row per (model, run)."""
    lines = ["| model | run (never trained on) | JS bond / angle / torsion | MD half vs half | frozen start | "
             "another MD run | largest bond deviation from the MD mean, Å (MD's own) | "
             "frames with a bond > 0.3 Å off | frames with a clash | simulated ps per CPU s | GFN2-xTB ps per CPU s | "
             "speed-up |", "|---" * 12 + "|"]
    for row in record["rows"]:
        engine = record.get("engine", {}).get(row["run"])
        speed = row["speed"]["simulated_ps_per_cpu_second"]
        other = row.get("other_ensembles", {}).get("independent MD run")
        rate = (f"{engine['simulated_ps_per_cpu_second']:.4f} | {speed / engine['simulated_ps_per_cpu_second']:,.0f}×"
                if engine else "– | –")
        lines.append(f"| {row['model']} | {row['run']} ({len(row['starts'])} starts × {row['windows']} windows) | "
                     f"{_cells(row['js_divergence'])} | {_cells(row['js_floor_half_against_half'])} | "
                     f"{_cells(row['js_frozen_structure'])} | {_cells(other) if other else '–'} | "
                     f"{row['bond_deviation_from_md_mean_max_A']:.2f} ({row['reference_bond_deviation_max_A']:.2f}) | "
                     f"{100 * row['frames_with_a_bond_off_md_mean']:.1f}% | {100 * row['clash_frame_fraction']:.1f}% | "
                     f"{speed:.1f} | {rate} |")
    return lines


def zero_shot_lines(records: list[dict], trained: set[str]) -> list[str]:
    """Per run of a molecule outside ``trained``: whether it meets :data:`ZERO_SHOT_LINES` (a run in several
    records counts once, from the first)."""
    rows = {}
    for record in records:
        for row in record["rows"]:
            if row["run"] not in trained:
                rows.setdefault(row["run"], row)
    if not rows:
        return []
    misses = {run: _misses(row) for run, row in rows.items()}
    good = [run for run, missed in misses.items() if not missed]
    bar = ", ".join(f"{kind} ≤ {limit}" for kind, limit in ZERO_SHOT_LINES.items())
    lines = [f"On {len(rows)} molecules outside its training set, {len(good)} sampled within JS {bar} and no frame "
             f"with a bond more than 0.3 Å off its MD mean: {', '.join(good) or 'none'}."]
    return lines + [f"- {run}: {', '.join(missed)}" for run, missed in misses.items() if missed]


def _misses(row: dict) -> list[str]:
    """What a benchmark row misses of :data:`ZERO_SHOT_LINES` and the no-bond-off line, in words (none: within)."""
    js, off = row["js_divergence"], row["frames_with_a_bond_off_md_mean"]
    missed = [f"{kind} {js[kind]:.3f}" for kind, limit in ZERO_SHOT_LINES.items() if (js[kind] or 0.0) > limit]
    return missed + ([f"{100 * off:.2g} % of frames with a bond off"] if off > 0 else [])


COLUMNS = ("JS: Jensen–Shannon divergence (base 2) of each bond length, angle and torsion (0.02 Å, 2.5°, 10° "
           "bins), the mean per kind; MD half vs half: the run's first half against its second (the sampling floor); "
           "frozen start: one structure that never moves (no motion); another MD run: the training run of the same "
           "molecule against this one.")


def _method_lines(record: dict, columns: str = "") -> list[str]:
    """The benchmark's command and settings (then ``columns``, what the table's columns mean), and its table."""
    settings = record["settings"]
    return [f"`{record['meta']['command']}`: {settings['starts']} starts per run, {settings['windows']} windows each "
            f"(seed {settings['seed']}); the pooled frames against the whole run (after its first ps, every 10th "
            f"frame).{' ' + columns if columns else ''}", "", *ensemble_lines(record), ""]


def sampler_words(network) -> str:
    """How the model samples a window, in words."""
    if not network.sampling_noise:
        return f"{network.sampling_steps} Euler steps of the flow"
    return f"{network.sampling_steps} steps of the flow's SDE with η = {network.sampling_noise:g}"


def card(name: str, model, summaries: list[dict], records: list[dict], train_command: str = "", budget: str = "",
         limitations: Sequence[str] = ()) -> str:
    """The model card (Markdown) of ``model`` shipped as ``name``: what it learned from (``summaries``: the
    ``geomol simulate`` summary JSONs of its training runs), how (``train_command``, ``budget``), the tables of the
    ensemble benchmark's ``records`` (the first is the main one), the molecules outside its training set it samples
    within :data:`ZERO_SHOT_LINES` (a model of several molecules), ``limitations``, and how to reproduce and use it."""
    protocol = model.protocol
    offsets, interval = protocol.target_offsets, protocol.frame_interval or 0.0
    molecules = sorted({s["molecule"] for s in summaries})
    what = (f"{molecules[0]}'s heavy atoms" if len(molecules) == 1 else
            f"the heavy atoms of any small molecule (trained on {len(molecules)}: {', '.join(molecules)})")
    description = (f"Generative EGNO (EGNOFlow, conditional flow matching) for {what} at 500 K: each window samples "
                   f"the positions at +{offsets[0]} … +{offsets[-1]} frames ({interval * 1e3:g} fs each, up to "
                   f"{offsets[-1] * interval:g} ps) given one frame and the velocity over the last "
                   f"{protocol.velocity_span} frames ({sampler_words(model.network)} for each window), so a long "
                   "rollout samples the molecule's ensemble.")
    zero_shot = zero_shot_lines(records, set(molecules)) if len(molecules) > 1 else []
    lines = [f"# {name}", "", description, "", "## Data (made here; not shipped)", "", *data_lines(summaries), "",
             "## Training", "", f"- `{train_command}`" if train_command else "",
             f"- {budget}" if budget else "",
             "- windows of every frame after the first 1 ps (heat-up) of each run: the first 85 % train, the last 15 % "
             "validate; atoms matched to a "
             "user's file by the molecular graph" + ("" if len(molecules) > 1 else " (this molecule only)"), "",
             "## Rollouts on runs it never saw, judged as MD is judged", "", *_method_lines(records[0], COLUMNS),
             *(["## More runs it never saw", ""] + [line for r in records[1:] for line in _method_lines(r)]
               if records[1:] else []),
             *(["## Molecules it never saw", "", *zero_shot, ""] if zero_shot else []),
             "## Limitations", "", *[f"- {line}" for line in limitations], "",
             "## Reproduce", "", "```",
             *dict.fromkeys(user_command(s["provenance"]["command"]) for s in summaries),  # one line per command
             train_command or "", *(user_command(r["meta"]["command"]) for r in records),
             f"python scripts/ship_flow_models.py --name {name} ...", "```", "",
             "## Use", "", "```bash",
             f"geomol rollout --model {name} --topology molecule.xyz --start 3000 --windows 100 --out roll.xyz "
             "--compare", "```", ""]
    return "\n".join(line for line in lines if line is not None)
