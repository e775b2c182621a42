"""Where tasks run: this process, an embedded Dask `LocalCluster`, or a Dask cluster by address.

`Engine` hides the three behind one `run` generator that yields ``(index, result)`` as tasks finish:

- ``workers=0``: in this process, one task after another (no Dask; for debugging and tiny jobs);
- ``workers=N`` (default: one per core, ``os.cpu_count()``): a `dask.distributed.LocalCluster` of N
  single-threaded worker processes, started on entry and closed on exit (nothing to start by hand);
- ``scheduler="tcp://HOST:8786"``: a running cluster (``dask scheduler`` and ``dask worker``, README).

Tasks are top-level functions of `sim.sweep.tasks` with small dict arguments. Leaving the context
(normally, on an error or on Ctrl-C) cancels whatever has not finished and closes the client and
the local cluster, so an interrupted run leaves no worker behind.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator

#: Dask settings of the embedded cluster's workers: no statistical profiler (Dask samples every thread's
#: stack every 10 ms by default, for the dashboard this cluster does not serve; on a 1-thread worker running
#: long compiled tasks it is CPU spent for nothing, measured by `sim.sweep.bench.bench_workers`).
LOCAL_WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


#: Module every local worker preloads (`sim.sweep.warm`: imports and numba caches before the first task).
WORKER_PRELOAD = "sim.sweep.warm"


def local_cluster(workers: int):
    """A `dask.distributed.LocalCluster` of ``workers`` single-threaded processes, quiet, without the
    dashboard (its HTTP server on a free port, so clusters of other users on the machine do not clash),
    with `LOCAL_WORKER_CONFIG` (the nannies pass the config to their workers), each worker preloading
    `WORKER_PRELOAD`."""
    import dask
    from dask.distributed import LocalCluster

    with dask.config.set(LOCAL_WORKER_CONFIG):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                            scheduler_kwargs={"dashboard": False}, silence_logs=logging.ERROR,
                            preload=[WORKER_PRELOAD])


class EngineError(RuntimeError):
    """The cluster could not be started or reached."""


class Engine:
    """Runs tasks; use as a context manager.

    Args:
        workers: worker processes of the local cluster (None: ``os.cpu_count()``; 0: in this process).
        scheduler: address of a running Dask scheduler (then ``workers`` is ignored).
    """

    def __init__(self, workers: int | None = None, scheduler: str | None = None):
        if workers is not None and workers < 0:
            raise EngineError(f"--workers must be >= 0, got {workers}")
        self.scheduler = scheduler
        self.workers = (os.cpu_count() or 1) if workers is None else workers
        self._client = self._cluster = None
        self._futures: list = []

    @property
    def in_process(self) -> bool:
        return self.scheduler is None and self.workers == 0

    @property
    def address(self) -> str | None:
        """The scheduler's address once started (None in this process)."""
        return self._client.scheduler.address if self._client is not None else None

    def describe(self) -> str:
        if self.scheduler:
            return f"Dask cluster at {self.scheduler}"
        if self.in_process:
            return "this process (no Dask)"
        return f"local Dask cluster, {self.workers} worker process{'es' if self.workers != 1 else ''}"

    def __enter__(self) -> Engine:
        if self.in_process:
            return self
        from dask.distributed import Client

        try:
            if self.scheduler:
                self._client = Client(self.scheduler, timeout="20s")
            else:
                self._cluster = local_cluster(self.workers)
                self._client = Client(self._cluster)
        except (OSError, TimeoutError) as err:
            self.close()
            where = self.scheduler or "a local cluster"
            raise EngineError(f"cannot start or reach {where}: {err}") from None
        return self

    def run(self, fn: Callable, args: list, name: str = "task",
            errors: str = "raise") -> Iterator[tuple[int, object]]:
        """Run ``fn(arg)`` for every arg; yield ``(index, result)`` in completion order.

        A task that raises (or whose worker died, `distributed.KilledWorker`) re-raises here with
        ``errors="raise"`` (`close` cancels the rest); with ``errors="return"`` the exception is
        yielded as that task's result and the others go on.
        """
        if self.in_process:
            for i, a in enumerate(args):
                try:
                    out = fn(a)
                except Exception as err:
                    if errors == "raise":
                        raise
                    out = err
                yield i, out
            return
        from dask.distributed import as_completed

        self._futures = [self._client.submit(fn, a, key=f"{name}-{i}-{id(self)}", pure=False)
                         for i, a in enumerate(args)]
        index = {f.key: i for i, f in enumerate(self._futures)}
        for fut in as_completed(self._futures):
            try:
                out = fut.result()
            except Exception as err:
                if errors == "raise":
                    raise
                out = err
            yield index[fut.key], out
            fut.release()

    def close(self) -> None:
        if self._client is not None and self._futures:
            try:
                self._client.cancel(self._futures)
            except Exception:  # noqa: BLE001 - closing anyway
                pass
        self._futures = []
        for obj in (self._client, self._cluster):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001
                    pass
        self._client = self._cluster = None

    def __exit__(self, *exc) -> None:
        self.close()
