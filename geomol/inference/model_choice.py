"""Which shipped affinity model knows a kind of receptor: the choice ``predict-affinity`` makes or suggests.

Shipped affinity models record the kinds of their training pockets (manifest ``domain.receptor_kinds``:
protein, RNA, DNA, mixed; :mod:`geomol.inference.domain`). :func:`models_for_kind` lists the shipped models that
saw a kind, the default first; :func:`model_for_receptor` is the one the default command uses for a receptor of
that kind: the default model when it knows the kind, else the first shipped model that does, else the default
(whose predictions then carry the ``receptor_kind_unseen`` warning). Nothing here branches on a model's name.
"""
from __future__ import annotations

from geomol.inference.model_files import ALIASES, list_shipped_models

__all__ = ["models_for_kind", "model_for_receptor"]


def models_for_kind(kind: str) -> list[str]:
    """Names of the shipped affinity models trained on pockets of ``kind``, the default model first."""
    names = [entry["name"] for entry in list_shipped_models("affinity") if kind in entry["receptor_kinds"]]
    default = ALIASES["default"]
    return sorted(names, key=lambda name: (name != default, name))


def model_for_receptor(kind: str) -> str:
    """The shipped model the default command uses for a receptor of ``kind`` (module notes)."""
    names = models_for_kind(kind)
    return names[0] if names else "default"
