"""Loading official GET parameters (``specs/GET.md`` §9, §11.7, Appendix K) into geomol modules.

Official core keys map one to one onto :class:`~geomol.models.get_core.GET`:

=========================  ==================================
official                   geomol
=========================  ==================================
``layer_{i}.*``            ``layers.{i}.attention.*``
``layernorm0_{i}.*``       ``layers.{i}.attention_norm.*``
``ffn_{i}.*``              ``layers.{i}.ffn.*``
``layernorm1_{i}.*``       ``layers.{i}.ffn_norm.*``
``*.rbf.rbf.offset``       ``*.rbf.offset``
=========================  ==================================

and the affinity / LEP wrapper keys onto :class:`~geomol.models.get.GETModel`:
``block_embedding.*`` → ``embedding.*``, ``encoder.encoder.*`` → ``encoder.*`` (then the core
map), ``edge_embedding.weight``, ``energy_ffn.*`` and ``class_ffn.*`` unchanged. Parameter
names inside the layers (``linear_qk``, ``att_mlp.0``, ``mlp_h.3``, …) are the official ones.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from os import PathLike

import torch
from torch import nn

from geomol.errors import ModelLoadError

__all__ = ["official_key_to_geomol", "convert_official_state_dict", "load_official_state_dict"]

_CORE_RULES = (
    (re.compile(r"^layer_(\d+)\."), r"layers.\1.attention."),
    (re.compile(r"^layernorm0_(\d+)\."), r"layers.\1.attention_norm."),
    (re.compile(r"^ffn_(\d+)\."), r"layers.\1.ffn."),
    (re.compile(r"^layernorm1_(\d+)\."), r"layers.\1.ffn_norm."),
    (re.compile(r"\.rbf\.rbf\.offset$"), ".rbf.offset"),
)
_WRAPPER_CORE = "encoder.encoder."
# Buffers of the pretraining model that prediction models drop (upstream deletes them too).
_PRETRAINING_ONLY = ("sigmas",)


def _core_key(key: str) -> str:
    for pattern, replacement in _CORE_RULES:
        key = pattern.sub(replacement, key)
    return key


def official_key_to_geomol(key: str, wrapper: bool) -> str:
    """The geomol name of one official key (``wrapper``: the key comes from a full predictor)."""
    if not wrapper:
        return _core_key(key)
    if key.startswith(_WRAPPER_CORE):
        return "encoder." + _core_key(key[len(_WRAPPER_CORE):])
    if key.startswith("block_embedding."):
        return "embedding." + key[len("block_embedding."):]
    return key


def _strip_module_prefix(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state_dict.items():
        while key.startswith("module."):  # DataParallel / DDP checkpoints
            key = key[len("module."):]
        out[key] = value
    return out


def convert_official_state_dict(state_dict: Mapping[str, torch.Tensor], wrapper: bool) -> dict[str, torch.Tensor]:
    """Rename an official state_dict to geomol names (no checks; see :func:`load_official_state_dict`).

    For a core module (``wrapper=False``) a full predictor checkpoint is accepted too: its
    ``encoder.encoder.*`` entries are the core, the rest (embeddings, heads) is not part of it.
    """
    state = _strip_module_prefix(state_dict)
    state = {k: v for k, v in state.items() if k not in _PRETRAINING_ONLY}
    if not wrapper and any(k.startswith(_WRAPPER_CORE) for k in state):
        state = {k[len(_WRAPPER_CORE):]: v for k, v in state.items() if k.startswith(_WRAPPER_CORE)}
    return {official_key_to_geomol(k, wrapper): v for k, v in state.items()}


def _read(state_dict) -> tuple[Mapping[str, torch.Tensor], str]:
    if isinstance(state_dict, (str, PathLike)):
        source = str(state_dict)
        try:
            loaded = torch.load(source, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is a load error for the user
            raise ModelLoadError(f"cannot read checkpoint ({type(exc).__name__}: {exc})", source=source) from exc
        if not isinstance(loaded, Mapping):
            raise ModelLoadError("checkpoint is not a state_dict (a pickled official module needs the "
                                 "official classes: save its state_dict() instead)", source=source)
        return loaded, source
    if not isinstance(state_dict, Mapping):
        raise ModelLoadError(f"expected a state_dict mapping, got {type(state_dict).__name__}", source="state_dict")
    return state_dict, "official state_dict"


def _listing(keys) -> str:
    keys = sorted(keys)
    shown = ", ".join(keys[:6])
    return shown + (f", … ({len(keys)} in all)" if len(keys) > 6 else "")


def load_official_state_dict(model: nn.Module, state_dict, *, source: str | None = None) -> nn.Module:
    """Copy official GET weights into ``model`` (a core :class:`GET` or a :class:`GETModel`).

    Args:
        model: the geomol module, built with the same hyper-parameters as the checkpoint.
        state_dict: an official ``state_dict`` (core keys of Appendix K, or a full
            ``AffinityPredictor`` / ``GraphPairClassifier`` layout of §11.7), or a path to one
            saved with ``torch.save``. A ``module.`` prefix is stripped; the pretraining-only
            ``sigmas`` buffer is ignored.
        source: name used in error messages.

    Raises:
        ModelLoadError: keys missing or unexpected, or a tensor shape differs.
    """
    state_dict, default_source = _read(state_dict)
    source = source or default_source
    own = model.state_dict()
    wrapper = any(k.startswith("encoder.") for k in own)
    converted = convert_official_state_dict(state_dict, wrapper)
    missing, unexpected = set(own) - set(converted), set(converted) - set(own)
    if missing or unexpected:
        parts = ([f"missing keys: {_listing(missing)}"] if missing else []) + \
                ([f"unexpected keys: {_listing(unexpected)}"] if unexpected else [])
        raise ModelLoadError("official GET checkpoint does not match the model; " + "; ".join(parts) +
                             " (check the hyper-parameters: n_layers, d_edge, vocabulary size, head)", source=source)
    wrong = [f"{k} {tuple(converted[k].shape)} vs model {tuple(own[k].shape)}"
             for k in own if converted[k].shape != own[k].shape]
    if wrong:
        raise ModelLoadError("shape mismatch (official vs geomol names): " + "; ".join(wrong[:6]) +
                             (f"; … ({len(wrong)} in all)" if len(wrong) > 6 else ""), source=source)
    model.load_state_dict(converted, strict=True)
    return model
