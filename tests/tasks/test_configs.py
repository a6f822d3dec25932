"""Every shipped config trains for 2 steps and validates, with its data pointed at tiny real inputs."""
from __future__ import annotations

import csv
import glob
import importlib
import inspect
import io
import math
from pathlib import Path

import pytest
import torch
import yaml
from rdkit import Chem

from geomol.cli import main
from geomol.data.complexes.fragment import FragmentVocab
from tests import builders
from tests.conftest import REPO, shared_path

# one cluster each: a Uni-FEP series posed from SMILES (3 ligands) and three DDG folders (MOL2)
CORPUS_SLICE = ["uni_fep/ChEMBL__PNP__CHEMBL951777", "ddg_bindingdb/11GS", "ddg_bindingdb/1PXN", "ddg_bindingdb/1ETS"]
CONFIGS = sorted(Path(p).name for p in glob.glob(str(REPO / "configs" / "*.yaml")))


def _atom3d(tmp: Path, kind: str) -> list[str]:
    paths = builders.write_atom3d_splits(tmp / kind, kind)
    return ["--data.init_args.train", str(paths["train"]), "--data.init_args.valid", str(paths["val"]),
            "--data.init_args.test", str(paths["test"])]


def _overrides(name: str, tmp: Path) -> list[str]:
    plb = str(shared_path("plb"))
    if name == "get_plb.yaml":
        return ["--data.root", plb, "--data.init_args.targets", "[cdk2, cmet, ptp1b]",
                "--data.init_args.n_folds", "3"]
    if name == "get_affinity_default.yaml":
        return ["--data.init_args.plb_root", plb, "--data.init_args.fep_root", str(shared_path("fep_benchmark")),
                "--data.init_args.targets", "[cmet, ptp1b]", "--data.init_args.series", "[jacs_set/cdk2]",
                "--data.init_args.n_folds", "3"]
    if name in ("get_affinity_corpus.yaml", "get_affinity_corpus_long.yaml"):
        return ["--data.init_args.root", str(shared_path()), "--data.init_args.series", f"[{', '.join(CORPUS_SLICE)}]",
                "--data.init_args.n_folds", "4", "--data.init_args.valid_fraction", "0.4"]
    if name in ("get_lba.yaml", "get_lep.yaml"):
        return _atom3d(tmp, "lba" if name == "get_lba.yaml" else "lep")
    if name == "get_lba_ps.yaml":
        vocab = tmp / "ps.json"
        FragmentVocab.learn([Chem.MolFromSmiles(i["smiles"]) for i in builders.lba_items(3)], size=10).save(vocab)
        return _atom3d(tmp, "lba") + ["--data.init_args.fragments", str(vocab)]
    if name == "get_pdbbind_id30.yaml":
        root = tmp / "pdbbind"
        index = builders.write_pdbbind(root)
        ids = {}
        for split, codes in (("train", "1aaa\n2bbb\n"), ("valid", "3ccc\n"), ("test", "4ddd\n")):
            ids[split] = tmp / f"{split}.txt"
            ids[split].write_text(codes)
        return ["--data.init_args.roots", f"[{root}]", "--data.init_args.index_file", str(index),
                "--data.init_args.train_ids", str(ids["train"]), "--data.init_args.valid_ids", str(ids["valid"]),
                "--data.init_args.test_ids", str(ids["test"])]
    if name == "get_ppa.yaml":
        return ["--data.init_args.table", str(builders.write_ppa(tmp / "ppa")), "--data.init_args.valid_fraction",
                "0.2", "--data.init_args.test_fraction", "0.2"]
    if name == "get_protein_affinity.yaml":  # one small complex per cluster, three leave-cluster-out folds
        return ["--data.init_args.root", str(shared_path("protein_affinity")), "--data.init_args.ids",
                "[3Q8D, 3UIH, 3UII, 1KNE, 1M27, 5TAR, 2KSO, 1KTZ, 3LNZ, 2B12, 4M76, 5VNW]", "--data.init_args.n_folds", "3",
                "--data.init_args.valid_fraction", "0.3"]
    if name in ("get_nucleic_affinity.yaml", "get_nucleic_affinity_finetune.yaml"):  # 5 clusters, 3 folds
        return ["--data.init_args.root", str(shared_path("nucleic_affinity")), "--data.init_args.ids",
                "[2B57, 2G9C, 2XNW, 2XNZ, 4LVW, 4LVX, 1ARJ, 1UTS, 3FU2, 3Q50, 4NYC, 4NYD]", "--data.init_args.n_folds", "3",
                "--data.init_args.valid_fraction", "0.3"]
    if name == "egno_nbody.yaml":
        return ["--data.init_args.cache_dir", str(tmp / "nbody"), "--data.init_args.num_train", "60",
                "--data.init_args.num_valid", "20", "--data.init_args.num_test", "20", "--data.init_args.max_train", "60",
                "--data.init_args.batch_size", "20"]
    if name == "egno_mocap_run.yaml":
        return ["--data.init_args.path", str(shared_path("mocap_run", "cmu_subject09_run.npz"))]
    if name == "egno_md17.yaml":
        path = builders.write_md17(tmp / "md17_ethanol.npz", frames=600)
        return ["--data.init_args.path", str(path), "--data.init_args.delta", "40", "--data.init_args.margin", "50",
                "--data.init_args.batch_size", "10"]
    if name in ("egno_md.yaml", "egno_flow_md.yaml"):
        from MDAnalysisTests.datafiles import DCD, PSF
        return ["--data.init_args.topology", PSF, "--data.init_args.trajectory", DCD,
                "--data.init_args.selection", "name CA", "--data.init_args.batch_size", "2"] + (
            ["--data.init_args.test_trajectory", "null", "--trainer.val_check_interval", "2"]
            if name == "egno_flow_md.yaml" else [])
    if name == "egno_flow_molecule.yaml":  # Δ = 40 frames, P = 8: windows every 5 frames, velocity over 5
        path = builders.write_md17(tmp / "md17_ethanol.npz", frames=600)
        return ["--data.init_args.paths", f"[{path}]", "--data.init_args.test_paths", "null",
                "--data.init_args.delta", "40", "--data.init_args.skip_frames", "50", "--data.init_args.valid_stride",
                "5", "--data.init_args.batch_size", "10", "--trainer.val_check_interval", "2"]
    raise AssertionError(f"no test data for {name}")


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.filterwarnings("ignore:.*exceed the budget")
def test_config_trains_two_steps(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # loggers and checkpoints write below the working directory
    monkeypatch.setenv("GEOMOL_CACHE", str(tmp_path / "cache"))
    args = ["fit", "--config", str(REPO / "configs" / name), *_overrides(name, tmp_path),
            "--trainer.max_epochs", "1", "--trainer.limit_train_batches", "2", "--trainer.limit_val_batches", "1",
            "--trainer.check_val_every_n_epoch", "1", "--trainer.num_sanity_val_steps", "0",
            "--trainer.log_every_n_steps", "1"]
    if name.startswith("get_"):
        args += ["--data.init_args.max_blocks", "150", "--data.init_args.preprocess_workers", "0"]
    assert main(args) == 0
    checkpoints = list(tmp_path.glob("runs/**/checkpoints/*.ckpt"))
    assert checkpoints, "no checkpoint written"
    state = torch.load(checkpoints[0], weights_only=True)  # safe to load: tensors and plain values only
    assert state["global_step"] == 2
    metrics = (next(tmp_path.glob("runs/**/metrics.csv"))).read_text()
    assert "train/loss" in metrics and ("val/" in metrics)
    losses = [float(row["train/loss"]) for row in csv.DictReader(io.StringIO(metrics)) if row.get("train/loss")]
    assert losses and all(math.isfinite(loss) for loss in losses)


def _init_parameters(cls) -> set[str]:
    """Keyword arguments that ``cls(...)`` accepts, following ``**kwargs`` up the class hierarchy."""
    names = set()
    for klass in cls.__mro__:
        params = inspect.signature(klass.__init__).parameters.values() if "__init__" in vars(klass) else []
        names |= {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"}
        if not any(p.kind == p.VAR_KEYWORD for p in params) and "__init__" in vars(klass):
            break
    return names


@pytest.mark.parametrize("name", CONFIGS)
def test_config_names_lightning_classes_and_their_arguments(name):
    """Each config's model and data classes exist, are Lightning modules, and accept every argument it gives
    them; its trainer section holds only ``pl.Trainer`` arguments (cheap, before the training runs above)."""
    import lightning.pytorch as pl

    config = yaml.safe_load((REPO / "configs" / name).read_text())
    for section, base in (("model", pl.LightningModule), ("data", pl.LightningDataModule)):
        module, _, cls_name = config[section]["class_path"].rpartition(".")
        cls = getattr(importlib.import_module(module), cls_name)
        assert issubclass(cls, base)
        unknown = set(config[section].get("init_args", {})) - _init_parameters(cls)
        assert not unknown, f"{name}: {cls_name} takes no {sorted(unknown)}"
    unknown = set(config.get("trainer", {})) - set(inspect.signature(pl.Trainer.__init__).parameters)
    assert not unknown, f"{name}: pl.Trainer takes no {sorted(unknown)}"


@pytest.mark.filterwarnings("ignore")
def test_ema_and_fragment_vocab_size_through_the_cli(tmp_path, monkeypatch):
    """``geomol fit`` sizes the block embedding from the data's fragment vocabulary before building the
    model, so callbacks that copy the model at set-up (EMA weight averaging) see the real one."""
    from geomol.tasks.cli import GeomolCLI
    import lightning.pytorch as pl

    monkeypatch.chdir(tmp_path)
    vocab = tmp_path / "frag.json"
    _, mols = builders.plb_target("cdk2")
    FragmentVocab.learn(mols, size=12).save(vocab)
    args = ["--config", str(REPO / "configs" / "get_plb.yaml"), *_overrides("get_plb.yaml", tmp_path),
            "--data.init_args.fragments", str(vocab), "--data.init_args.cache_dir", str(tmp_path / "cache"),
            "--data.init_args.preprocess_workers", "0", "--model.init_args.hidden", "16",
            "--trainer.max_epochs", "1", "--trainer.limit_train_batches", "2", "--trainer.limit_val_batches", "1",
            "--trainer.logger", "false", "--trainer.enable_checkpointing", "false",
            "--trainer.callbacks", "lightning.pytorch.callbacks.EMAWeightAveraging"]
    cli = GeomolCLI(pl.LightningModule, pl.LightningDataModule, subclass_mode_model=True, subclass_mode_data=True,
                    args=["fit", *args], trainer_defaults={"use_distributed_sampler": False})
    assert cli.model.hparams.num_block_types == 150 + 12
    ema = next(c for c in cli.trainer.callbacks if type(c).__name__ == "EMAWeightAveraging")
    assert int(ema._average_model.n_averaged) >= 1


@pytest.mark.filterwarnings("ignore")
def test_last_checkpoint_is_fresh_when_validation_stops_improving(tmp_path, monkeypatch):
    """``last.ckpt`` must hold the latest validated state, not the last best one: a run resumed after an
    interruption continues where it stopped. With lr 0 the validation loss never improves after epoch 0."""
    monkeypatch.chdir(tmp_path)
    args = ["fit", "--config", str(REPO / "configs" / "egno_nbody.yaml"), *_overrides("egno_nbody.yaml", tmp_path),
            "--model.init_args.lr", "0", "--trainer.max_epochs", "3", "--trainer.limit_train_batches", "1",
            "--trainer.limit_val_batches", "1", "--trainer.check_val_every_n_epoch", "1",
            "--trainer.num_sanity_val_steps", "0"]
    assert main(args) == 0
    checkpoints = next(tmp_path.glob("runs/**/checkpoints"))
    assert sorted(p.name for p in checkpoints.iterdir()) == ["best-epoch=0.ckpt", "last.ckpt"]
    assert torch.load(checkpoints / "last.ckpt", weights_only=True)["epoch"] == 2


def test_enable_progress_bar_false_wins_over_a_configs_progress_bar(tmp_path, monkeypatch, capsys):
    """The shipped configs name RichProgressBar; ``--trainer.enable_progress_bar false`` turns it off, as on a plain
    Trainer (Lightning itself refuses the pair with a MisconfigurationException)."""
    monkeypatch.chdir(tmp_path)
    assert "RichProgressBar" in (REPO / "configs" / "egno_md.yaml").read_text()
    args = ["fit", "--config", str(REPO / "configs" / "egno_md.yaml"), *_overrides("egno_md.yaml", tmp_path),
            "--trainer.max_steps", "2", "--trainer.limit_val_batches", "1", "--trainer.num_sanity_val_steps", "0",
            "--trainer.enable_progress_bar", "false"]
    assert main(args) == 0
    assert list(tmp_path.glob("runs/**/checkpoints/*.ckpt"))
    assert "it/s" not in capsys.readouterr().out  # no bar drawn (Rich's shows a rate)
