"""The distributed engine of a screen: Dask distributed, on this machine or on a cluster.

Three ways to get workers, one code path after that (a :class:`dask.distributed.Client`):

* default: a ``LocalCluster`` of ``workers`` processes with one thread each (posing and scoring are
  single-threaded; processes keep RDKit and torch from contending for one interpreter);
* ``scheduler``: the address of a running Dask scheduler (``tcp://host:8786``), e.g. one started
  with ``dask scheduler`` and ``dask worker`` on the nodes of a cluster, or by dask-jobqueue;
* :class:`JobQueueSpec`: a SLURM or PBS cluster from dask-jobqueue, whose batch jobs each start
  ``cores`` single-threaded worker processes.

Each shard is one task (:func:`~geomol.screen.worker.score_shard`); Dask places tasks on workers,
reruns the task of a worker that dies (up to ``distributed.scheduler.allowed-failures`` times) and
retries a task that raised (``retries``). The code here only keeps a bounded number of shards in
flight (so the library streams through in constant memory), hands each finished result to the
caller, and passes on the workers' progress events (ligands posed so far in a running shard,
:data:`~geomol.screen.worker.PROGRESS_TOPIC`); it never chooses a worker.

Ctrl-C stops the driver only: the local workers are started with SIGINT ignored (a terminal sends it to
the whole process group, and each worker would print its own traceback); the driver cancels the shards in
flight and closes the cluster, whose messages about stopping busy workers are not shown (stopping them
is the point).
"""
from __future__ import annotations

import logging
import signal
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from geomol.errors import ConfigError
from geomol.screen.library import Shard
from geomol.screen.settings import ScreenInputs
from geomol.screen.worker import PROGRESS_TOPIC, ShardResult, score_shard

__all__ = ["JobQueueSpec", "dask_client", "run_shards", "worker_threads"]

TASK_RETRIES = 2
"""Reruns of a shard task that raised (a worker that died is handled by the scheduler itself)."""

_WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


@dataclass(frozen=True)
class JobQueueSpec:
    """A dask-jobqueue cluster: ``jobs`` batch jobs of ``cores`` worker processes each.

    Attributes:
        kind: ``'slurm'`` or ``'pbs'``.
        jobs: batch jobs to submit; cores: worker processes (one thread each) per job.
        memory: memory per job (``'16GB'``); walltime: per job (``'02:00:00'``).
        queue, account: the partition/queue and account to submit to (None: the site's default).
        directives: extra ``#SBATCH`` / ``#PBS`` lines, without the prefix (``['--constraint=cpu']``).
        prologue: shell lines run before the worker starts (``['module load python', 'source env/bin/activate']``).
    """

    kind: str
    jobs: int = 1
    cores: int = 8
    memory: str = "16GB"
    walltime: str = "02:00:00"
    queue: str | None = None
    account: str | None = None
    directives: tuple[str, ...] = ()
    prologue: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self):
        if self.kind not in ("slurm", "pbs"):
            raise ConfigError(f"the cluster kind must be 'slurm' or 'pbs', not {self.kind!r}")
        if self.jobs < 1 or self.cores < 1:
            raise ConfigError("jobs and cores per job must be ≥ 1")

    def cluster(self):
        """The dask-jobqueue cluster object (submits nothing until scaled)."""
        try:
            from dask_jobqueue import PBSCluster, SLURMCluster
        except ImportError:
            raise ConfigError("--cluster needs dask-jobqueue (pip install 'geomol[screen]')") from None
        kind = SLURMCluster if self.kind == "slurm" else PBSCluster
        return kind(cores=self.cores, processes=self.cores, memory=self.memory, walltime=self.walltime,
                    queue=self.queue, account=self.account, job_extra_directives=list(self.directives),
                    job_script_prologue=[*(f"export {k}={v}" for k, v in _WORKER_ENV.items()), *self.prologue])


def _require_dask():
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ConfigError("geomol screen needs Dask distributed (pip install 'geomol[screen]')") from None


@contextmanager
def _interrupts_for_the_driver_only() -> Iterator[None]:
    """Processes started inside ignore Ctrl-C (SIGINT: ignored stays ignored across exec); the driver's own
    handling is back afterwards. Only the main thread may change signal handling: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _distributed_logs_restored() -> Iterator[logging.Logger]:
    """Dask's logger, its level restored on leaving (after the cluster inside has closed)."""
    logger = logging.getLogger("distributed")
    level = logger.level
    try:
        yield logger
    finally:
        logger.setLevel(level)


def _silence_distributed() -> None:
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def _quiet_workers(client) -> None:
    """Each worker's Dask logger silenced before the cluster closes: on a loaded machine a worker's heartbeat can
    find the scheduler already gone and log a traceback (the screen was stopped on purpose). Best effort: a worker
    that cannot be reached is being stopped anyway."""
    try:
        client.run(_silence_distributed)
    except Exception:  # noqa: BLE001 - nothing to report while stopping
        pass


def worker_threads(client) -> int:
    """Worker threads the cluster has now (at least 1)."""
    return max(1, sum(client.nthreads().values()))


@contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None,
                jobqueue: JobQueueSpec | None = None) -> Iterator:
    """A Dask client on a local cluster of ``workers`` processes, an existing ``scheduler``, or a ``jobqueue`` cluster.

    Raises:
        ConfigError: Dask is not installed, more than one way is given, or the scheduler cannot be reached.
    """
    _require_dask()
    from distributed import Client, LocalCluster

    if sum(x is not None for x in (workers, scheduler, jobqueue)) > 1:
        raise ConfigError("give one of --workers, --scheduler and --cluster")
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="30s")
        except OSError as exc:
            raise ConfigError(f"cannot reach the Dask scheduler at {scheduler} ({exc})") from None
        with client:
            yield client
        return
    if jobqueue is not None:
        cluster = jobqueue.cluster()
        cluster.scale(jobs=jobqueue.jobs)
    else:
        with _interrupts_for_the_driver_only():
            cluster = LocalCluster(n_workers=workers or 1, threads_per_worker=1, processes=True,
                                   dashboard_address=":0", env=_WORKER_ENV)
    with _distributed_logs_restored() as logs, cluster, Client(cluster) as client:
        try:
            yield client
        except KeyboardInterrupt:
            logs.setLevel(logging.CRITICAL)  # busy workers are stopped on purpose: no word about it
            _quiet_workers(client)
            raise
        finally:  # the screen is over: a worker slow to exit (a loaded machine) is killed without a warning
            logs.setLevel(max(logs.level, logging.ERROR))


def _window(client) -> int:
    """Shards in flight: two per worker thread (one running, one queued), at least 4."""
    return max(4, 2 * worker_threads(client))


def run_shards(client, inputs: ScreenInputs, shards: Iterable[Shard], on_result: Callable[[ShardResult], None],
               on_error: Callable[[Shard, BaseException], None],
               on_progress: Callable[[int, int], None] | None = None) -> None:
    """Run :func:`~geomol.screen.worker.score_shard` on every shard, a bounded number at a time.

    ``on_result`` gets each finished shard's result (in completion order); ``on_error`` gets a shard
    whose task failed even after retries and reruns (with the exception); ``on_progress`` gets
    (shard number, ligands posed so far) while a shard runs (from another thread). On an interruption
    (KeyboardInterrupt) the shards still in flight are cancelled before it propagates.
    """
    from distributed import as_completed

    from geomol.screen.dask_plugins import QuietCancellations

    key = f"{inputs.fingerprint[:12]}-{uuid.uuid4().hex[:8]}"  # per run: a rerun never meets a released key
    topic = f"{PROGRESS_TOPIC}-{key}"
    if on_progress is not None:
        client.subscribe_topic(topic, lambda event: on_progress(event[1]["shard"], event[1]["posed"]))
    client.register_plugin(QuietCancellations())
    shared = client.submit(_identity, inputs, key=f"screen-inputs-{key}", pure=False)
    # every worker holds the inputs: a shard then goes to a free thread, not to the worker that made them (with
    # few shards the scheduler's preference for data locality left the other workers idle)
    client.replicate([shared])
    queue = iter(shards)
    by_key: dict[str, Shard] = {}
    running = as_completed()

    def fill() -> None:
        while running.count() < _window(client):
            shard = next(queue, None)
            if shard is None:
                return
            future = client.submit(score_shard, shared, shard, topic if on_progress else None,
                                   key=f"screen-shard-{key}-{shard.number:06d}", retries=TASK_RETRIES, pure=False)
            by_key[future.key] = shard
            running.add(future)

    try:
        fill()
        for future in running:
            shard = by_key.pop(future.key)
            try:
                result = future.result()
            except Exception as exc:  # noqa: BLE001 - any task failure is reported per shard, the screen goes on
                on_error(shard, exc)
            else:
                on_result(result)
            future.release()
            fill()
    except BaseException:
        client.cancel([f for f in running.futures], force=True)
        raise
    finally:
        shared.release()
        if on_progress is not None:
            client.unsubscribe_topic(topic)


def _identity(value):
    """The task that holds the screen's inputs on the cluster (rebuilt from its spec if its worker dies)."""
    return value
