"""Dask plugins of a screen (imported only where Dask is: it is the optional extra ``screen``)."""
from __future__ import annotations

import logging

from distributed.diagnostics.plugin import WorkerPlugin

__all__ = ["QuietCancellations"]


class QuietCancellations(WorkerPlugin):
    """No warning that a cancelled task ended cancelled (the one warning of a worker's state machine): a stopped
    screen (Ctrl-C) cancels its tasks on purpose."""

    name = "geomol-quiet-cancellations"

    def setup(self, worker) -> None:
        logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)
