"""GET affinity members trained without Lightning: the recipe of ``configs/get_affinity_default.yaml`` as a plain loop.

One member is a :class:`~geomol.models.get.GETAffinity` of a given configuration, initialised from its seed and
trained on every complex of a dataset for a fixed number of epochs (the shipped ``get-plb`` recipe: nothing is held
out, the epoch count chosen by cross-validation): MSE on pK, Adam with weight decay and the learning rate decayed
exponentially per step from ``lr`` to ``final_lr`` (:func:`~geomol.training.optim.adam_with_decay`), gradient norm
clipped, batches packed to a budget of blocks and shuffled with the seed ``data_seed + seed``
(:class:`~geomol.data.batching.sampler.DynamicBatchSampler`), a non-finite loss skipping its step — what
``geomol fit`` does with that config, without the Trainer. After every epoch the member's state (weights, optimiser,
schedule, random state) is written to its state file, so an interrupted member continues where it stopped and
ends as an uninterrupted one would.
"""
from __future__ import annotations

import os
import random
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from geomol.data.batching.loader import ResumableLoader
from geomol.data.batching.sampler import DynamicBatchSampler
from geomol.errors import ConfigError
from geomol.models.get import GETAffinity, GETConfig
from geomol.training.optim import adam_with_decay

__all__ = ["GETFit", "fit_get_member", "get_ensemble"]


@dataclass(frozen=True)
class GETFit:
    """How a GET member is trained (a train-affinity config's ``fit`` section).

    Attributes:
        epochs: passes over the data. lr, final_lr: the learning rate, decayed per step to ``final_lr`` (None: kept).
        weight_decay: Adam's. gradient_clip: largest gradient norm (None: not clipped).
        max_blocks: blocks per batch. data_seed: the batches of the member of seed s are shuffled with
            ``data_seed + s`` (the data seed of ``geomol fit`` configs is 12).
    """

    epochs: int = 10
    lr: float = 1e-3
    final_lr: float | None = 1e-5
    weight_decay: float = 1e-3
    gradient_clip: float | None = 1.0
    max_blocks: int = 2000
    data_seed: int = 12

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None, source=None) -> "GETFit":
        """From a config section; unknown keys raise :class:`ConfigError` naming those it takes."""
        values = dict(values or {})
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(f"fit: unknown key(s) {unknown} of a GET member (it takes {known})", source)
        fit = cls(**values)
        if fit.epochs < 1 or fit.max_blocks < 1:
            raise ConfigError(f"fit: epochs and max_blocks must be ≥ 1, got {fit.epochs} and {fit.max_blocks}", source)
        return fit


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    torch.manual_seed(seed)


def _save_state(path: Path, state: dict) -> None:
    work = path.with_name(f".{path.name}.tmp{os.getpid()}")
    torch.save(state, work)
    os.replace(work, path)


def fit_get_member(dataset, config: GETConfig, fit: GETFit, seed: int, *, state_path: str | os.PathLike | None = None,
                   log=print) -> tuple[GETAffinity, dict[str, Any]]:
    """Train one GET member on every item of ``dataset`` (BlockGraphs with pK in ``y``; ``sizes`` in blocks).

    Args:
        config: the architecture (``num_block_types`` must cover the dataset's recipe).
        fit: :class:`GETFit`. seed: initialises the weights (and, through ``fit.data_seed``, the batches).
        state_path: where the member's state is written after every epoch and read back to continue (None: not
            saved). A finished member's state is read back without training.
        log: called with one line per epoch.

    Returns:
        the trained member (eval mode) and its origin record (seed, epochs, steps, seconds).
    """
    state_path = None if state_path is None else Path(state_path)
    _seed_everything(seed)
    model = GETAffinity(config).train()
    sampler = DynamicBatchSampler(dataset.sizes, fit.max_blocks, shuffle=True, seed=fit.data_seed + seed)
    loader = ResumableLoader(dataset, sampler)
    schedule = adam_with_decay(model.parameters(), fit.lr, fit.weight_decay, fit.final_lr, fit.epochs * len(sampler))
    optimiser, scheduler = schedule["optimizer"], schedule["lr_scheduler"]["scheduler"]
    start, steps, seconds = 0, 0, 0.0
    if state_path is not None and state_path.is_file():
        state = torch.load(state_path, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        scheduler.load_state_dict(state["scheduler"])
        torch.random.set_rng_state(state["rng"])
        start, steps, seconds = int(state["epoch"]), int(state["steps"]), float(state["seconds"])
        log(f"seed {seed}: continuing after epoch {start} of {fit.epochs} ({state_path})")
    parameters = [p for p in model.parameters() if p.requires_grad]
    for epoch in range(start, fit.epochs):
        clock, losses = time.process_time(), []
        sampler.set_epoch(epoch)
        for batch in loader:
            pred = model(batch)
            loss = GETAffinity.loss(pred, batch.y)
            if not torch.isfinite(loss):  # as the reference trainers: skip the update
                log(f"seed {seed}: skipping step {steps}: non-finite loss")
                continue
            optimiser.zero_grad()
            loss.backward()
            if fit.gradient_clip is not None:
                torch.nn.utils.clip_grad_norm_(parameters, fit.gradient_clip)
            optimiser.step()
            scheduler.step()
            steps += 1
            losses.append(loss.detach().item())
        seconds += time.process_time() - clock
        if state_path is not None:
            _save_state(state_path, {"model": model.state_dict(), "optimiser": optimiser.state_dict(),
                                     "scheduler": scheduler.state_dict(), "rng": torch.random.get_rng_state(),
                                     "epoch": epoch + 1, "steps": steps, "seconds": seconds})
        log(f"seed {seed}: epoch {epoch + 1}/{fit.epochs}, training MSE {np.mean(losses):.3f} ({len(losses)} steps)")
    origin = {"seed": seed, "epochs": fit.epochs, "steps": steps, "train_cpu_seconds": round(seconds, 1),
              "fit": asdict(fit)}
    return model.eval(), origin


def get_ensemble(config, dataset, *, runs: str | os.PathLike | None = None,
                 log=print) -> tuple[list[GETAffinity], list[dict[str, Any]]]:
    """The GET members a train-affinity config describes (:class:`~geomol.training.ensemble_config.EnsembleConfig`:
    ``member`` a :class:`~geomol.models.get.GETConfig`, ``ensemble: {seeds: [...]}``, ``fit`` a :class:`GETFit`),
    each trained on every complex of ``dataset``, one after another.

    Args:
        runs: folder of the members' state files (``member_<i>.state.pt``): an interrupted build continues there.

    Raises:
        ConfigError: an unknown key of ``member``, ``ensemble`` or ``fit``, or no seeds, naming the config.
    """
    from geomol.training.ensemble_config import check_keys

    check_keys("member", config.member, GETConfig.names(), config.source, " of a GET member")
    check_keys("ensemble", config.ensemble, ("seeds",), config.source, " of GET members")
    seeds = [int(s) for s in config.ensemble.get("seeds", ())]
    if not seeds:
        raise ConfigError("ensemble: seeds lists the members' seeds (one member per seed)", config.source)
    architecture = GETConfig.from_mapping({"num_block_types": config.recipe.num_block_types, **config.member},
                                          config.source)
    if architecture.num_block_types < config.recipe.num_block_types:
        raise ConfigError(f"member: num_block_types {architecture.num_block_types} is below the recipe's "
                          f"{config.recipe.num_block_types} block types", config.source)
    fit = GETFit.from_dict(config.fit, config.source)
    if runs is not None:
        Path(runs).mkdir(parents=True, exist_ok=True)
    members, origins = [], []
    for i, seed in enumerate(seeds):
        state = None if runs is None else Path(runs) / f"member_{i}.state.pt"
        member, origin = fit_get_member(dataset, architecture, fit, seed, state_path=state, log=log)
        members.append(member)
        origins.append(origin)
    return members, origins
