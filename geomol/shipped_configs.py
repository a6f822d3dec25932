"""The training configs that ship with geomol, by short name, from any directory.

The YAML files of the repository's ``configs/`` folder are installed with the package (``geomol/configs``,
package data); in a checkout ``geomol/configs`` is a link to ``configs/``. A config is named by its path
below that folder without ``.yaml`` (``get_plb``, ``egno_md17``, ``md17/aspirin``), so that
``geomol fit --config get_plb`` works from any directory; ``--config configs/get_plb.yaml`` names a file as
before, and falls back to the shipped config of that name when no such file exists where the command runs.
Their data folders are written as ``${GEOMOL_SHARED_DATA}/...`` and resolved when the config is used
(:func:`expand_shared_data`: ``$GEOMOL_SHARED_DATA``, ``geomol fit --shared-data DIR``, else the shared folder
beside the checkout, :func:`geomol.data.paths.shared_data_dir`), never relative to the working directory.

This module imports nothing heavy: ``geomol fit`` lists the configs without loading torch or Lightning.
"""
from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

from geomol.version import PACKAGE_DIR

__all__ = ["CONFIGS_DIR", "SHARED_DATA_TOKEN", "SHARED_DATA_OPTION", "shipped_configs", "config_summary",
           "resolve_config", "expand_shared_data", "config_listing", "take_shared_data_option",
           "resolve_config_arguments", "overview"]

CONFIGS_DIR = PACKAGE_DIR / "configs"
SHARED_DATA_TOKEN = "${GEOMOL_SHARED_DATA}"
_TOKEN = re.compile(r"\$\{GEOMOL_SHARED_DATA\}|\$GEOMOL_SHARED_DATA\b")


def shipped_configs() -> dict[str, Path]:
    """Short name → file of every shipped config, sorted (overlays in sub-folders as ``folder/name``)."""
    if not CONFIGS_DIR.is_dir():
        return {}
    files = sorted(CONFIGS_DIR.glob("*.yaml")) + sorted(CONFIGS_DIR.glob("*/*.yaml"))
    return {path.relative_to(CONFIGS_DIR).with_suffix("").as_posix(): path for path in files}


def _without_parentheses(text: str) -> str:
    kept, depth = [], 0
    for char in text:
        depth += char == "("
        if not depth:
            kept.append(char)
        depth -= char == ")" and depth > 0
    return re.sub(r"\s+([,.:;])", r"\1", " ".join("".join(kept).split()))


def config_summary(path: Path) -> str:
    """The first sentence of a config's leading comment (what it trains, on what), without parentheses."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if not text or text.startswith(("geomol ", "python ", "PDB=")):
            break
        lines.append(text)
    text = _without_parentheses(" ".join(lines))
    end = re.search(r"[.:;](\s|$)", text)
    return (text[:end.start()] if end else text).strip()


def _base_of(path: Path) -> str | None:
    """The config an overlay is used with (from its usage comment ``--config configs/X.yaml --config ...``)."""
    found = re.search(r"--config configs/([\w.-]+)\.yaml --config", path.read_text(encoding="utf-8"))
    return found.group(1) if found else None


def resolve_config(value: str) -> str:
    """A ``--config`` value as a file: ``value`` if it exists, else the shipped config it names (short name, or
    ``configs/<name>.yaml`` outside a checkout); unknown names are returned as they are (Lightning reports them)."""
    if os.path.exists(value) or value.lstrip().startswith(("{", "[")) or "\n" in value:
        return value
    name = value.removeprefix("configs/").removesuffix(".yaml").removesuffix(".yml")
    found = shipped_configs().get(name)
    return str(found) if found is not None else value


def expand_shared_data(value: str) -> str:
    """``value`` with ``${GEOMOL_SHARED_DATA}`` replaced by the shared data folder (see the module notes)."""
    if "GEOMOL_SHARED_DATA" not in value:
        return value
    from geomol.data.paths import shared_data_dir

    return _TOKEN.sub(lambda _: str(shared_data_dir()), value)


def config_listing(width: int = 80) -> str:
    """One line per shipped config (short name, what it trains, cut to ``width`` columns), and one per folder of
    overlays (data-set variants given after their base config)."""
    configs = shipped_configs()
    if not configs:
        return "no shipped configs found (geomol/configs is missing from this installation)"
    main = {name: path for name, path in configs.items() if "/" not in name}
    overlays: dict[str, list[str]] = {}
    for name in configs:
        if "/" in name:
            overlays.setdefault(name.split("/")[0], []).append(name.split("/", 1)[1])
    column = max(len(name) for name in main) + 2
    lines = [f"  {name:<{column}}" + textwrap.shorten(config_summary(path), width=max(20, width - column - 2),
                                                         placeholder=" …") for name, path in main.items()]
    for folder, names in overlays.items():
        base = _base_of(configs[f"{folder}/{names[0]}"])
        text = (f"with {base}: " if base else "") + ", ".join(names)
        lines.append(f"  {folder + '/…':<{column}}" + textwrap.shorten(text, width=max(20, width - column - 2),
                                                                      placeholder=" …"))
    return "\n".join(lines)


SHARED_DATA_OPTION = "--shared-data"


def take_shared_data_option(argv: list[str]) -> tuple[str | None, list[str]]:
    """(``--shared-data DIR`` value or None, ``argv`` without it). Raises ValueError without a value."""
    rest, value, i = [], None, 0
    while i < len(argv):
        arg = argv[i]
        if arg == SHARED_DATA_OPTION:
            if i + 1 >= len(argv):
                raise ValueError(f"{SHARED_DATA_OPTION} needs a folder")
            value, i = argv[i + 1], i + 2
            continue
        if arg.startswith(SHARED_DATA_OPTION + "="):
            value = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return value, rest


def resolve_config_arguments(argv: list[str]) -> list[str]:
    """``argv`` with every ``--config`` value resolved by :func:`resolve_config` (``--config X`` and ``--config=X``)."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--config" and i + 1 < len(out):
            out[i + 1] = resolve_config(out[i + 1])
        elif arg.startswith("--config="):
            out[i] = "--config=" + resolve_config(arg.split("=", 1)[1])
    return out


def overview(subcommand: str, width: int = 80) -> str:
    """What ``geomol <subcommand>`` prints without a config (or with ``--help`` and no config); lines ≤ 80 columns."""
    indent = " " * len(f"usage: geomol {subcommand} ")
    return "\n".join([
        f"usage: geomol {subcommand} --config NAME|FILE [--config OVERLAY] [--shared-data DIR]",
        f"{indent}[--threads N] [--key value ...]",
        "",
        "Shipped configs (--config NAME, from any directory; their data are read from",
        "$GEOMOL_SHARED_DATA or --shared-data DIR):",
        config_listing(width),
        "",
        "Change any setting on the command line (--trainer.max_epochs 5,",
        "--data.init_args.fold 2, ...); --print_config shows the whole config.",
        f"All options of a config: geomol {subcommand} --config NAME --help",
        "(docs/training.md).",
    ])
