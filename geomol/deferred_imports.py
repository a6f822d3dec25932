"""Keep heavy modules that a command does not use out of its start-up, until something really uses them.

PyTorch Geometric's package ``__init__`` imports every part of PyG: ``torch_geometric.isinstance``
imports ``torch._dynamo`` (the ``torch.compile`` machinery, with sympy, torch.fx's symbolic shapes and
distributed tensors) only to recognise compiled modules in :func:`torch_geometric.is_torch_instance`,
and the datasets, layers, explainers and LLM tools come along with it. geomol needs
``torch_geometric.data`` (:class:`~geomol.data.blocks.BlockGraph` is a ``Data``) and
``torch_geometric.utils``; importing the rest made every command spend more on PyG than on
``import torch`` itself (``benchmarks/startup.py`` measures both, with and without deferral).

:func:`deferred_modules` stands in for such modules while a block of imports runs: code that
imports one of them gets a stand-in whose first attribute access imports the real module, and
every ``import`` after the block loads the real one. Nothing is patched inside the libraries:
they run unchanged, a little later. ``GEOMOL_EAGER_IMPORTS=1`` turns the deferral off (for
comparison, or should a library ever need one of these modules while it is being imported).
"""
from __future__ import annotations

import importlib
import os
import sys
import types
from contextlib import contextmanager
from typing import Iterator

__all__ = ["deferred_modules", "PYG_UNUSED_AT_IMPORT", "EAGER_ENVIRONMENT_VARIABLE"]

PYG_UNUSED_AT_IMPORT = ("torch._dynamo", "torch_geometric.datasets", "torch_geometric.nn", "torch_geometric.explain",
                        "torch_geometric.llm", "torch_geometric.loader", "torch_geometric.sampler",
                        "torch_geometric.transforms", "torch_geometric.profile")
"""What ``import torch_geometric.data`` loads that geomol never uses while importing (see the module notes)."""

EAGER_ENVIRONMENT_VARIABLE = "GEOMOL_EAGER_IMPORTS"


class _Deferred(types.ModuleType):
    """A stand-in module: the first attribute it lacks imports the real module and is read from it."""

    def __getattr__(self, name: str):
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


@contextmanager
def deferred_modules(*names: str) -> Iterator[None]:
    """Within the block, ``import name`` (for each of ``names`` not imported yet) gives a stand-in.

    After the block the stand-ins leave ``sys.modules`` (the next ``import`` loads the real module)
    and stay only as attributes of their parent package where it has none, so that
    ``torch_geometric.nn.GCNConv`` after a plain ``import torch_geometric`` still works: it imports
    ``torch_geometric.nn`` then.
    """
    if os.environ.get(EAGER_ENVIRONMENT_VARIABLE, "") not in ("", "0"):
        yield
        return
    placed = {name: _Deferred(name) for name in names if name not in sys.modules}
    sys.modules.update(placed)
    try:
        yield
    finally:
        for name, stand_in in placed.items():
            if sys.modules.get(name) is not stand_in:  # imported for real inside the block
                continue
            del sys.modules[name]
            parent, _, child = name.rpartition(".")
            if parent in sys.modules and child not in vars(sys.modules[parent]):  # hasattr could import it
                setattr(sys.modules[parent], child, stand_in)
