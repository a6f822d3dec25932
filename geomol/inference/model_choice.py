"""Which shipped affinity model knows a kind of receptor: the choice ``predict-affinity`` makes or suggests.

Shipped affinity models record the kinds of their training pockets (manifest ``domain.receptor_kinds``:
protein, RNA, DNA, mixed; :mod:`geomol.inference.domain`). :func:`models_for_kind` lists the shipped models that
saw a kind, the default first; :func:`model_for_receptor` is the one the default command uses for a receptor of
that kind: the default model when it knows the kind, else the first shipped model that does, else the default
(whose predictions then carry the ``receptor_kind_unseen`` warning). Nothing here branches on a model's name.
"""
from __future__ import annotations

from geomol.data.chemistry.receptor_kind import pdb_file_receptor_kind
from geomol.errors import GeomolError
from geomol.inference.model_files import ALIASES, list_shipped_models

__all__ = ["models_for_kind", "model_for_receptor", "model_for_receptor_file", "announced_model_for_receptor_file"]


def models_for_kind(kind: str) -> list[str]:
    """Names of the shipped affinity models trained on pockets of ``kind``, the default model first."""
    names = [entry["name"] for entry in list_shipped_models("affinity") if kind in entry["receptor_kinds"]]
    default = ALIASES["default"]
    return sorted(names, key=lambda name: (name != default, name))


def model_for_receptor(kind: str) -> str:
    """The shipped model the default command uses for a receptor of ``kind`` (module notes): ``"default"`` when the
    default model knows the kind (or no shipped model does), else the name of the first that does."""
    names = models_for_kind(kind)
    return names[0] if names and names[0] != ALIASES["default"] else "default"


def model_for_receptor_file(path) -> tuple[str, str | None]:
    """``(model, kind)``: :func:`model_for_receptor` for the receptor in a PDB file (its residue names only); the
    default model and ``None`` for another format or an unreadable file (prediction then reads it and says what is
    wrong; an unseen kind is still flagged on every prediction)."""
    try:
        kind = pdb_file_receptor_kind(path)
    except GeomolError:
        return "default", None
    return (model_for_receptor(kind) if kind else "default"), kind


def announced_model_for_receptor_file(path, say) -> str:
    """:func:`model_for_receptor_file`'s model; when it is not the default, ``say(line)`` is called with the reason
    (``"RNA receptor: using na-affinity, the shipped model trained on RNA pockets (--model to choose another)"``), so
    that a command never switches models silently."""
    name, kind = model_for_receptor_file(path)
    if name != "default":
        say(f"{kind} receptor: using {name}, the shipped model trained on {kind} pockets (--model to choose another)")
    return name
