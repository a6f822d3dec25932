"""GET variants of the affinity recipe, as overrides of its config, and the settings of one fold's training.

A variant (:data:`VARIANTS`) is model and data ``init_args`` merged into a recipe's YAML (auxiliary objectives as
:mod:`geomol.tasks.objectives` components): the PLB + FEP+ recipe (``configs/get_affinity_default.yaml``,
:func:`plb_fold_overrides`) or the corpus recipe (``configs/get_affinity_corpus.yaml``,
:func:`corpus_fold_overrides`, whose data module draws the protocol's leave-cluster-out folds). Every fold trains
through the same config-driven path as ``geomol fit --config`` (:func:`geomol.tasks.runs.build_from_config`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from geomol.data.blocks import ligand_atom_mask
from geomol.data.paths import shared_data_dir
from geomol.data.vocab import atom_index
from geomol.errors import ConfigError
from geomol.evaluation.corpus_folds import PROTOCOL_SEED
from geomol.version import PACKAGE_DIR

__all__ = ["VARIANTS", "DEFAULT_SEED", "PLB_RECIPE", "CORPUS_RECIPE", "GETFold", "plb_fold_overrides",
           "corpus_fold_overrides", "heavy_atoms"]

PLB_RECIPE = PACKAGE_DIR.parent / "configs" / "get_affinity_default.yaml"
CORPUS_RECIPE = PACKAGE_DIR.parent / "configs" / "get_affinity_corpus.yaml"
DEFAULT_SEED = 12


def _term(name: str, **init_args) -> dict:
    return {"class_path": f"geomol.tasks.objectives.{name}", "init_args": init_args}


PHYSICS = "geomol.models.physics_readout.PhysicsReadout"
DECOYS = _term("DecoyLoss", weight=1.0, margin=1.0, fraction=0.5, kinds=["shift", "turn", "swap"])
CENTRED = _term("CentredLoss", weight=1.0, group_by="series")

# Variants: model and data init_args merged into the recipe (configs/get_affinity_default.yaml).
VARIANTS: dict[str, dict] = {
    "base": {"model": {}, "data": {}, "about": "the recipe: MSE on pK"},
    "lba_size": {"model": {"hidden": 64, "radial_dim": 32, "num_rbf": 32, "num_layers": 3}, "data": {},
                 "about": "the larger GET of the LBA configuration (hidden 64, 3 layers)"},
    "rank": {"model": {"loss_terms": [_term("RankingLoss", weight=1.0)]}, "data": {"group_batches": True},
             "about": "+ pairwise ranking loss between ligands of a target's batch"},
    "rank_series": {"model": {"loss_terms": [_term("RankingLoss", weight=1.0, group_by="series")]},
                    "data": {"group_batches": "series"},
                    "about": "+ pairwise ranking loss between ligands of one series (batches hold one series)"},
    "pocket8": {"model": {}, "data": {"pocket_cutoff": 8.0}, "about": "pocket of 8 Å instead of 10 Å"},
    "hydrogens": {"model": {}, "data": {"keep_hydrogens": True}, "about": "hydrogens kept (ligand and pocket)"},
    "fragments": {"model": {}, "data": {},  # + --fragment-vocab (geomol fragments learn)
                  "about": "ligand blocks = principal-subgraph fragments (≤ 12 heavy atoms) instead of atoms"},
    "rbfe": {"model": {"loss_terms": [_term("RelativeEdgeLoss", weight=1.0)]}, "data": {"group_batches": True},
             "about": "+ multi-task: squared error of ΔpK on the series' perturbation (RBFE) edges"},
    "pretrain": {"model": {"pretraining": _term("DenoisingPretraining", epochs=2, sigma=1.0)}, "data": {},
                 "about": "2 epochs of ligand-coordinate denoising (no labels) before the affinity epochs"},
    "pretrain_corpus": {"model": {"pretraining": _term("DenoisingPretraining", epochs=1, sigma=1.0)}, "data": {},
                        "about": "1 epoch of ligand-coordinate denoising (no labels) before the affinity epoch(s); "
                                 "for the corpus, run with one more epoch than the others"},
    "physics": {"model": {"readout": PHYSICS}, "data": {},
                "about": "physics-shaped read-out: ligand-receptor atom-pair vdW, H-bond, hydrophobic and metal "
                         "terms with GET-predicted parameters, over a rotatable-bond divisor"},
    "decoys": {"model": {"loss_terms": [DECOYS]}, "data": {},
               "about": "+ decoy hinge: shifted, turned and other-series ligands must score 1 pK below the true pose"},
    "physics_decoys": {"model": {"readout": PHYSICS, "loss_terms": [DECOYS]}, "data": {},
                       "about": "physics-shaped read-out + decoy hinge"},
    "physics_size_decoys": {"model": {"readout": "geomol.models.readouts.SizeAwarePhysicsReadout",
                                      "loss_terms": [DECOYS]}, "data": {},
                            "about": "physics-shaped read-out + a learned heavy-atom trend, with the decoy hinge"},
    "centred": {"model": {"mse_weight": 0.1, "loss_terms": [CENTRED]}, "data": {"group_batches": "series"},
                "about": "learning within series: MSE after centring on each series' batch mean (+ 0.1 x plain MSE)"},
    "pretrain_centred": {"model": {"pretraining": _term("DenoisingPretraining", epochs=1, sigma=1.0), "mse_weight": 0.1,
                                   "loss_terms": [CENTRED]}, "data": {"group_batches": "series"},
                         "about": "1 epoch of ligand-coordinate denoising on the training folds' structures (no labels), "
                                  "then the centred recipe; run with one more epoch than the others"},
    "size_aware": {"model": {"readout": "geomol.models.readouts.SizeAwareReadout"}, "data": {},
                   "about": "size-aware read-out: learned heavy-atom trend + residual MLP on the complex embedding"},
    "hybrid": {"model": {"readout": "geomol.models.readouts.HybridReadout"}, "data": {},
               "about": "hybrid read-out: heavy-atom trend + MLP of the complex embedding, ligand descriptors and "
                        "Morgan counts"},
}


@dataclass
class GETFold:
    """One fold of a GET variant's cross-validation.

    Attributes:
        fold, folds: which fold of how many; variant: a key of :data:`VARIANTS`; epochs: maximum epochs;
        seed: fold ``k`` trains with ``seed + k``; out_dir: checkpoints, logs and fold results;
        cache_dir: the processed store; fragment_vocab: the ``fragments`` variant's vocabulary;
        series, valid_fraction, limit_train_batches, val_check_interval: the corpus recipe's slice, validation
        slice and trainer budget.
    """

    fold: int
    out_dir: str
    folds: int = 5
    variant: str = "base"
    epochs: int = 12
    seed: int = DEFAULT_SEED
    cache_dir: str | None = None
    fragment_vocab: str | None = None
    series: list[str] | None = None
    valid_fraction: float = 0.1
    limit_train_batches: float = 1.0
    val_check_interval: float = 0.25

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ConfigError(f"GET variant is one of {sorted(VARIANTS)}, got {self.variant!r}")


def plb_fold_overrides(fold: GETFold) -> dict:
    """What a fold changes in the PLB + FEP+ recipe's config: data roots, fold, variant, seed and trainer settings."""
    variant, shared = VARIANTS[fold.variant], shared_data_dir()
    data = {**variant["data"], "plb_root": str(shared / "plb"), "fep_root": str(shared / "fep_benchmark"),
            "n_folds": fold.folds, "fold": fold.fold, "cache_dir": fold.cache_dir, "preprocess_workers": 1}
    if fold.variant == "fragments":
        if not fold.fragment_vocab:
            raise ConfigError("the fragments variant needs a vocabulary from `geomol fragments learn`")
        data["fragments"] = fold.fragment_vocab
    return _overrides(fold, variant, data, f"fold{fold.fold}", {"max_epochs": fold.epochs})


def corpus_fold_overrides(fold: GETFold) -> dict:
    """What a fold changes in the corpus recipe: data root, fold, the protocol's split seed, variant, seed and
    trainer settings (the checkpoint chosen on the fold's validation slice)."""
    variant = VARIANTS[fold.variant]
    data = {**variant["data"], "root": str(shared_data_dir()), "n_folds": fold.folds, "fold": fold.fold,
            "split_seed": PROTOCOL_SEED, "valid_fraction": fold.valid_fraction, "series": fold.series,
            "cache_dir": fold.cache_dir, "preprocess_workers": 1}
    trainer = {"max_epochs": fold.epochs, "limit_train_batches": fold.limit_train_batches,
               "val_check_interval": fold.val_check_interval}
    return _overrides(fold, variant, data, f"fold{fold.fold}_checkpoint", trainer)


def _overrides(fold: GETFold, variant: dict, data: dict, checkpoint_dir: str, trainer: dict) -> dict:
    out = Path(fold.out_dir).resolve()  # absolute: not moved below the config's default_root_dir
    checkpoint = {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                  "init_args": {"dirpath": str(out / checkpoint_dir), "monitor": "val/mean_target_spearman",
                                "mode": "max", "save_top_k": 1, "filename": "best"}}
    logger = {"class_path": "lightning.pytorch.loggers.CSVLogger",
              "init_args": {"save_dir": str(out), "name": f"fold{fold.fold}"}}
    trainer = {**trainer, "logger": logger, "callbacks": [checkpoint], "enable_progress_bar": False,
               "enable_model_summary": False}
    return {"seed_everything": fold.seed + fold.fold, "trainer": trainer, "model": {"init_args": variant["model"]},
            "data": {"init_args": data}}


def heavy_atoms(graph) -> int:
    """Heavy atoms of the ligand (segment 1, global atom excluded; hydrogens not counted)."""
    return int((ligand_atom_mask(graph) & (graph.A != atom_index("H"))).sum())
