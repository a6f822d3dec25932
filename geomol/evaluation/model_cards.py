"""Pieces of the affinity models' cards, written from result files (nothing typed in).

The corpus paragraph (:func:`data_section`, from ``benchmarks/corpus.py``'s result), the cross-validation's
variants table with the shipped row marked (:func:`variants_table`), the per-target table and plot of the
expert-pose targets (:func:`per_target_table`, :func:`per_target_plot`), the few-shot table
(:func:`fewshot_table`) and the acceptance verdict of issue 17 (:func:`verdict`); and the manifest's metrics and
applicability domain of a corpus-trained model (:func:`corpus_domain_and_metrics`). ``scripts/ship_*.py`` put
them together.
"""
from __future__ import annotations

import math
from pathlib import Path

from geomol.training.ligand_baselines import LIGAND_MODELS  # the ligand-only baselines of the corpus CV

__all__ = ["BAR", "SOURCES_ABOUT", "figure", "variants_table", "per_target_table", "per_target_plot", "data_section",
           "fewshot_table", "verdict", "corpus_domain_and_metrics", "training_graphs"]

BAR = {"spearman": 0.55, "margin": 0.05, "beats_hac": 0.60}  # issue 17's acceptance on the expert-pose targets
SOURCES_ABOUT = {"plb": "protein-ligand-benchmark, expert docked poses",
                 "fep_benchmark": "public FEP+ benchmark series, expert poses",
                 "uni_fep": "Uni-FEP series, SMILES posed on each series' reference ligand by geomol",
                 "ddg_bindingdb": "BindingDB series with docked MOL2 poses"}


def figure(x, digits: int = 3) -> str:
    """A number for a card: ``digits`` decimals, or a dash for none or NaN."""
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def variants_table(cv: dict, shipped: str) -> str:
    lines = ["| variant | what it is | Spearman EP | Spearman all | Pearson EP | Kendall EP | beats HAC EP / all "
             "| Spearman with HAC, EP | CPU h |", "|---|---|---|---|---|---|---|---|---|"]
    for row in cv["variants"]:
        ep, every = row["expert_pose"], row["all"]
        cpu = "–" if row["cpu_seconds"] is None else f"{row['cpu_seconds'] / 3600:.1f}"
        name = f"**{row['variant']}** (shipped)" if row["variant"] == shipped else row["variant"]
        lines.append(f"| {name} | {row['about']} | {figure(ep['spearman'])} | {figure(every['spearman'])} | "
                     f"{figure(ep['pearson'])} | {figure(ep['kendall'])} | {figure(100 * ep['beats_hac_fraction'], 0)} % / "
                     f"{figure(100 * every['beats_hac_fraction'], 0)} % | {figure(ep['spearman_with_hac'], 2)} | {cpu} |")
    return "\n".join(lines)


LIGAND_ONLY_COLUMNS = {"rf": "ligand-only RF", "gbm_series": "ligand-only GBM within series"}


def per_target_table(cv: dict, shipped: str) -> str:
    fields = cv["per_target"]["fields"]
    col = {name: i for i, name in enumerate(fields)}
    others = [k for k in LIGAND_ONLY_COLUMNS if f"{k}:spearman" in col]
    lines = ["| target | source | fold | ligands | this model | heavy-atom count | "
             + " | ".join(LIGAND_ONLY_COLUMNS[k] for k in others) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(others)]
    for row in cv["per_target"]["rows"]:
        if row[col["source"]] not in ("plb", "fep_benchmark"):
            continue
        mine = row[col[f"{shipped}:spearman"]] if f"{shipped}:spearman" in col else None
        ligand_only = " | ".join(figure(row[col[f"{k}:spearman"]], 2) for k in others)
        lines.append(f"| {row[col['target']]} | {row[col['source']]} | {row[col['fold']]} | {row[col['n']]} | "
                     f"{figure(mine, 2)} | {figure(row[col['hac_spearman']], 2)} | {ligand_only} |")
    return "\n".join(lines)


def per_target_plot(cv: dict, shipped: str, path: Path, label: str | None = None) -> None:
    """Scatter of each expert-pose target's Spearman: the heavy-atom count (x) against row ``shipped`` (y),
    written as a PNG to ``path``; ``label`` names the model on the y axis (default the row's name)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    col = {name: i for i, name in enumerate(cv["per_target"]["fields"])}
    rows = [r for r in cv["per_target"]["rows"] if r[col["source"]] in ("plb", "fep_benchmark")
            and r[col["hac_spearman"]] is not None and r[col[f"{shipped}:spearman"]] is not None]
    x, y = [r[col["hac_spearman"]] for r in rows], [r[col[f"{shipped}:spearman"]] for r in rows]
    figure, axes = plt.subplots(figsize=(4.6, 4.4))
    axes.plot([-1, 1], [-1, 1], color="grey", lw=0.8, label="as good as ligand size")
    axes.scatter(x, y, s=[8 + r[col["n"]] for r in rows], alpha=0.7)
    axes.set(xlim=(-1, 1), ylim=(-1, 1), xlabel="Spearman of the heavy-atom count",
             ylabel=f"Spearman of {label or shipped}", title=f"{len(rows)} expert-pose targets, protein held out")
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def data_section(corpus: dict) -> str:
    """The corpus paragraph and its table of sources (from ``benchmarks/corpus.py``'s result)."""
    counts = corpus["counts"]
    rows = "\n".join(f"| {s} | {SOURCES_ABOUT[s]} | {counts[s]['items']:,} | {counts[s]['series']} | "
                     f"{counts[s]['clusters']} |" for s in SOURCES_ABOUT)
    return (f"The affinity corpus (`configs/get_affinity_corpus.yaml`, `docs/training.md`), {counts['all']['items']:,} "
            f"labelled\nligands in {counts['all']['series']} series on {counts['all']['clusters']} protein clusters "
            "(sequence clusters\nshared across sources):\n\n| source | what | ligands | series | protein clusters |\n"
            f"|---|---|---|---|---|\n{rows}")


def fewshot_table(fewshot: dict | None) -> str:
    if not fewshot:
        return "Not measured for this model."
    lines = [f"{fewshot['description']}; {fewshot['draws']} draws per target, fine-tuning settings "
             f"{fewshot['settings']} (`benchmarks/affinity_fewshot.py`).", "",
             "| k | targets | n | untuned model | fine-tuned | heavy-atom count | k-shot size fit | fine-tuned > untuned |",
             "|---|---|---|---|---|---|---|---|"]
    for row in fewshot["summary"]:
        lines.append(f"| {row['k']} | {row['targets']} | {row['n_targets']} | {figure(row['base'])} | {figure(row['finetuned'])} "
                     f"| {figure(row['hac'])} | {figure(row['hac_k_fit'])} | {figure(100 * row['finetuned_beats_base_fraction'], 0)} % |")
    return "\n".join(lines)


def verdict(cv: dict, shipped: str) -> str:
    rows = {r["variant"]: r for r in cv["variants"]}
    ep = rows[shipped]["expert_pose"]
    hac = rows["hac"]["expert_pose"]["spearman"] if "hac" in rows else float("nan")
    ligand_only = max((rows[k]["expert_pose"]["spearman"] for k in LIGAND_MODELS if k in rows), default=float("nan"))
    checks = [(f"mean per-target Spearman on the expert-pose targets ≥ {BAR['spearman']}", ep["spearman"],
               ep["spearman"] >= BAR["spearman"]),
              (f"at least {BAR['margin']} above the heavy-atom count ({figure(hac)})", ep["spearman"] - hac,
               ep["spearman"] - hac >= BAR["margin"]),
              (f"at least {BAR['margin']} above the best ligand-only model ({figure(ligand_only)})",
               ep["spearman"] - ligand_only, ep["spearman"] - ligand_only >= BAR["margin"]),
              (f"beats the heavy-atom count on ≥ {100 * BAR['beats_hac']:.0f} % of expert-pose targets",
               ep["beats_hac_fraction"], ep["beats_hac_fraction"] >= BAR["beats_hac"])]
    lines = ["| acceptance bar (issue 17) | this model | met |", "|---|---|---|"]
    lines += [f"| {what} | {figure(value)} | {'yes' if ok else '**no**'} |" for what, value, ok in checks]
    return "\n".join(lines)


def corpus_domain_and_metrics(model, cv: dict, row_name: str, spread_every: int) -> dict:
    """Set ``model.domain`` from every corpus complex; return the manifest metrics of CV row ``row_name``."""
    from geomol.inference.domain import domain_from_graphs

    graphs = training_graphs()
    model.domain = domain_from_graphs(model, graphs, spread_every=spread_every,
                                      origin=f"the {len(graphs)} corpus complexes; ensemble spread on every "
                                             f"{spread_every}-th")
    row = {r["variant"]: r for r in cv["variants"]}[row_name]
    return {"cross_validation": {"expert_pose": row["expert_pose"], "all": row["all"]},
            "cv_description": cv["description"]}


def training_graphs() -> list:
    """Every corpus complex (from the processed store), to measure the applicability domain on."""
    from geomol.data.datasets.corpus import read_corpus
    from geomol.data.datasets.corpus_dataset import CorpusDataset
    from geomol.data.paths import shared_data_dir
    from geomol.data.splits.protein_clusters import load_protein_clusters

    corpus = read_corpus(shared_data_dir())
    clusters, _ = load_protein_clusters(corpus.receptors)
    dataset = CorpusDataset(corpus, clusters, num_workers=1, progress=False)
    return [dataset[i] for i in range(len(dataset))]


def rebuild_section(command: str, agreement: dict | None) -> str:
    """The card's "Rebuilding" section: the command, and how closely a rebuild predicted like the shipped model
    (a ``benchmarks/rebuild_agreement.py`` result; ``None``: not measured)."""
    text = f"## Rebuilding\n\n    {command}\n"
    if not agreement:
        return text + "\nHow closely a rebuild predicts like the shipped model was not measured.\n"
    ensemble, members = agreement["ensemble"], agreement["members"]
    same_epoch = [m for m in members if (m.get("shipped_origin") or {}).get("epoch") is not None
                  and m["shipped_origin"].get("epoch") == (m.get("rebuilt_origin") or {}).get("epoch")]
    lines = [f"A rebuild compared with the shipped members {agreement['shipped_members']} on "
             f"{agreement['complexes']:,} complexes (`{agreement['provenance']['command']}`): ensemble pK Spearman "
             f"{ensemble['spearman']:.3f}, |ΔpK| mean {ensemble['mean_abs_pk']:.3f}, 99th percentile "
             f"{ensemble['p99_abs_pk']:.2f}, max {ensemble['max_abs_pk']:.2f}"]
    if same_epoch and len(same_epoch) < len(members):
        worst = max(m["mean_abs_pk"] for m in same_epoch)
        lines.append(f"; the {len(same_epoch)} members whose validation chose the same epoch agree within a mean "
                     f"|ΔpK| of {worst:.3f}, the others chose another epoch")
    return text + "\n" + "".join(lines) + ".\n"
