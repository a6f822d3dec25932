"""Models: GET (affinity, pair classification, embeddings); EGNO and baselines.

The GET names are imported on first use, so that ``import geomol.models.egno`` loads neither GET nor the
ligand chemistry (RDKit) its affinity read-outs use.
"""
from importlib import import_module

_GET_NAMES = ("GET", "GETAffinity", "GETInputs", "GETModel", "GETOutput", "GETPairClassifier",
              "load_official_state_dict")
__all__ = list(_GET_NAMES)


def __getattr__(name: str):
    if name in _GET_NAMES:
        return getattr(import_module("geomol.models.get"), name)
    raise AttributeError(f"module 'geomol.models' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
