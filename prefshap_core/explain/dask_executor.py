"""Coalition batches on a Dask cluster: the same numbers as in-process, on many machines.

    from prefshap_core.explain import Explainer, ExplainOptions
    from prefshap_core.explain.dask_executor import DaskExecutor

    options = ExplainOptions(executor=DaskExecutor("tcp://scheduler:8786"))
    explanation = Explainer(model, options)(left, right)

How a call runs (the executor seam, :mod:`executor`): the game (the model, the item
pool and the CME problem; never its factor cache or its pool-class caches) is
scattered to every worker once per explainer (``broadcast``), each duel group's
work (the duels, the coalition masks, the estimator, the boundary values) once per
group; then one task per coalition slice. Exact runs return ``A[:, rows] v``
(p x duels) per task; sampled runs keep each slice's values on its worker between
their two passes and return only each pass's statistics. The client sums the
partials in slice order, as :class:`~prefshap_core.explain.executor.LocalExecutor`
does, and the slices come from the options alone, so the numbers equal the
in-process run's.

Same numbers also needs the same floating-point path: every task runs with this
process's torch intra-op threads and numpy BLAS threads (what the in-process run uses;
a Dask worker starts with 1 of each, and OpenBLAS results move in the last bit with
its thread count), on workers with the same CPU kind and library builds.
A worker that dies mid-run loses nothing: the scheduler reruns its tasks elsewhere
from the scattered inputs (replicated on every worker). Progress is reported as
tasks finish; a cancelled :class:`~prefshap_core.progress.Progress` cancels the
call's futures. The explainer's :class:`~prefshap_core.explain.cme.base.EngineStats`
count the client's own work only. Dask is imported only when an executor first connects.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from prefshap_core.errors import PrefShapError
from prefshap_core.explain.executor import CoalitionWork
from prefshap_core.explain.games.base import Game
from prefshap_core.explain.scheduler_address import check_scheduler_address

DEFAULT_CONNECT_TIMEOUT = 10.0
# Progress (and with it cancellation) is looked at this often while tasks run.
_POLL_SECONDS = 0.1


class SchedulerUnreachableError(PrefShapError, ConnectionError):
    """No Dask scheduler answered at the address within the connect timeout."""


@dataclass
class TransferStats:
    """Bytes an executor moved: scattered to each worker, and returned by tasks."""

    scattered_bytes_per_worker: int = 0
    returned_bytes: int = 0
    tasks: int = 0
    scatters: list[tuple[str, int]] = field(default_factory=list)

    def reset(self) -> None:
        self.scattered_bytes_per_worker = self.returned_bytes = self.tasks = 0
        self.scatters.clear()


class DaskExecutor:
    """Runs an explanation's coalition batches on a Dask ``distributed`` cluster.

    ``client_or_address``: a ``distributed.Client`` (kept open: the caller owns it) or a
    scheduler address such as ``"tcp://host:8786"`` (connected on first use, within
    ``connect_timeout`` seconds, else :class:`SchedulerUnreachableError`; an address
    that is not ``tcp://``, ``tls://``, ``inproc://`` or ``HOST:PORT`` is refused at once
    with :class:`~prefshap_core.explain.scheduler_address.SchedulerAddressError`).
    ``torch_threads`` / ``blas_threads``: torch intra-op and numpy BLAS threads of
    every task (``None``: this process's counts, so results equal an in-process run
    here).
    """

    def __init__(
        self,
        client_or_address: Any,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        *,
        torch_threads: int | None = None,
        blas_threads: int | None = None,
    ) -> None:
        if isinstance(client_or_address, str):
            # refused now, not after the connect timeout: file://, http://, no port, ...
            self.address: str = check_scheduler_address(client_or_address)
            self._client: Any = None
            self._owns_client = True
        else:
            self._client = client_or_address
            self.address = str(getattr(client_or_address.scheduler, "address", "client"))
            self._owns_client = False
        if not connect_timeout > 0:
            raise ValueError(f"connect_timeout must be positive, got {connect_timeout}")
        self.connect_timeout = float(connect_timeout)
        if torch_threads is None:
            import torch

            torch_threads = torch.get_num_threads()
        self.torch_threads = int(torch_threads)
        self.blas_threads = _blas_threads() if blas_threads is None else int(blas_threads)
        self.transfer = TransferStats()
        # game -> its scattered future; a game leaves the cluster with its explainer
        self._games: weakref.WeakKeyDictionary[Game, Any] = weakref.WeakKeyDictionary()
        self._kept: dict[str, _Kept] = {}  # first passes awaiting their second
        self._lock = threading.Lock()  # one executor may serve several explainers' threads

    # -- connection --------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The ``distributed.Client``, connected on first use."""
        if self._client is None:
            self._client = connect(self.address, self.connect_timeout)
        return self._client

    def connect(self) -> DaskExecutor:
        """Connect now (else on first use); raises :class:`SchedulerUnreachableError`."""
        _ = self.client
        return self

    def n_workers(self) -> int:
        return len(self.client.nthreads())

    def close(self) -> None:
        """Close a client this executor opened (one it was given stays open)."""
        if self._client is not None and self._owns_client:
            self._client.close()
        self._client = None
        self._games = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"DaskExecutor({self.address!r})"

    # -- the executor seam -------------------------------------------------------------
    def map(
        self,
        work: CoalitionWork,
        batches: Sequence[slice],
        on_done: Callable[[int], None] | None = None,
    ) -> list[Any]:
        """The estimator's partials of every batch, in batch order.

        Two-pass estimators: the first pass keeps each batch's values on its worker
        (futures the scheduler can recompute), the second (``work.phi`` set, the
        work from ``work.second_pass``) reduces them there, so only statistics travel.
        """
        two_pass = getattr(work.estimator, "passes", 1) > 1
        if two_pass and work.phi is not None:
            kept = self._kept.pop(work.__dict__.get("_dask_kept"), None)
            if kept is not None and kept.batches == list(batches):
                return self._second_pass(kept, work.phi, on_done)
        game, shell = self._scatter_work(work)
        if not two_pass or work.phi is not None:
            return self._collect(self._submit(_partials, (game, shell), batches), on_done)
        values = self._submit(_coalition_values, (game, shell), batches)
        partials = self._submit_each(_first_partials, shell, values, batches)
        try:
            self._wait(values, on_done)  # progress: the values are the work
            results = self._collect(partials, None)
        except BaseException:
            with contextlib.suppress(Exception):
                self.client.cancel(values, force=True)
            raise
        token = uuid.uuid4().hex
        work.__dict__["_dask_kept"] = token  # work.second_pass(phi) copies it
        self._kept[token] = _Kept(shell, values, list(batches))
        weakref.finalize(work, self._kept.pop, token, None)  # no second pass: release
        return results

    def _second_pass(
        self, kept: _Kept, phi: np.ndarray, on_done: Callable[[int], None] | None
    ) -> list[Any]:
        phi_future = self._scatter("phi", phi)
        partials = self._submit_each(
            _second_partials, (kept.shell, phi_future), kept.values, kept.batches
        )
        try:
            return self._collect(partials, on_done)
        finally:
            with contextlib.suppress(Exception):
                self.client.cancel(kept.values)  # the values are no longer needed

    # -- internals ---------------------------------------------------------------------
    def _scatter(self, name: str, obj: Any) -> Any:
        client = self.client
        size = _pickled_bytes(obj)
        self.transfer.scattered_bytes_per_worker += size
        self.transfer.scatters.append((name, size))
        # hash=False: no hashing of large inputs; broadcast: one copy on every worker,
        # so a task never waits for its inputs and a dead worker loses no input.
        return client.scatter(obj, broadcast=True, hash=False)

    def _scatter_work(self, work: CoalitionWork) -> tuple[Any, Any]:
        with self._lock:
            game = self._games.get(work.game)
            if game is None:
                game = self._games[work.game] = self._scatter("game", work.game)
        shell = dataclasses.replace(work, game=None, on_batch=None)
        return game, self._scatter("duel group", shell)

    @property
    def _threads(self) -> tuple[int, int | None]:
        return self.torch_threads, self.blas_threads

    def _submit(self, fn: Callable, inputs: tuple[Any, ...], batches: Sequence[slice]) -> list[Any]:
        return self._submit_each(fn, inputs, [None] * len(batches), batches)

    def _submit_each(
        self, fn: Callable, inputs: Any, per_batch: Sequence[Any], batches: Sequence[slice]
    ) -> list[Any]:
        """One task per batch: ``fn(*inputs, [per_batch[k],] batches[k], threads)``."""
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        call = uuid.uuid4().hex[:12]
        name = fn.__name__.strip("_").replace("_", "-")
        futures = []
        for k, (extra, rows) in enumerate(zip(per_batch, batches, strict=True)):
            args = (*inputs, rows) if extra is None else (*inputs, extra, rows)
            futures.append(
                self.client.submit(
                    fn, *args, self._threads, key=f"prefshap-{name}-{call}-{k}", pure=False
                )
            )
        self.transfer.tasks += len(futures)
        return futures

    def _wait(self, futures: list[Any], on_done: Callable[[int], None] | None) -> None:
        """Until every future is done, reporting progress; cancel them on any exception."""
        try:
            reported, last_poll = -1, 0.0
            while True:
                done = [f for f in futures if f.done()]
                for f in done:
                    if f.status == "error":
                        f.result()  # raises the task's exception here
                if on_done is not None:
                    now = time.monotonic()
                    # also when nothing moved: a cancelled progress raises in update()
                    if len(done) != reported or now - last_poll > 0.5:
                        on_done(len(done))
                        reported, last_poll = len(done), now
                if len(done) == len(futures):
                    return
                if self.client.status in ("closing", "closed"):
                    raise SchedulerUnreachableError(
                        f"lost the connection to the Dask scheduler at {self.address}"
                    )
                time.sleep(_POLL_SECONDS)
        except BaseException:
            with contextlib.suppress(Exception):
                self.client.cancel(futures, force=True)
            raise

    def _collect(self, futures: list[Any], on_done: Callable[[int], None] | None) -> list[Any]:
        self._wait(futures, on_done)
        results = self.client.gather(futures)  # in batch order
        self.transfer.returned_bytes += sum(_nbytes(r) for r in results)
        self.client.cancel(futures)  # releases them on the workers now
        return list(results)


@dataclass
class _Kept:
    """A first pass's values, held on the workers that computed them."""

    shell: Any  # the duel group's scattered work
    values: list[Any]  # one future per batch
    batches: list[slice]


# -- on the workers --------------------------------------------------------------------
Threads = tuple[int, "int | None"]  # torch intra-op, numpy BLAS (None: leave it)


def _use_threads(threads: Threads) -> None:
    import torch

    torch_threads, blas = threads
    if torch.get_num_threads() != torch_threads:
        torch.set_num_threads(torch_threads)
    if blas is not None and _blas_threads() != blas:
        from threadpoolctl import threadpool_limits

        threadpool_limits(blas, user_api="blas")  # kept for this worker's later tasks


def _blas_threads() -> int | None:
    """numpy's BLAS threads in this process (None without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - pinned in requirements.txt
        return None
    counts = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    return max(counts) if counts else None


def _coalition_values(game: Game, work: CoalitionWork, rows: slice, threads: Threads) -> np.ndarray:
    _use_threads(threads)
    return work.evaluate(rows, game)  # ``work`` is this worker's copy: it keeps the bound game


def _partials(game: Game, work: CoalitionWork, rows: slice, threads: Threads) -> Any:
    _use_threads(threads)
    values = work.evaluate(rows, game)
    return work.estimator.partial(values, rows, work.v_empty, work.v_full, work.phi)


def _first_partials(work: CoalitionWork, values: np.ndarray, rows: slice, threads: Threads) -> Any:
    _use_threads(threads)
    return work.estimator.partial(values, rows, work.v_empty, work.v_full, None)


def _second_partials(
    work: CoalitionWork, phi: np.ndarray, values: np.ndarray, rows: slice, threads: Threads
) -> Any:
    _use_threads(threads)
    return work.estimator.partial(values, rows, work.v_empty, work.v_full, phi)


# -- helpers ---------------------------------------------------------------------------
def connect(address: str, timeout: float = DEFAULT_CONNECT_TIMEOUT) -> Any:
    """A ``distributed.Client`` for the scheduler at ``address``, or a clear error.

    Never hangs: the connection attempt is bounded by ``timeout`` seconds; an address
    that is not a scheduler's is refused before any attempt.
    """
    address = check_scheduler_address(address)
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - dask is in requirements.txt
        raise PrefShapError(
            "running on a cluster needs the 'dask' and 'distributed' packages"
        ) from exc
    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise SchedulerUnreachableError(
            f"could not reach the Dask scheduler at {address} within {timeout:g} s "
            f"({type(exc).__name__}: {exc}); is 'dask scheduler' running there?"
        ) from exc


def local_cluster(n_workers: int, torch_threads: int | None = None) -> tuple[Any, DaskExecutor]:
    """A loopback ``LocalCluster`` of ``n_workers`` processes (one task at a time each)
    and its executor; close both with :func:`close_local_cluster`."""
    if n_workers < 1:
        raise ValueError(f"workers must be >= 1, got {n_workers}")
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    client = Client(cluster, set_as_default=False)
    return cluster, DaskExecutor(client, torch_threads=torch_threads)


def close_local_cluster(cluster: Any, executor: DaskExecutor) -> None:
    with contextlib.suppress(Exception):
        executor.client.close()
    with contextlib.suppress(Exception):
        cluster.close()


def _pickled_bytes(obj: Any) -> int:
    return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _nbytes(obj: Any) -> int:
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o) for o in obj)
    return _pickled_bytes(obj)
