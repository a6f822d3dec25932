"""geomol trains EGNO exactly as the official N-body script does (``specs/EGNO.md`` §3.1, §4).

The reference loop is written from the spec, not imported: the official data layout
(``loc_/vel_/charges_*.npy``, [S, T, 3, n]), frame 30 → frames 32 … 40, the complete graph in
i-outer order with edge features [q_i·q_j, ‖x_i − x_j‖²], node feature |v|, centroid of the input
frame, the flattened time-major loss (1/P) Σ_p mean_{n,d}(x̂ − x)², and ``torch.optim.Adam(lr,
weight_decay)`` stepped once per batch. geomol runs through Lightning with the recipe of
``configs/egno_nbody.yaml`` (its model arguments and every Trainer option that can touch an update:
precision aside, which is float64 here so that the two sides agree to rounding). Both start from the
same weights and see the same batches, read by geomol from the official files.
"""
from __future__ import annotations

import math
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
import yaml
from lightning.pytorch.callbacks import Callback

from geomol.data.datasets.trajectories.nbody import OFFICIAL_SUFFIX, generate_splits, save_official_files
from geomol.models.egno import EGNO, load_official_state_dict
from geomol.tasks import DynamicsModule, NBodyDataModule
from tests.models.egno_reference import official_initial_state, official_layout, spec_egno

REPO = Path(__file__).resolve().parents[2]
RECIPE = yaml.safe_load((REPO / "configs" / "egno_nbody.yaml").read_text())
# Trainer options that cannot change an optimisation step (logging, validation, stopping)
_NEUTRAL = {"default_root_dir", "max_epochs", "check_val_every_n_epoch", "log_every_n_steps", "logger", "callbacks"}
N_TRAIN, EPOCHS = 250, 2  # batch 100 → two full batches per epoch, 50 samples dropped


class Float64Split(torch.utils.data.Dataset):
    """A dataset whose float tensors are cast to float64 (the Trainer runs with precision 64-true)."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        graph = self.dataset[i]
        for key in ("X", "V", "X_target", "edge_attr"):
            graph[key] = graph[key].double()
        return graph


class Float64NBody(NBodyDataModule):
    def make_split(self, stage):
        return Float64Split(super().make_split(stage))


class Record(Callback):
    """Losses and the indices of the samples of every training batch, in order."""

    def __init__(self):
        self.losses, self.batches = [], []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.losses.append(float(outputs["loss"]))
        self.batches.append([int(name.rsplit("_", 1)[1]) for name in batch.name])


def official_batch(folder: Path, indices: list[int], P: int):
    """One batch built as ``main_simulation_simple_no.py::train`` does, from the raw official arrays."""
    loc = np.load(folder / f"loc_train{OFFICIAL_SUFFIX}.npy")[indices].transpose(0, 1, 3, 2)  # [B, T, n, 3]
    vel = np.load(folder / f"vel_train{OFFICIAL_SUFFIX}.npy")[indices].transpose(0, 1, 3, 2)
    q = np.load(folder / f"charges_train{OFFICIAL_SUFFIX}.npy")[indices, :, 0]  # [B, n]
    B, n = q.shape
    frame_0, delta = 30, 10
    x = torch.tensor(loc[:, frame_0].reshape(B * n, 3))
    v = torch.tensor(vel[:, frame_0].reshape(B * n, 3))
    targets = [torch.tensor(loc[:, frame_0 + delta * p // P].reshape(B * n, 3)) for p in range(1, P + 1)]
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    row = torch.tensor([b * n + i for b in range(B) for i, _ in pairs])
    col = torch.tensor([b * n + j for b in range(B) for _, j in pairs])
    qq = torch.tensor([[q[b, i] * q[b, j]] for b in range(B) for i, j in pairs])
    edge_fea = torch.cat([qq, (x[row] - x[col]).pow(2).sum(1, keepdim=True)], 1)
    loc_mean = x.view(B, n, 3).mean(1, keepdim=True).expand(B, n, 3).reshape(B * n, 3)
    return x, v.norm(dim=1, keepdim=True), torch.stack([row, col]), edge_fea, v, loc_mean, torch.cat(targets)


def official_step(params: dict, optimizer, batch, arch: dict) -> float:
    x, h, edge_index, edge_fea, v, loc_mean, target = batch
    pred, _, _ = spec_egno(params, arch["L"], arch["H"], arch["P"], arch["K"], arch["Dt"], x, h, edge_index,
                           edge_fea, v, loc_mean)
    per_frame = (pred - target).pow(2).view(arch["P"], -1, 3).mean(dim=(1, 2))
    loss = per_frame.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return float(loss)


def _model_args(recipe: dict = RECIPE) -> dict:
    args = dict(recipe["model"]["init_args"])
    for key in ("lr", "weight_decay"):  # YAML 1.1 reads "1e-08" as a string; the CLI casts it to float
        args[key] = float(args[key])
    return args


def _arch(args: dict) -> dict:
    return dict(L=args["num_layers"], H=args["hidden"], F=args["node_features"], E=args["edge_features"],
                P=args["num_timesteps"], K=args["num_modes"], Dt=args["time_embedding_dim"])


@pytest.mark.filterwarnings("ignore")
def test_training_steps_match_the_official_loop(tmp_path):
    args, data_args = _model_args(), RECIPE["data"]["init_args"]
    arch = _arch(args)
    folder = tmp_path / "simulation" / "dataset" / "simple"
    save_official_files(generate_splits(seed=43, num_train=N_TRAIN, num_valid=4, num_test=4), folder)
    start = official_layout(arch["L"], arch["H"], arch["F"], arch["E"], arch["P"], arch["K"], arch["Dt"], seed=3)

    task = DynamicsModule(**args)
    load_official_state_dict(task.model, start)
    data = Float64NBody(official_dir=str(folder.parent), batch_size=data_args["batch_size"],
                        num_timesteps=data_args["num_timesteps"], max_train=data_args["max_train"])
    record = Record()
    trainer_args = {k: v for k, v in RECIPE["trainer"].items() if k not in _NEUTRAL}
    pl.Trainer(default_root_dir=tmp_path, precision="64-true", max_epochs=EPOCHS, limit_val_batches=0, logger=False,
               enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
               use_distributed_sampler=False, callbacks=[record], **trainer_args).fit(task, data)

    # batch composition: full batches, each sample once per epoch, the remainder dropped, reshuffled per epoch
    B = data_args["batch_size"]
    per_epoch = N_TRAIN // B
    assert len(record.batches) == EPOCHS * per_epoch and all(len(b) == B for b in record.batches)
    epochs = [sum(record.batches[e * per_epoch:(e + 1) * per_epoch], []) for e in range(EPOCHS)]
    assert all(len(set(e)) == per_epoch * B for e in epochs)
    assert epochs[0] != epochs[1]

    params = {k: t.double().requires_grad_() for k, t in start.items()}
    optimizer = torch.optim.Adam(params.values(), lr=args["lr"], weight_decay=args["weight_decay"])
    reference_losses = [official_step(params, optimizer, official_batch(folder, b, arch["P"]), arch)
                        for b in record.batches]
    np.testing.assert_allclose(record.losses, reference_losses, rtol=1e-9)

    expected = EGNO(arch["F"], arch["E"], arch["H"], arch["L"], arch["P"], arch["K"], arch["Dt"]).double()
    load_official_state_dict(expected, {k: t.detach() for k, t in params.items()})
    trained = task.model.state_dict()
    for name, value in expected.state_dict().items():
        moved = (value - start_tensor(start, name, expected)).abs().max()
        assert torch.allclose(trained[name], value, rtol=0, atol=1e-12 + 1e-7 * float(moved)), name


def start_tensor(start: dict, name: str, model: EGNO) -> torch.Tensor:
    """The starting value of our parameter ``name`` (official keys mapped as the loader does)."""
    probe = EGNO(model.node_features, model.edge_features, model.hidden, len(model.layers), model.num_timesteps,
                 model.num_modes, model.time_embedding_dim).double()
    load_official_state_dict(probe, start)
    return probe.state_dict()[name]


@pytest.mark.parametrize("recipe", ["egno_nbody", "egno_mocap_run"])
def test_initial_weights_are_the_officials_for_the_same_seed(recipe):
    """Same seed, same random stream order → the official initial weights, bit for bit (spec §2.6)."""
    args = _model_args(yaml.safe_load((REPO / "configs" / f"{recipe}.yaml").read_text()))
    arch = _arch(args)
    official = official_initial_state(arch["L"], arch["H"], arch["F"], arch["E"], arch["K"], arch["Dt"], seed=1)
    torch.manual_seed(1)
    ours = DynamicsModule(**args).model
    expected = EGNO(arch["F"], arch["E"], arch["H"], arch["L"], arch["P"], arch["K"], arch["Dt"])
    load_official_state_dict(expected, official)
    for name, value in ours.state_dict().items():
        assert torch.equal(value, expected.state_dict()[name]), name


def test_initialisation_statistics():
    """Every parameter's initial distribution (spec §2.6, §5 quirk 2), checked on the N-body recipe."""
    torch.manual_seed(0)
    args = _model_args()
    model = DynamicsModule(**args).model
    H = args["hidden"]
    for name, p in model.named_parameters():
        p = p.detach().double()
        if name.startswith("time_convs."):  # U[0, 1)/(H·H): positive, mean 1/(2H²)
            low, high = 0.0, 1 / (H * H)
        elif name.startswith("vector_convs."):  # 0.1·U[0, 1)
            low, high = 0.0, 0.1
        else:  # Linear: weight and bias U(±1/√fan_in)
            module = model.get_submodule(name.rsplit(".", 1)[0])
            bound = 1 / math.sqrt(module.in_features)
            low, high = -bound, bound
        assert low <= float(p.min()) and float(p.max()) < high, name
        if p.numel() >= 256:  # mean and spread of a uniform law, 5 standard errors
            mean, std = (low + high) / 2, (high - low) / math.sqrt(12)
            assert abs(float(p.mean()) - mean) < 5 * std / math.sqrt(p.numel()), name
            assert abs(float(p.std()) - std) < 0.1 * std, name
