"""The contact scorer in the corpus cross-validation: out-of-fold predictions for every fold.

Reads every complex of the corpus from the processed store (``geomol preprocess --config
configs/get_affinity_corpus.yaml`` builds it; items missing from it are built here), turns each into
per-atom contact features (:mod:`geomol.data.chemistry.contact_features`) and its ligand descriptors, then for
each fold of the protocol (``docs/evaluation.md``: 5 leave-cluster-out folds, seed 0, each with a
validation slice of its training clusters) trains ``--seeds`` contact scorers
(:func:`geomol.training.contact_scorer.fit_contact_scorer`, epoch chosen on the validation slice) and averages
their scores on the fold's test items.

Writes ``OUT/fold{k}.csv`` (``id,prediction,fold,y,heavy_atoms``) and ``OUT/fold{k}.json`` (variant, settings,
chosen epochs and validation scores per seed, CPU seconds, provenance), the format
``benchmarks/affinity_corpus_cv.py --predictions NAME=OUT`` reads::

    OMP_NUM_THREADS=1 python benchmarks/affinity_corpus_contact.py --out-dir benchmarks/results/corpus_cv/contact
    python benchmarks/affinity_corpus_cv.py --baselines hac --predictions contact=benchmarks/results/corpus_cv/contact
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from rich.progress import track

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the protocol's folds, however this script is run
from affinity_corpus_cv import checked_folds  # noqa: E402
from geomol.training.contact_scorer import (CONTACT_LOSSES, ContactData, fit_contact_scorer,  # noqa: E402
                                   predict_contact_scorer, predict_views)
from geomol.data.chemistry.contact_features import (COUNT_FEATURES, RADIAL_CONTACT_FEATURES,  # noqa: E402
                                          graph_ligand_bonds, graph_pose_contacts, rigid_moves)
from geomol.data.splits.corpus import item_clusters  # noqa: E402
from geomol.data.chemistry.ligand_features import DESCRIPTOR_NAMES  # noqa: E402
from geomol.inference.finetune import FinetuneSettings  # noqa: E402
from geomol.training.ligand_baselines import select_ligand_model  # noqa: E402
from geomol.provenance import provenance  # noqa: E402
from geomol.tasks import CorpusDataModule  # noqa: E402

PROTOCOL_SEED = 0  # the fold seed of benchmarks/affinity_corpus_cv.py
FIELDS = ("id", "prediction", "fold", "y", "heavy_atoms")
HEAVY = DESCRIPTOR_NAMES.index("heavy_atoms")


class CorpusContacts(NamedTuple):
    """What :func:`corpus_contacts` read: item ids, their :class:`ContactData`, the protocol's folds (item indices
    by part), the protein cluster of every item, and the items' features in rigidly moved poses (``views``, when
    asked for as views rather than averaged)."""

    ids: list[str]
    data: ContactData
    folds: list[dict]
    clusters: np.ndarray
    views: list[ContactData]


def corpus_contacts(*, root: str | None = None, sources: list[str] | None = None, series: list[str] | None = None,
                    cache_dir: str | None = None, workers: int = 0, n_folds: int = 5, valid_fraction: float = 0.1,
                    chemistry: bool = False, bond_context: bool = False, radial: bool = False,
                    moves: tuple[np.ndarray, np.ndarray] | None = None, as_views: bool = False,
                    bonds: bool = False) -> CorpusContacts:
    """Every stored complex of the corpus (or of the given ``sources`` / ``series``) as contact features (with the
    interaction-role columns when ``chemistry``, the receptor classes by distance shell when ``radial``
    (:func:`~geomol.data.chemistry.contact_features.radial_contact_features`), with :func:`with_bond_context` when
    ``bond_context``; with ``moves`` (:func:`~geomol.data.chemistry.contact_features.rigid_moves`) averaged over the pose and
    its moved copies, or, ``as_views``, the moved copies as separate views); the item ids; the protocol's
    ``n_folds`` folds as item indices (``valid_fraction`` of each fold's training clusters held out for model
    selection); the protein cluster of every item. With ``bonds``, the data carry the ligands' bonds
    (:func:`~geomol.data.chemistry.contact_features.graph_ligand_bonds`) for a scorer passing messages along them."""
    module = CorpusDataModule(root=root, sources=sources, series=series, pocket_cutoff=10.0, cache_dir=cache_dir)
    dataset = module.make_dataset(workers)
    n_views = 1 + (len(moves[0]) if moves is not None and as_views else 0)
    atom_rows, descriptors, ligand_bonds = [[] for _ in range(n_views)], [], []
    for i in track(range(len(dataset)), description="contact features", transient=True):
        graph = dataset[i]
        poses = graph_pose_contacts(graph, chemistry=chemistry, radial=radial, moves=moves)
        graph_bonds = graph_ligand_bonds(graph) if bond_context or bonds else None  # rigid moves keep the bonds
        for view, rows in zip(atom_rows, poses if as_views else [np.mean(poses, axis=0)]):
            view.append(finished_rows(rows, graph_bonds if bond_context else None, radial))
        descriptors.append(graph.ligand_descriptors[0].numpy())
        if bonds:
            ligand_bonds.append(graph_bonds)
    items = dataset.corpus_items
    labels, keys = [item.label for item in items], [item.series for item in items]
    data, *views = [ContactData.from_items(rows, np.asarray(descriptors), labels, keys, ligand_bonds if bonds else None)
                    for rows in atom_rows]
    records = module.corpus.items
    record_clusters = item_clusters(records, module.clusters)
    folds, _ = checked_folds(records, record_clusters, n_folds, PROTOCOL_SEED, valid_fraction)
    position = {item.id: i for i, item in enumerate(items)}
    stored = [{part: [position[records[r].id] for r in idx if records[r].id in position] for part, idx in fold.items()}
              for fold in folds]
    cluster_of = dict(zip((record.id for record in records), record_clusters))
    return CorpusContacts([item.id for item in items], data, stored,
                          np.asarray([cluster_of[item.id] for item in items]), views)


def finished_rows(rows: np.ndarray, bonds: np.ndarray | None, radial: bool) -> np.ndarray:
    """One complex's contact rows as the scorer reads them: with the bonded neighbours' mean rows when given its
    ligand ``bonds`` (:func:`with_bond_context`), else with the radial shells log1p'd when ``radial``."""
    first_shell = rows.shape[1] - (len(RADIAL_CONTACT_FEATURES) if radial else 0)  # the shells come last
    counts = [c for c in COUNT_FEATURES if c < first_shell] + list(range(first_shell, rows.shape[1]))
    if bonds is not None:
        return with_bond_context(rows, bonds, counts)
    if radial:  # wider than the scorer's own log1p columns: logged here
        return log_counts(rows, counts)
    return rows


def log_counts(rows: np.ndarray, counts) -> np.ndarray:
    """``rows`` (float64 copy) with the columns ``counts`` log1p'd, as the scorer reads count columns."""
    logged = rows.astype(np.float64)
    counts = list(counts)
    logged[:, counts] = np.log1p(np.clip(logged[:, counts], 0.0, None))
    return logged


def with_bond_context(rows: np.ndarray, bonds: np.ndarray, counts=None) -> np.ndarray:
    """``(L, 2F)``: each ligand atom's contact row (count columns log1p'd, as the scorer reads them) followed by
    the mean of its bonded neighbours' rows (zeros for an atom without bonds): what the atoms next to it touch.

    Args:
        rows: ``(L, F)`` :func:`~geomol.data.chemistry.contact_features.graph_atom_contacts` rows.
        bonds: ``(B, 2)`` bonded atom pairs (:func:`~geomol.data.chemistry.contact_features.graph_ligand_bonds`).
        counts: the count columns of ``rows`` (default: those of :data:`COUNT_FEATURES` it has).
    """
    logged = log_counts(rows, [c for c in COUNT_FEATURES if c < rows.shape[1]] if counts is None else counts)
    ends, others = np.concatenate([bonds[:, 0], bonds[:, 1]]), np.concatenate([bonds[:, 1], bonds[:, 0]])
    summed = np.zeros_like(logged)
    np.add.at(summed, ends, logged[others])
    degree = np.bincount(ends, minlength=len(rows)).clip(min=1)
    return np.concatenate([logged, summed / degree[:, None]], axis=1)


def ligand_sums(data: ContactData) -> np.ndarray:
    """``(n, F + D)``: every item's contact features summed over its ligand atoms, then its descriptors."""
    sums = np.add.reduceat(data.atoms.double().numpy(), data.offsets[:-1], axis=0)  # every item has ≥ 1 atom
    return np.concatenate([sums, data.descriptors.double().numpy()], axis=1)


def boosted_fold(k: int, data: ContactData, train: list[int], fold: dict, args) -> tuple[np.ndarray, dict]:
    """Fold ``k`` of the within-series gradient boosting on :func:`ligand_sums` (``--model gbm_series``,
    :func:`geomol.training.ligand_baselines.select_ligand_model`): its test predictions and what was chosen on validation."""
    features, series = ligand_sums(data), data.keys
    selection = select_ligand_model("gbm_series", features, data.label, train, fold["valid"],
                                    data.keys[fold["valid"]].tolist(), seed=args.seed + k, groups=series)
    test = np.asarray(fold["test"], dtype=np.int64)
    return selection.predict(features[test], series[test]), {"chosen": selection.params,
                                                             "valid_mean_target_spearman": [selection.score]}


def run_fold(k: int, ids: list[str], data: ContactData, fold: dict, args, views: list[ContactData] = ()) -> dict:
    """Train the seeds of fold ``k`` (or its boosted model), write its predictions and record; return the record.
    With ``views`` (moved poses), training reads them as augmentation and predictions average over them."""
    clock = time.process_time()
    train = training_items(data, fold, args.train_sources)
    test = np.asarray(fold["test"], dtype=np.int64)
    if args.model == "gbm_series":
        pred, chosen = boosted_fold(k, data, train, fold, args)
        fits = []
    else:
        fits = [fit_contact_scorer(data, train, fold["valid"], loss=args.loss, epochs=args.epochs,
                                   seed=args.seed + 100 * k + s, hidden=args.hidden,
                                   descriptors=not args.no_descriptors, train_keys=args.train_keys,
                                   pooled=args.pooled, views=views, message_steps=args.message_steps)
                for s in range(args.seeds)]
        pred = np.mean([predict_views(fit.model, (data, *views), test) for fit in fits], axis=0)
        chosen = {"chosen_epochs": [fit.epoch for fit in fits],
                  "valid_mean_target_spearman": [fit.score for fit in fits]}
    cpu = time.process_time() - clock
    out = Path(args.out_dir)
    with open(out / f"fold{k}.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(FIELDS)
        writer.writerows([ids[i], f"{p:.4f}", k, f"{data.label[i]:.4f}", int(data.descriptors[i, HEAVY])]
                         for i, p in zip(test, pred))
    roles = " with interaction roles" if args.chemistry else ""
    context = (" and receptor classes by distance shell" if args.radial else "") + (
        " and the mean of its bonded neighbours' rows" if args.bond_context else "")
    if args.moves:
        context += (f", {'averaged over the pose and' if args.pose_views == 'smooth' else 'augmented by'} "
                    f"{2 * args.moves} rigid moves of the ligand ({args.shift:g} Å, {args.turn:g}°"
                    f"{'' if args.pose_views == 'smooth' else '; predictions averaged over them'})")
    about = (f"gradient boosting within series on the ligand's summed contact features{roles} + descriptors, "
             f"also centred on their series, fitted to the pK minus the series' mean"
             if args.model == "gbm_series" else
             f"per-atom contact MLP{roles}{context}{'' if args.no_descriptors else ' + descriptors'}, {args.loss} "
             f"loss within {args.compare_within}, mean of {args.seeds} seeds"
             + (f", hidden {args.hidden}" if args.hidden != 32 else "")
             + (f", non-additive term of width {args.pooled}" if args.pooled else "")
             + (f", {args.message_steps} rounds of messages along the ligand's bonds" if args.message_steps else ""))
    record = {"fold": k, "folds": args.folds, "model": "contact scorer", "variant": args.variant,
              "about": about + (f", trained on {' '.join(args.train_sources)} only" if args.train_sources else ""),
              "contact_model": args.model,
              "epochs": args.epochs if fits else 0, "loss": args.loss, "hidden": args.hidden, "pooled": args.pooled,
              "descriptors": not args.no_descriptors, "chemistry": args.chemistry, "bond_context": args.bond_context,
              "radial": args.radial, "compare_within": args.compare_within, "message_steps": args.message_steps,
              "moves": {"count": args.moves, "shift": args.shift, "turn": args.turn, "use": args.pose_views}
              if args.moves else None,
              "atom_features": int(data.atoms.shape[1]), "seeds": len(fits), **chosen,
              "split_sizes": {**{part: len(idx) for part, idx in fold.items()}, "train": len(train)},
              "train_sources": args.train_sources,
              "train_cpu_seconds": cpu, "test_items": len(test), "provenance": provenance()}
    if args.fewshot and fits:
        record["fewshot_rows"] = fewshot_rows(fits[0].model, data, train, test, k, args)
    (out / f"fold{k}.json").write_text(json.dumps(record, indent=1))
    print(f"fold {k}: {record.get('chosen_epochs', record.get('chosen'))}, validation "
          f"{np.mean(record['valid_mean_target_spearman']):.3f}, {cpu:.0f} CPU s", flush=True)
    return record


def fewshot_scores(model, data: ContactData, items: np.ndarray, k: int, draws: int, rng: np.random.Generator,
                   settings) -> dict[str, float]:
    """Mean Spearman over ``draws`` draws of k measured ligands among one target's ``items``, on its other ligands:
    the calibrated ``model`` as is, fine-tuned as ``geomol finetune`` does
    (:func:`~geomol.inference.finetune.adapt_contact_scorer`), the heavy-atom count and its k-fitted sign."""
    from affinity_fewshot import draw_scores
    from geomol.inference.finetune import adapt_contact_scorer

    atoms, owner, descriptors = data.batch(items)
    y = torch.as_tensor(data.label[items])

    def finetuned(chosen: np.ndarray, rest: np.ndarray) -> np.ndarray:
        keep = torch.from_numpy(np.isin(owner.numpy(), chosen))
        index = torch.full((len(items),), -1, dtype=torch.long)
        index[torch.from_numpy(chosen)] = torch.arange(len(chosen))
        tuned = adapt_contact_scorer(model, atoms[keep], index[owner[keep]], descriptors[torch.from_numpy(chosen)],
                                     y[chosen], settings)
        return predict_contact_scorer(tuned, data, items[rest])

    return draw_scores(data.label[items], data.descriptors[items, HEAVY].double().numpy(),
                       predict_contact_scorer(model, data, items), finetuned, k, draws, rng)


def fewshot_rows(model, data: ContactData, train: list[int], test: np.ndarray, fold: int, args) -> list[dict]:
    """Few-shot rows of a fold (``benchmarks/affinity_fewshot.py``'s protocol, for the contact scorer): the fold's
    seed-0 scorer, calibrated on its training items, adapted to k measured ligands of each expert-pose test target
    as ``geomol finetune`` does, scored on the others (:func:`fewshot_scores`)."""
    from geomol.training.contact_scorer import calibrate_contact_scorer
    from geomol.evaluation.targets import EXPERT_POSE_SOURCES, MIN_TARGET_LIGANDS

    calibrate_contact_scorer(model, data, train)
    settings, rng = FinetuneSettings(), np.random.default_rng(fold)
    rows = []
    for key in sorted(set(data.keys[test].tolist())):
        items = test[data.keys[test] == key]
        source = str(key).split("/", 1)[0]
        if source not in EXPERT_POSE_SOURCES:
            continue
        for k in args.fewshot:
            if len(items) >= max(k + 5, MIN_TARGET_LIGANDS):  # targets of the protocol, 5 ligands left to score
                scores = fewshot_scores(model, data, items, k, args.fewshot_draws, rng, settings)
                rows.append({"target": str(key), "source": source, "fold": fold, "n": len(items), "k": k,
                             **{m: round(float(v), 4) for m, v in scores.items()}})
    return rows


def training_items(data: ContactData, fold: dict, sources: list[str] | None = None) -> list[int]:
    """The fold's training items, only those of ``sources`` (series keys ``'<source>/...'``) when given."""
    return [i for i in fold["train"] if sources is None or str(data.keys[i]).split("/", 1)[0] in sources]


def build_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=None, help="shared data folder (default $GEOMOL_SHARED_DATA)")
    parser.add_argument("--sources", nargs="+", default=None, help="corpus sources (default all four)")
    parser.add_argument("--series", nargs="+", default=None, help="only these series (a quick slice)")
    parser.add_argument("--cache-dir", default=None, help="processed store (default $GEOMOL_CACHE)")
    parser.add_argument("--workers", type=int, default=0, help="processes building items missing from the store")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--fold", type=int, nargs="*", default=None, help="only these folds (default all)")
    parser.add_argument("--valid-fraction", type=float, default=0.1,
                        help="share of each fold's training clusters held out to choose the epoch (the protocol's 0.1)")
    parser.add_argument("--train-sources", nargs="+", default=None,
                        help="train on these sources' items only (validation and test items unchanged)")
    parser.add_argument("--model", choices=("mlp", "gbm_series"), default="mlp",
                        help="mlp: the contact scorer; gbm_series: gradient boosting within series on the ligand's "
                             "summed contact features and descriptors (geomol.training.ligand_baselines)")
    parser.add_argument("--loss", choices=sorted(CONTACT_LOSSES), default="ranking")
    parser.add_argument("--compare-within", choices=("series", "protein"), default="series",
                        help="training compares ligands within a series, or within a protein cluster (across its "
                             "assays); validation and test are scored per series either way")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=5, help="models per fold, their scores averaged")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--no-descriptors", action="store_true", help="per-atom contacts only")
    parser.add_argument("--pooled", type=int, default=0,
                        help="width of a non-additive term on the ligand's mean atom state (ContactScorer(pooled=))")
    parser.add_argument("--message-steps", type=int, default=0, metavar="N",
                        help="rounds of messages along the ligand's bonds before the per-atom read-out "
                             "(ContactScorer(message_steps=))")
    parser.add_argument("--chemistry", action="store_true",
                        help="add the interaction-role columns (donors, acceptors, charges, aromatic; "
                             "CHEMISTRY_CONTACT_FEATURES)")
    parser.add_argument("--bond-context", action="store_true",
                        help="append to each ligand atom's row the mean of its bonded neighbours' rows "
                             "(with_bond_context)")
    parser.add_argument("--radial", action="store_true",
                        help="append the receptor atoms by class and distance shell (RADIAL_CONTACT_FEATURES)")
    parser.add_argument("--moves", type=int, default=0, metavar="K",
                        help="K fixed random rigid moves of each ligand and their mirror images (rigid_moves: 2K "
                             "moved poses): its features in the moved poses are averaged with the pose's own "
                             "(--pose-views smooth) or read as augmentation in training and averaged over in "
                             "predictions (--pose-views augment)")
    parser.add_argument("--shift", type=float, default=0.3, help="Å, spread of each move's translation components")
    parser.add_argument("--turn", type=float, default=8.0, help="degrees, spread of each move's rotation angle")
    parser.add_argument("--pose-views", choices=("smooth", "augment"), default="smooth")
    parser.add_argument("--fewshot", type=int, nargs="*", default=None, metavar="K",
                        help="also measure few-shot fine-tuning on K measured ligands of each expert-pose test target")
    parser.add_argument("--fewshot-draws", type=int, default=5, help="draws of K ligands per target")
    parser.add_argument("--variant", default="contact", help="name recorded in the fold records")
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args(argv)
    if args.fewshot and (args.model != "mlp" or args.message_steps):
        parser.error("--fewshot fine-tunes the contact scorer: use it with --model mlp, without --message-steps")
    return args


def main(argv=None) -> list[dict]:
    args = build_args(argv)
    torch.set_num_threads(1)
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    moves = rigid_moves(args.moves, args.shift, args.turn) if args.moves else None
    corpus = corpus_contacts(root=args.root, sources=args.sources, series=args.series, cache_dir=args.cache_dir,
                             workers=args.workers, n_folds=args.folds, valid_fraction=args.valid_fraction,
                             chemistry=args.chemistry, bond_context=args.bond_context, radial=args.radial,
                             moves=moves, as_views=args.pose_views == "augment", bonds=args.message_steps > 0)
    args.train_keys = corpus.clusters if args.compare_within == "protein" else None
    chosen = range(args.folds) if args.fold is None else args.fold
    records = [run_fold(k, corpus.ids, corpus.data, corpus.folds[k], args, corpus.views) for k in chosen]
    if args.fewshot:
        from affinity_fewshot import format_summary, summarise

        rows = [row for record in records for row in record["fewshot_rows"]]
        summary = summarise(rows, args.fewshot)
        print(format_summary(summary))
        (Path(args.out_dir) / "fewshot.json").write_text(json.dumps(
            {"description": "few-shot fine-tuning of each fold's seed-0 contact scorer on k measured ligands of each "
                            "expert-pose test target; Spearman on the target's other ligands, mean over draws, then "
                            "over targets", "variant": args.variant, "k": args.fewshot, "draws": args.fewshot_draws,
             "settings": vars(FinetuneSettings()), "summary": summary, "rows": rows, "provenance": provenance()},
            indent=1) + "\n")
    return records


if __name__ == "__main__":
    sys.exit(main() and 0)
