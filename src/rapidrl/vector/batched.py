"""Parent-side bookkeeping shared by every backend: workers, env states, batches, faults.

A vector env here is a list of *workers*, each owning a contiguous range of env ids and one
group (:mod:`rapidrl.vector.group`) that writes that range of the shared :class:`StepArrays`:

- :class:`LocalWorker` runs its group in this process (``serial``: one Python :class:`EnvGroup`;
  ``ale``/``envpool``: native vectorizers whose ``end`` blocks in C++ with the GIL released);
- :class:`rapidrl.vector.process.ProcessWorker` runs an :class:`EnvGroup` in a child process and
  answers over a pipe; the parent waits on all busy workers' pipes *and* process sentinels with
  ``multiprocessing.connection.wait`` under a deadline, so a dead or stuck worker is an error
  within ``step_timeout``, never a hang.

Every env is in one state: waiting for an action (returned by ``reset``/``recv``), pending (its
action arrived, its worker's other envs' have not), stepping, or ready (result not yet returned).
A worker steps when all its envs have actions; ``recv`` returns whole ready workers: all of them in
id order when ``batch_size == num_envs``, else the first ready ones (first-ready batches).
"""

from __future__ import annotations

import itertools
import logging
import time
import weakref
from multiprocessing import connection
from typing import Any

import numpy as np

from rapidrl.vector.api import (
    EnvWorkerError,
    LayoutError,
    VectorEnv,
    VectorEnvError,
    WorkerDiedError,
)
from rapidrl.vector.step_arrays import StepArrays
from rapidrl.vector.supervise import LIVENESS_PERIOD

log = logging.getLogger("rapidrl.vector")

WAITING, PENDING, STEPPING, READY = 0, 1, 2, 3


class Worker:
    """Owns envs ``start..stop-1`` and one group. Subclasses fill in how commands travel."""

    pollable = False  # True: finish() never blocks once poll() said so; has wait_objects()

    def __init__(self, index: int, start: int, stop: int):
        self.index, self.start, self.stop = index, start, stop
        self.slot = 0  # obs slot holding the envs' current observations
        self.busy: str | None = None  # command in flight: "reset" / "step"
        self.next_slot = 0  # slot the command in flight writes
        self.deadline = float("inf")
        self.seq = 0  # dispatch order, for FIFO waits on blocking workers
        self.restarts = 0

    @property
    def env_ids(self) -> list[int]:
        return list(range(self.start, self.stop))

    def dispatch(self, cmd: str, *args: Any) -> None:
        raise NotImplementedError

    def poll(self) -> bool:
        return True

    def wait_objects(self) -> list:
        return []

    def finish(self) -> None:
        """Collect the result of the command in flight; raise a VectorEnvError on failure."""
        raise NotImplementedError

    def timeout_error(self, timeout: float) -> VectorEnvError:
        return WorkerDiedError(
            f"worker {self.index} (envs {self.env_ids}) did not finish {self.busy!r} within "
            f"step_timeout={timeout:g}s"
        )

    def restart(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def env_error(group, first_env_id: int, env_ids: list[int], cmd: str, exc: BaseException):
    """An :class:`EnvWorkerError` naming the env that raised (``group.current``), with traceback."""
    import traceback

    j = getattr(group, "current", None)
    where = f"env {first_env_id + j}" if j is not None else f"envs {env_ids}"
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    err = EnvWorkerError(f"{where} raised during {cmd!r}:\n{tb}")
    err.__cause__ = exc
    return err


class LocalWorker(Worker):
    """A group in this process; ``make_group()`` returns a new, unbuilt group (also on restart)."""

    def __init__(self, index: int, start: int, stop: int, make_group, group=None):
        super().__init__(index, start, stop)
        self._make_group = make_group
        self._bufs: StepArrays | None = None
        self._error: BaseException | None = None
        self.group = group if group is not None else self.build_group()

    def build_group(self):
        group = self._make_group()
        try:
            group.build()
        except Exception as exc:
            raise env_error(group, self.start, self.env_ids, "make", exc) from exc
        return group

    def attach(self, bufs: StepArrays) -> None:
        self._bufs = bufs
        self.group.attach(bufs.rows(self.start, self.stop))

    def dispatch(self, cmd: str, *args: Any) -> None:
        self._error = None
        try:
            self.group.begin(cmd, *args)
        except Exception as exc:
            self._error = env_error(self.group, self.start, self.env_ids, cmd, exc)

    def finish(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err
        try:
            self.group.end()
        except Exception as exc:
            raise env_error(self.group, self.start, self.env_ids, self.busy or "?", exc) from exc

    def restart(self) -> None:
        self._close_group()
        self.group = self.build_group()
        self.group.attach(self._bufs.rows(self.start, self.stop))

    def _close_group(self) -> None:
        group, self.group = getattr(self, "group", None), None
        if group is not None:
            group.close()
            group.bufs = None  # our views of a shared block must go before it is unmapped

    def close(self) -> None:
        self._close_group()
        self._bufs = None


class WorkerResources:
    """What must be released even if the vector env is never closed (weakref finalizer)."""

    def __init__(self, workers: list[Worker], extra=()):
        self.workers = workers
        self.extra = list(extra)  # callables, run after the workers are closed

    def release(self) -> None:
        workers, self.workers = self.workers, []
        errors = []
        by_type: dict[type, list[Worker]] = {}
        for w in workers:  # e.g. process workers and an inline group in one vector env
            by_type.setdefault(type(w), []).append(w)
        for cls, ws in by_type.items():
            close_all = getattr(cls, "close_all", None)
            if close_all is not None:  # e.g. processes: ask all, then wait for all at once
                try:
                    close_all(ws)
                except Exception as exc:
                    errors.append(exc)
                continue
            for w in ws:
                try:
                    w.close()
                except Exception as exc:  # keep closing the others
                    errors.append(exc)
        extra, self.extra = self.extra, []
        for fn in extra:
            try:
                fn()
            except Exception as exc:
                errors.append(exc)
        if errors:
            log.warning("errors while closing a vector env: %r", errors)


class BatchedVectorEnv(VectorEnv):
    """The API of :mod:`rapidrl.vector.api` over a list of workers; see the module docstring."""

    def __init__(
        self,
        workers: list[Worker],
        bufs: StepArrays,
        single_observation_space,
        single_action_space,
        *,
        batch_size: int | None = None,
        copy: bool = True,
        step_timeout: float = 60.0,
        restart_on_crash: bool = False,
        seed: int | None = None,
        resources: WorkerResources | None = None,
        name: str = "vector env",
        spin: float = 0.0,
    ):
        self._closed = True  # until fully built (close() / __del__ safe on a failed build)
        self._resources = resources or WorkerResources(workers)
        self._finalizer = weakref.finalize(self, self._resources.release)
        self.workers = workers
        self._bufs = bufs
        self.num_envs = workers[-1].stop
        self.set_spaces(single_observation_space, single_action_space)
        self.metadata = dict(self.metadata)  # a wrapper writing to it must not change the class's
        self.batch_size = self.num_envs if batch_size is None else int(batch_size)
        self.copy = copy
        self.step_timeout = float(step_timeout)
        self.restart_on_crash = restart_on_crash
        self.name = name
        self.spin = float(spin)  # s: poll workers this long before blocking in select
        self._check_layout()
        self._owner = np.empty(self.num_envs, np.int64)
        for w in workers:
            self._owner[w.start : w.stop] = w.index
        self._state = np.full(self.num_envs, WAITING, np.int8)
        self._restarted = np.zeros(self.num_envs, bool)
        self._ready: list[Worker] = []  # FIFO of workers whose results were not returned yet
        self._last_ids: np.ndarray | None = None
        self._seq = itertools.count()
        self._default_seed = seed  # used by the first reset() that passes no seed
        self._seed: int | list[int | None] | None = None  # seed of the last reset, for restarts
        self._options: dict[str, Any] | None = None  # options of the last reset, for restarts
        # What the groups' reset takes (native vectorizers: no options, envpool: no per-env seeds);
        # checked before a reset reaches any worker.
        groups = [getattr(w, "group", None) for w in workers]  # process workers: EnvGroups
        self._takes_options = all(getattr(g, "reset_options", True) for g in groups)
        self._per_env_seeds = all(getattr(g, "per_env_seeds", True) for g in groups)
        self._failure: BaseException | None = None
        # The workers (and their env rows) of the last recv/reset, and whether anything was sent
        # since: while not, a send() to exactly those envs (env_ids None or equal to the ids
        # returned) needs no per-env state checks. That is every step of a synchronous loop and
        # of a first-ready loop that sends to the envs it received.
        self._last_workers: list[Worker] = []
        self._last_rows: slice | np.ndarray = slice(0, 0)
        self._last_sent = True
        self._final_zeros: np.ndarray | None = None  # final_obs of a batch where none ended
        self._no_ends_mask: np.ndarray | None = None  # _final_obs of a batch where none ended
        self._views: dict[tuple[int, int, int], tuple] = {}  # (start, stop, slot) -> slices
        self._closed = False

    def _check_layout(self) -> None:
        n, b = self.num_envs, self.batch_size
        if not 1 <= b <= n:
            raise LayoutError(f"batch_size must be in [1, num_envs={n}], got {b}")
        if b < n:
            sizes = {w.stop - w.start for w in self.workers}
            if len(sizes) != 1:
                raise LayoutError(
                    f"batch_size < num_envs needs workers of equal size, got sizes {sorted(sizes)}"
                )
            m = sizes.pop()
            if b % m:
                raise LayoutError(
                    f"batch_size={b} must be a multiple of the envs per worker ({m}): recv() "
                    f"returns whole worker groups; valid choices: "
                    f"{list(range(m, n + 1, m))}"
                )

    # --- API ----------------------------------------------------------------------------------
    def reset(
        self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ):
        self._check_open()
        # Arguments are checked before any worker gets the command: a bad one is a plain error
        # and leaves the vector env usable.
        seed = self.check_seed(seed)
        options = self.check_reset_options(options)
        if options and not self._takes_options:
            raise ValueError(
                f"the {self.name} does not take reset options (its native envs have none), got "
                f"{sorted(options)}: reset without options, or use a Python backend "
                "(serial/hybrid/async), whose envs get them"
            )
        if isinstance(seed, list) and not self._per_env_seeds:
            raise ValueError(
                f"the {self.name} seeds its envs consecutively (env i gets seed + i, fixed when "
                f"its pool is built), got seed={seed}: pass one int, or a list of consecutive seeds"
            )
        if seed is None and self._default_seed is not None:
            seed, self._default_seed = self._default_seed, None
        self.seed_np_random(seed)
        self._wait(lambda: not any(w.busy for w in self.workers))  # drain steps in flight
        self._ready.clear()
        self._seed, self._options = seed, options
        for w in self.workers:
            self._dispatch_reset(w, seed[w.start : w.stop] if isinstance(seed, list) else seed)
        self._wait(lambda: not any(w.busy for w in self.workers))
        self._ready.clear()
        obs, _, _, _, infos, ids = self._gather(self.workers)
        return obs, infos

    def send(self, actions: Any, env_ids: np.ndarray | None = None) -> None:
        self._check_open()
        if not self._last_sent and (env_ids is None or self._is_last_ids(env_ids)):
            self._send_last(actions)  # whole workers, all waiting: no per-env bookkeeping
            return
        self._last_sent = True
        if env_ids is None:
            if self._last_ids is None:
                raise RuntimeError(f"send() before reset(): call reset() on the {self.name} first")
            ids = self._last_ids
        else:
            ids = self._check_ids(env_ids)
        not_waiting = ids[self._state[ids] != WAITING]
        if len(not_waiting):
            raise RuntimeError(
                f"env ids {not_waiting.tolist()} are not waiting for an action: they were already "
                "sent actions and not received yet (send() twice without recv()?)"
            )
        actions = self.check_actions(actions, len(ids))
        self._bufs.actions[ids] = actions
        self._state[ids] = PENDING
        for k in np.unique(self._owner[ids]):
            w = self.workers[k]
            if (self._state[w.start : w.stop] == PENDING).all():
                self._dispatch(w, "step")

    def recv(self):
        self._check_open()
        ready = sum(w.stop - w.start for w in self._ready)
        stepping = sum(w.stop - w.start for w in self.workers if w.busy)
        if ready + stepping < self.batch_size:
            pending = np.flatnonzero(self._state == PENDING).tolist()
            hint = (
                f" envs {pending} have actions but wait for the rest of their worker's envs"
                if pending
                else ""
            )
            raise RuntimeError(
                f"recv() needs {self.batch_size} envs stepping or ready, only {ready + stepping} "
                f"are: call send() with actions first.{hint}"
            )
        need = self.batch_size
        if need == self.num_envs:
            return self._recv_all()
        self._wait(lambda: sum(w.stop - w.start for w in self._ready) >= need)
        chosen, count = [], 0
        while count < need:
            w = self._ready.pop(0)
            chosen.append(w)
            count += w.stop - w.start
        return self._gather(chosen)

    def step(self, actions: Any):
        """``send`` + ``recv``; a synchronous step of every env takes a shorter path here.

        That path (every env waiting, ``batch_size == num_envs``) does what ``send``/``recv`` do
        with fewer Python operations: at 8 Atari envs on 2 cores the parent's bookkeeping sits on
        the critical path of every step, so each one costs throughput.
        """
        every_worker = len(self._last_workers) == len(self.workers)
        if self._last_sent or not every_worker or self.batch_size < self.num_envs:
            return super().step(actions)
        self._check_open()
        self._send_last(actions)
        obs, rewards, terminated, truncated, infos, _ = self._recv_all()
        return obs, rewards, terminated, truncated, infos

    def _is_last_ids(self, env_ids: Any) -> bool:
        """``env_ids`` are the ids the last ``recv``/``reset`` returned, as an integer array."""
        last = self._last_ids
        return (
            isinstance(env_ids, np.ndarray)
            and env_ids.shape == last.shape
            and env_ids.dtype.kind in "iu"
            and bool((env_ids == last).all())
        )

    def _recv_all(self):
        """``recv`` of every env (all of them stepping or ready): results in env order."""
        if not self._finish_all():
            self._wait(lambda: len(self._ready) == len(self.workers))
        return self._gather(self._in_order())

    def _send_last(self, actions: Any) -> None:
        """Actions for the envs of the last recv/reset, their workers dispatched in index order
        (process workers first, an inline group last: it runs inside its dispatch)."""
        self._bufs.actions[self._last_rows] = self.check_actions(actions, len(self._last_ids))
        self._last_sent = True
        for w in sorted(self._last_workers, key=lambda w: w.index):
            self._dispatch(w, "step")

    def _finish_all(self) -> bool:
        """Finish in-process groups, then every process worker that already answered; True when
        all are done (else ``_wait`` takes over, with its deadlines and liveness checks)."""
        for w in self.workers:
            if w.busy and not w.pollable:
                self._finish(w)
        for w in self.workers:
            if w.busy and w.poll():
                self._finish(w)
        return len(self._ready) == len(self.workers)

    def _in_order(self) -> list[Worker]:
        """The ready workers by index, the queue emptied (all of them ready)."""
        ready, self._ready = sorted(self._ready, key=lambda w: w.index), []
        return ready

    def close(self, **kwargs: Any) -> None:
        """Stop every worker and free the buffers; idempotent, also after a failure."""
        self._closed = True
        self._bufs = None  # drop our views of a shared block before it is unmapped
        self._views = {}
        self._final_zeros = None
        fin = getattr(self, "_finalizer", None)
        if fin is not None:
            fin()  # a weakref.finalize runs its callback at most once

    @property
    def worker_pids(self) -> list[int | None]:
        """Process id of each worker (``None`` for in-process groups)."""
        return [getattr(getattr(w, "proc", None), "pid", None) for w in self.workers]

    # --- internals ----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._failure is not None:
            raise RuntimeError(
                f"this {self.name} was closed after an error: "
                f"{type(self._failure).__name__}: {str(self._failure).splitlines()[0]}"
            )
        if self._closed:
            raise RuntimeError(f"this {self.name} is closed")

    def _check_ids(self, env_ids: Any) -> np.ndarray:
        ids = np.asarray(env_ids)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"env_ids must be a 1-D integer array, got {ids.dtype} {ids.shape}")
        ids = ids.astype(np.int64, copy=False)
        if len(ids) and (ids.min() < 0 or ids.max() >= self.num_envs):
            raise ValueError(f"env_ids out of range [0, {self.num_envs}): {ids.tolist()}")
        if len(np.unique(ids)) != len(ids):
            raise ValueError(f"env_ids has duplicates: {ids.tolist()}")
        return ids

    def _dispatch(self, w: Worker, cmd: str, *args: Any, options: dict | None = None) -> None:
        """Hand ``cmd`` to worker ``w``: the groups take ``(*args, slot)``, and a reset's
        ``options`` after them when there are any."""
        w.next_slot = 1 - w.slot
        w.busy = cmd
        w.seq = next(self._seq)
        w.deadline = time.monotonic() + self.step_timeout
        self._state[w.start : w.stop] = STEPPING
        if options:
            w.dispatch(cmd, *args, w.next_slot, options)
        else:
            w.dispatch(cmd, *args, w.next_slot)

    def _dispatch_reset(self, w: Worker, seed: int | list[int | None] | None) -> None:
        self._restarted[w.start : w.stop] = False
        self._dispatch(w, "reset", seed, options=self._options)

    def _finish(self, w: Worker) -> None:
        try:
            w.finish()
        except VectorEnvError as err:
            self._on_failure(w, err)
            return
        self._done(w)

    def _done(self, w: Worker) -> None:
        w.slot, w.busy, w.deadline = w.next_slot, None, float("inf")
        self._state[w.start : w.stop] = READY
        self._ready.append(w)

    def _wait(self, done) -> None:
        """Finish workers until ``done()``; every wait is bounded by the workers' deadlines.

        Starts with one non-blocking sweep over all busy process workers, so results (and deaths)
        are collected in the order they happened even when ``done()`` already holds. Each sweep is
        a single ``select`` over every busy worker's pipe and process sentinel: a dead worker
        wakes it through its sentinel, so no per-worker liveness syscalls are needed in the hot
        path (the deadline still bounds a worker that hangs while alive).
        """
        self._sweep(0.0)
        spin_until = time.monotonic() + self.spin if self.spin > 0 else 0.0
        while not done():
            busy = [w for w in self.workers if w.busy]
            if not busy:
                raise RuntimeError("internal error: waiting with no worker busy")
            blocking = [w for w in busy if not w.pollable]
            if blocking:  # in-process groups: finish in dispatch order (C++ releases the GIL)
                self._finish(min(blocking, key=lambda w: w.seq))
                continue
            now = time.monotonic()
            late = [w for w in busy if w.deadline <= now]
            for w in late:
                self._on_failure(w, w.timeout_error(self.step_timeout))
            if late:
                continue
            if now < spin_until:  # poll instead of sleeping: the results are usually close
                self._sweep(0.0)
                continue
            wait_for = min(w.deadline for w in busy) - now
            self._sweep(min(wait_for, LIVENESS_PERIOD))

    def _sweep(self, timeout: float) -> None:
        """Finish every busy process worker that answered (or died) within ``timeout``."""
        if timeout <= 0:  # a look, no wait: each worker's own poll is one cheap syscall
            for w in self.workers:  # in worker order
                if w.busy and w.pollable and w.poll():
                    self._finish(w)
            return
        owners = {}
        for w in self.workers:
            if w.busy and w.pollable:
                for o in w.wait_objects():
                    owners[o] = w
        if not owners:
            return
        hit = {owners[o].index for o in connection.wait(list(owners), timeout=timeout)}
        for w in self.workers:  # in worker order, each at most once
            if w.index in hit and w.busy:
                self._finish(w)

    def _wait_one(self, w: Worker) -> None:
        """Finish ``w`` or raise (used while restarting: a second failure is fatal)."""
        while w.pollable and not w.poll():
            left = w.deadline - time.monotonic()
            if left <= 0:
                raise w.timeout_error(self.step_timeout)
            connection.wait(w.wait_objects(), timeout=min(left, LIVENESS_PERIOD))
        w.finish()

    def _on_failure(self, w: Worker, err: VectorEnvError) -> None:
        if not self.restart_on_crash:
            self._fail(err)
        cmd = w.busy
        log.warning(
            "%s: restarting worker %d (envs %s) after: %s", self.name, w.index, w.env_ids, err
        )
        try:
            w.restart()
            w.restarts += 1
            seed = self._restart_seed(w, cmd)
            slot = w.next_slot
            w.busy, w.deadline = "reset", time.monotonic() + self.step_timeout
            w.dispatch("reset", seed, slot, *((self._options,) if self._options else ()))
            self._wait_one(w)
        except BaseException as exc:
            self._fail(exc)
        b, rows = self._bufs, slice(w.start, w.stop)
        if cmd == "step":  # the episodes in flight were cut short
            b.final_obs[rows] = b.obs[w.slot, rows]
            b.truncated[rows] = True
        self._restarted[rows] = True
        self._done(w)

    def _restart_seed(self, w: Worker, cmd: str | None) -> int | list[int | None] | None:
        """Seed for a restarted worker's reset: distinct, reproducible seeds for the new episodes
        (those of the last reset, shifted per restart when a step crashed). The shift is the
        width of the last reset's seeds (``num_envs`` for an int seed, which gives env ``i`` seed
        ``seed + i``; ``max - min + 1`` for a list, at least ``num_envs``), so a restarted env never
        takes the seed of another env or of an earlier restart."""
        seed = self._seed
        if isinstance(seed, list):
            given = [s for s in seed if s is not None]
            width = max(self.num_envs, max(given) - min(given) + 1) if given else 0
            shift = width * w.restarts if cmd == "step" else 0
            return [None if s is None else s + shift for s in seed[w.start : w.stop]]
        shift = self.num_envs * w.restarts if cmd == "step" else 0
        return None if seed is None else seed + shift

    def _no_ends(self, n: int) -> np.ndarray:
        """``_final_obs`` of a gathered batch where no episode ended: one read-only array."""
        z = self._no_ends_mask
        if z is None or len(z) != n:
            z = self._no_ends_mask = _read_only(np.zeros(n, bool))
        return z

    def _no_final_obs(self, obs: np.ndarray) -> np.ndarray:
        """``final_obs`` of a batch where no episode ended: zeros, one read-only array reused."""
        z = self._final_zeros
        if z is None or z.shape != obs.shape:
            z = self._final_zeros = np.zeros_like(obs)
            z.flags.writeable = False
        return z

    def _fail(self, err: BaseException):
        self._failure = err
        self.close()
        raise err

    def _gather(self, workers: list[Worker]):
        b = self._bufs
        contiguous = all(
            a.stop == c.start and a.slot == c.slot for a, c in zip(workers, workers[1:])
        )
        if contiguous:  # one row range, one obs slot (every synchronous step): slices, no gathers
            key = (workers[0].start, workers[-1].stop, workers[0].slot)
            views = self._views.get(key)
            if views is None:  # the same few ranges every step: slice the buffers once
                rows = slice(key[0], key[1])
                views = self._views[key] = (
                    rows,
                    b.obs[key[2], rows],
                    [b.rewards[rows], b.terminated[rows], b.truncated[rows]],
                    [b.episode_end[rows], b.episode_return[rows], b.episode_length[rows]],
                    b.final_obs[rows],
                    # _final_obs of a step where no episode ended: read-only, made once per range
                    # (a few bytes; final_obs's zeros are shared, see _no_final_obs)
                    _read_only(np.zeros(key[1] - key[0], bool)),
                )
            rows, obs, small, stats, final, no_ends = views
            ids = np.arange(rows.start, rows.stop, dtype=np.int64)
            if self.copy:
                obs = obs.copy()
                small = [a.copy() for a in small]
                stats = [a.copy() for a in stats]
        else:
            ids = np.concatenate([np.arange(w.start, w.stop) for w in workers]).astype(np.int64)
            obs = np.concatenate([b.obs[w.slot, w.start : w.stop] for w in workers])
            small = [b.rewards[ids], b.terminated[ids], b.truncated[ids]]
            stats = [b.episode_end[ids], b.episode_return[ids], b.episode_length[ids]]
            final, no_ends = None, None
        # count_nonzero: a fraction of the cost of (a | b).any() on a few envs
        ended = np.count_nonzero(small[1]) or np.count_nonzero(small[2])
        if ended:
            done = small[1] | small[2]
            if self.copy or final is None:
                final = np.zeros_like(obs)
                final[done] = b.final_obs[ids[done]]
        else:  # most steps: no episode ended, so no new arrays to allocate and fill
            done = no_ends if no_ends is not None else self._no_ends(len(ids))
            if self.copy or final is None:
                final = self._no_final_obs(obs)
        sel = rows if contiguous else ids
        restarted = self._restarted[sel]  # a copy for ids; a view copied below for rows
        if contiguous:
            restarted = restarted.copy()
        self._restarted[sel] = False
        self._state[sel] = WAITING
        self._last_ids = ids.copy()  # the caller may modify the returned ids
        self._last_workers, self._last_rows, self._last_sent = list(workers), sel, False
        infos = {
            "env_id": ids,
            "final_obs": final,
            "episode_end": stats[0],
            "episode_return": stats[1],
            "episode_length": stats[2],
            "worker_restarted": restarted,
            "_final_obs": done,  # gymnasium's same-step keys (api module docstring)
        }
        if ended:
            infos["final_info"] = {"episode": {"r": stats[1], "l": stats[2]}, "_episode": stats[0]}
            infos["_final_info"] = done
        return obs, small[0], small[1], small[2], infos, ids


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
