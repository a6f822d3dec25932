"""geomol: geometric deep learning on 3D molecular systems (GET, EGNO, the graph of sets).

``geomol.predict_affinity``, ``geomol.predict_complex_affinity``, ``geomol.finetune_affinity``, ``geomol.rollout``, ``geomol.rollout_arrays``,
``geomol.evaluate_rollouts``, ``geomol.evaluate_rollout_arrays``, ``geomol.load_model`` and ``geomol.export_model``
come from :mod:`geomol.api`; they are imported on first use so that ``import geomol`` (and the ``geomol`` command's
help) stays fast.
"""
from geomol.version import __version__

_API = ("predict_affinity", "predict_complex_affinity", "finetune_affinity", "rollout", "rollout_arrays", "evaluate_rollouts",
        "evaluate_rollout_arrays", "load_model", "export_model")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from geomol import api

        return getattr(api, name)
    raise AttributeError(f"module 'geomol' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_API))
