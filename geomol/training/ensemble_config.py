"""One config format for training any shipped affinity model (``geomol train-affinity``), read and checked here.

A config (YAML) says what the model is, how its complexes are built, what it is trained on and how::

    name: get-plb
    description: GET affinity ensemble trained on the protein-ligand-benchmark and the public FEP+ benchmark
    member:                         # the member kind and its configuration, in the manifest's vocabulary
      kind: GETAffinity             # a registered kind (geomol.models.affinity_member.MEMBER_KINDS)
      hidden: 32
      num_layers: 2
    recipe: {pocket_cutoff: 10.0}   # the ComplexRecipe: pocket_cutoff, keep_hydrogens, fragments (a file)
    data:                           # where the complexes come from (geomol.data.datasets.sources)
      source: benchmark
      plb_root: ${GEOMOL_SHARED_DATA}/plb
    ensemble: {seeds: [0, 1, 2]}    # how the members differ (the kind's trainer reads it)
    fit: {epochs: 10}               # how each member is trained (the kind's trainer reads it)
    domain: {spread_every: 2}       # the ensemble spread of the applicability domain on every k-th complex

The ``member`` section is what the trained model's manifest records as its ``hyperparameters`` (the kind's
``to_config`` vocabulary: ``hidden``, ``num_layers``, ... as for EGNO and EGNN), so a model is described the same way
in the config that builds it and in the directory that ships it. ``member``, ``ensemble`` and ``fit`` are read by the
kind's trainer, which refuses keys it does not know; the sections themselves are checked here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Mapping

from geomol.config_files import expand_shared_data_paths, read_config
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.errors import ConfigError
from geomol.models.affinity_member import registered_kinds
from geomol.shipped_configs import resolve_config

__all__ = ["EnsembleConfig", "SECTIONS", "read_ensemble_config", "check_keys"]

SECTIONS = ("name", "description", "member", "recipe", "data", "ensemble", "fit", "domain")
RECIPE_OPTIONS = ("pocket_cutoff", "keep_hydrogens", "fragments")


def check_keys(section: str, values: Mapping[str, Any], known, source, what: str = "") -> None:
    """Refuse keys of a config section outside ``known`` (:class:`ConfigError` naming them and the known ones)."""
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"{section}: unknown key(s) {unknown}{what} (known: {sorted(known)})", source)


@dataclass(frozen=True)
class EnsembleConfig:
    """A checked train-affinity config (see the module notes).

    Attributes:
        kind: the member kind (a key of :data:`~geomol.models.affinity_member.MEMBER_KINDS`).
        member: its configuration without ``kind``. recipe: the graph recipe.
        data, ensemble, fit: the sections as given (``${GEOMOL_SHARED_DATA}`` resolved in ``data``).
        spread_every: the domain's spread is measured on every k-th training complex.
        source: the config file, for messages.
    """

    name: str
    description: str
    kind: str
    member: dict[str, Any]
    recipe: ComplexRecipe
    data: dict[str, Any]
    ensemble: dict[str, Any] = field(default_factory=dict)
    fit: dict[str, Any] = field(default_factory=dict)
    spread_every: int = 1
    source: str | None = None


def _section(config: Mapping[str, Any], name: str, source) -> dict[str, Any]:
    value = config.get(name) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name}: a mapping of settings, got {value!r}", source)
    return dict(value)


def read_ensemble_config(path: str | PathLike) -> EnsembleConfig:
    """The config of ``path`` (a file, or the short name of a shipped config), checked.

    Raises:
        ConfigError: an unknown section or recipe option, no or an unknown member kind, a config of the format
            before one format (``members:`` with ``model``/``fit``), naming the file.
    """
    source = resolve_config(str(path))
    config = read_config(source)
    if "members" in config:
        raise ConfigError("this config has the train-affinity format of before one config format ('members' with "
                          "features/model/fit); write it as member (kind and configuration), recipe, data (with "
                          "source), ensemble and fit, as models/contact-corpus.yaml does", source)
    check_keys("the config", config, SECTIONS, source)
    member, recipe, data = (_section(config, name, source) for name in ("member", "recipe", "data"))
    kind = member.pop("kind", None)
    if kind not in registered_kinds():
        raise ConfigError(f"member: 'kind' is one of {sorted(registered_kinds())}, got {kind!r}", source)
    check_keys("recipe", recipe, RECIPE_OPTIONS, source)
    domain = _section(config, "domain", source)
    check_keys("domain", domain, ("spread_every",), source)
    expand_shared_data_paths(data)
    try:
        graph_recipe = ComplexRecipe.from_options(**recipe)
    except ConfigError as exc:
        raise ConfigError(f"recipe: {exc.reason}", source) from None
    return EnsembleConfig(str(config.get("name") or ""), str(config.get("description") or ""), kind, member,
                          graph_recipe, data, _section(config, "ensemble", source), _section(config, "fit", source),
                          int(domain.get("spread_every", 1)), str(source))
