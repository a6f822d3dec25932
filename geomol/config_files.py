"""Config files as plain data: read a YAML config, merge overrides into it, resolve its shared-data folders.

Every config geomol reads — a ``geomol fit`` config, a ``geomol train-affinity`` model config — is a mapping read
by :func:`read_config`; scripts and benchmarks change one by deep-merging overrides (:func:`merge_config`) and
command lines by ``KEY=VALUE`` items (:func:`key_value_overrides`). Nothing here imports torch or Lightning.
"""
from __future__ import annotations

import copy
from os import PathLike
from pathlib import Path
from typing import Any, Mapping

import yaml

from geomol.errors import ConfigError
from geomol.shipped_configs import expand_shared_data

__all__ = ["read_config", "merge_config", "key_value_overrides", "expand_shared_data_paths"]


def read_config(path: str | PathLike) -> dict[str, Any]:
    """A YAML config as a dict; unreadable files raise :class:`ConfigError`."""
    try:
        config = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read config: {exc}", source=path) from None
    if not isinstance(config, dict):
        raise ConfigError("a config must be a mapping (trainer, model, data, ...)", source=path)
    return config


def merge_config(base: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """``base`` with ``overrides`` merged in: mappings key by key (recursively), anything else replaced."""
    merged = copy.deepcopy(dict(base))
    for key, value in (overrides or {}).items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_config(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def key_value_overrides(items: list[str], option: str = "--model-arg") -> dict[str, Any]:
    """``["KEY=VALUE", ...]`` from a command line as ``{KEY: VALUE}``, each value read as YAML (``32`` an int,
    ``batch_max`` a string, ``[1, 2]`` a list), e.g. arguments of a config's model section.

    Raises:
        ConfigError: an item without ``=`` or without a key, naming ``option``.
    """
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{option} wants KEY=VALUE, got {item!r}")
        overrides[key] = yaml.safe_load(value)
    return overrides


def expand_shared_data_paths(section) -> None:
    """``${GEOMOL_SHARED_DATA}`` in the strings (and lists of strings) of a config section (a dict, nested dicts
    included, or a jsonargparse Namespace), resolved in place (:func:`geomol.shipped_configs.expand_shared_data`).
    Configs and recorded results keep the token; only what is instantiated gets the folder."""
    if section is None or not hasattr(section, "items"):
        return
    for key, value in list(section.items()):
        if isinstance(value, str):
            section[key] = expand_shared_data(value)
        elif isinstance(value, list) and any(isinstance(v, str) for v in value):
            section[key] = [expand_shared_data(v) if isinstance(v, str) else v for v in value]
        elif isinstance(value, dict):
            expand_shared_data_paths(value)
