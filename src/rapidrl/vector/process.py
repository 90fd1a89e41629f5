"""Process backends: ``subprocess`` (one env per process), ``hybrid`` (P processes x M envs) and
``async`` (the same layout with first-ready batches) are one implementation.

Data path: one ``multiprocessing.shared_memory`` block holds :class:`StepArrays` for all envs
(observations double-buffered, final observations, actions, rewards, flags, episode stats). Each
worker runs an :class:`EnvGroup` on its rows and writes results in place; the pipe carries only
commands (``("step", slot)``, ``("reset", seed, slot)``, ``("close",)``) and acks (``("ok",)`` or
``("error", env_index, command, traceback)``), never frames.

Start-up handshake (no env is built in the parent): each worker builds its envs and sends its
spaces; the parent checks they agree, sizes and creates the shared block, and sends its name; the
workers attach and ack. A restarted worker goes through the same handshake.

Scripts without a ``__main__`` guard: with the spawn start method every worker imports the main
script again (as ``__mp_main__``) before it runs its target. If the script builds a vector env at
import time, the worker reaches ``make_vec`` while bootstrapping, where starting processes is an
error (multiprocessing prints a wall of "bootstrapping phase" tracebacks, one per worker).
``make_vec`` detects that state (:func:`exit_if_reimporting_main`) and exits the worker quietly
with :data:`MAIN_GUARD_EXIT`; the parent, waiting for the worker's handshake, turns that exit
status into one :class:`~rapidrl.vector.api.MainGuardError` that names the script and the fix.

Shutdown: ``("close",)`` to every worker, join them all under one deadline, then ``terminate``
and finally ``kill`` the stragglers. Workers run in their own process group and ignore SIGINT, so
a stop signal to the parent's group is the parent's to handle: it checkpoints first
(:func:`~rapidrl.vector.supervise.leave_stop_signals_to_parent`). The block is unlinked by
the parent (and by multiprocessing's resource tracker if the parent itself is killed), so no
``/dev/shm`` segment outlives the run.
"""

from __future__ import annotations

import functools
import multiprocessing
import pickle
import select
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing import connection, get_context
from multiprocessing.shared_memory import SharedMemory

import cloudpickle
import gymnasium as gym

from rapidrl.vector.api import (
    EnvWorkerError,
    LayoutError,
    MainGuardError,
    VectorEnvError,
    WorkerDiedError,
)
from rapidrl.vector.batched import (
    BatchedVectorEnv,
    LocalWorker,
    Worker,
    WorkerResources,
)
from rapidrl.vector.group import EnvGroup
from rapidrl.vector.step_arrays import StepArrays
from rapidrl.vector.supervise import (
    LIVENESS_PERIOD,
    describe_exit,
    leave_stop_signals_to_parent,
    stop_processes,
)

_CLOSE_TIMEOUT = 2.0  # s: graceful shutdown budget for all workers together
_START_TIMEOUT = 60.0  # s: at least this for a worker to start, build its envs and attach

# The two messages of every step, pickled once: the parent writes ("step", slot) as ready bytes and
# recognises ("ok",) by comparing bytes; anything else (errors, the handshake) is unpickled.
_OK = pickle.dumps(("ok",), protocol=pickle.HIGHEST_PROTOCOL)
_STEP = tuple(pickle.dumps(("step", slot), protocol=pickle.HIGHEST_PROTOCOL) for slot in (0, 1))


MAIN_GUARD_EXIT = 97
"""Exit status of a worker that re-ran an unguarded main script (no Python error exits with it:
uncaught exceptions give 1, signals negative codes)."""


def exit_if_reimporting_main() -> None:
    """In a spawned process that is still importing the parent's main module (its bootstrapping
    phase), building a process vector env means the script has no ``__main__`` guard: exit with
    :data:`MAIN_GUARD_EXIT` (no traceback) so that the parent can explain it once."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit(MAIN_GUARD_EXIT)


def _main_guard_error(start_method: str) -> MainGuardError:
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None) or "the main script"
    return MainGuardError(
        f"the worker processes re-ran {script} from the top and reached make_vec again: with "
        f"the {start_method!r} start method every worker imports the main script, and this one "
        "builds its vector env at import time. Put the code that builds and runs it under\n"
        'if __name__ == "__main__":\n'
        "(https://docs.python.org/3/library/multiprocessing.html#the-spawn-and-forkserver-start-"
        "methods)"
    )


def split_envs(num_envs: int, num_workers: int) -> list[tuple[int, int]]:
    """Contiguous env ranges, sizes as equal as possible (the first ones one larger)."""
    if not 1 <= num_workers <= num_envs:
        raise LayoutError(f"num_workers must be in [1, num_envs={num_envs}], got {num_workers}")
    base, extra = divmod(num_envs, num_workers)
    out, start = [], 0
    for k in range(num_workers):
        stop = start + base + (k < extra)
        out.append((start, stop))
        start = stop
    return out


def _poller(*fds) -> select.poll:
    """A ``select.poll`` on ``fds`` (readable or hung up), built once: ``Connection.poll`` builds a
    new selector on every call, several microseconds in a loop that runs every step."""
    p = select.poll()
    for fd in fds:
        p.register(fd, select.POLLIN)
    return p


def _spin_for_message(poller: select.poll, spin: float) -> None:
    """Poll for up to ``spin`` seconds: the next command usually comes within a step's time, and a
    core that stays busy wakes far faster than one that went idle."""
    deadline = time.perf_counter() + spin
    while not poller.poll(0) and time.perf_counter() < deadline:
        pass


def worker_main(conn, payload: bytes, index: int, start: int, stop: int, spin: float = 0.0) -> None:
    """Body of a worker process (see the module docstring for the protocol)."""
    leave_stop_signals_to_parent()  # signals to the parent's group: it checkpoints, then closes us
    group = EnvGroup([], start)
    shm = None
    try:
        try:
            group = EnvGroup(cloudpickle.loads(payload), start)
            group.build()
        except Exception:
            conn.send(("error", group.current, "make", traceback.format_exc()))
            return
        conn.send(("spaces", group.single_observation_space, group.single_action_space))
        msg = conn.recv()
        if msg[0] != "attach":
            return
        shm = SharedMemory(name=msg[1])
        group.attach(StepArrays.from_buffer(shm.buf, msg[2]).rows(start, stop))
        conn.send_bytes(_OK)
        poller = _poller(conn.fileno())
        steps = {data: ("step", slot) for slot, data in enumerate(_STEP)}
        while True:
            if spin > 0:
                _spin_for_message(poller, spin)
            data = conn.recv_bytes()
            msg = steps.get(data) or pickle.loads(data)  # a step needs no unpickling
            cmd = msg[0]
            if cmd == "close":
                break
            try:
                group.begin(cmd, *msg[1:])
            except Exception:
                conn.send(("error", group.current, cmd, traceback.format_exc()))
                continue
            conn.send_bytes(_OK)
    except (EOFError, OSError, KeyboardInterrupt):
        pass  # the parent is gone or closed the pipe: just exit
    finally:
        group.close()
        group.bufs = None  # drop the views before unmapping the block
        if shm is not None:
            try:
                shm.close()
            except BufferError:
                pass


class ProcessWorker(Worker):
    """One child process running an :class:`EnvGroup` for envs ``start..stop-1``."""

    pollable = True

    def __init__(
        self,
        ctx,
        index: int,
        start: int,
        stop: int,
        payload: bytes,
        timeout: float,
        spin: float = 0.0,
    ):
        super().__init__(index, start, stop)
        self._ctx, self._payload, self._spin = ctx, payload, spin
        # Starting (interpreter, imports, env construction) may take longer than a step.
        self._start_timeout = max(timeout, _START_TIMEOUT)
        self._attach_msg: tuple | None = None
        self.proc = None
        self.conn = None
        self._broken = False
        self._spawn()

    def _spawn(self) -> None:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=worker_main,
            args=(child_conn, self._payload, self.index, self.start, self.stop, self._spin),
            name=f"rapidrl-vec-worker-{self.index}",
            daemon=True,
        )
        proc.start()
        child_conn.close()
        self.proc, self.conn, self._broken = proc, parent_conn, False
        self._pipe = _poller(parent_conn.fileno())  # an answer is waiting (or the pipe closed)
        self._any = _poller(parent_conn.fileno(), proc.sentinel)  # ... or the process ended

    # --- messages -----------------------------------------------------------------------------
    def _recv_msg(self, timeout: float) -> tuple:
        deadline = time.monotonic() + timeout
        while not self._pipe.poll(0):
            if not self.proc.is_alive():
                if self._pipe.poll(0):  # it answered, then exited
                    break
                raise self.died_error()
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.timeout_error(timeout)
            connection.wait([self.conn, self.proc.sentinel], timeout=min(left, LIVENESS_PERIOD))
        try:
            data = self.conn.recv_bytes()
        except (EOFError, OSError):
            raise self.died_error() from None
        if data == _OK:
            return ("ok",)
        msg = pickle.loads(data)
        if msg[0] == "error":
            _, j, cmd, tb = msg
            where = f"env {self.start + j}" if j is not None else f"envs {self.env_ids}"
            raise EnvWorkerError(
                f"{where} (worker {self.index}, pid {self.proc.pid}) raised during {cmd!r}:\n{tb}"
            )
        return msg

    def _expect(self, what: str, timeout: float) -> tuple:
        msg = self._recv_msg(timeout)
        if msg[0] != what:
            raise WorkerDiedError(
                f"worker {self.index}: protocol error, expected {what!r}, got {msg!r}"
            )
        return msg

    def handshake_spaces(self) -> tuple[gym.Space, gym.Space]:
        _, obs_space, act_space = self._expect("spaces", self._start_timeout)
        return obs_space, act_space

    def attach(self, shm_name: str, specs) -> None:
        self._attach_msg = ("attach", shm_name, specs)
        self.conn.send(self._attach_msg)
        self._expect("ok", self._start_timeout)

    def died_error(self) -> VectorEnvError:
        self.proc.join(timeout=1.0)
        code = self.proc.exitcode
        if code == MAIN_GUARD_EXIT and not self.busy:
            return _main_guard_error(self._ctx.get_start_method())
        if code is None:
            how = "closed its pipe but is still running"
        else:  # "was killed by SIGKILL (exit code -9)", "exited with code 1"
            how = f"was {describe_exit(code)}" if code < 0 else describe_exit(code)
        if self.busy:
            during = (
                f" while running {self.busy!r}; pass restart_on_crash=True to make_vec to "
                "restart crashed workers"
            )
        else:
            during = " while starting (see its stderr above)"
        return WorkerDiedError(
            f"worker {self.index} (pid {self.proc.pid}, envs {self.env_ids}) {how}{during}"
        )

    def timeout_error(self, timeout: float) -> WorkerDiedError:
        return WorkerDiedError(
            f"worker {self.index} (pid {self.proc.pid}, envs {self.env_ids}) did not finish "
            f"{self.busy or 'starting'!r} within {timeout:g}s; is an env stuck?"
        )

    # --- Worker interface ---------------------------------------------------------------------
    def dispatch(self, cmd: str, *args) -> None:
        try:
            if cmd == "step":
                self.conn.send_bytes(_STEP[args[0]])
            else:
                self.conn.send((cmd, *args))
        except (OSError, ValueError):
            self._broken = True  # reported by finish()

    def poll(self) -> bool:
        """An answer is waiting, or the process ended (its sentinel), or the pipe broke."""
        return self._broken or bool(self._any.poll(0))

    def wait_objects(self) -> list:
        return [self.conn, self.proc.sentinel]

    def finish(self) -> None:
        if self._broken:
            raise self.died_error()
        self._expect("ok", 0.0)

    def restart(self) -> None:
        self._kill()
        self._spawn()
        self.handshake_spaces()
        self.conn.send(self._attach_msg)
        self._expect("ok", self._start_timeout)

    def _kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
        if self.proc is not None:
            self.proc.join(timeout=5.0)
        if self.conn is not None:
            self.conn.close()

    def close(self) -> None:
        ProcessWorker.close_all([self])

    @staticmethod
    def close_all(workers: Sequence[ProcessWorker], timeout: float = _CLOSE_TIMEOUT) -> None:
        """Ask every worker to stop, wait for all under one deadline, then terminate/kill."""
        workers = [w for w in workers if w.proc is not None]
        stop_processes([w.proc for w in workers], [w.conn for w in workers], ("close",), timeout)
        for w in workers:
            try:
                w.proc.close()
            except ValueError:
                pass
            w.proc = None


def _free_shm(shm: SharedMemory) -> None:
    try:
        shm.close()
    except BufferError:
        pass  # a caller still holds copy=False views: the mapping goes when they do
    try:
        shm.unlink()
    except FileNotFoundError:
        pass


def make_process_vec(
    env_fns: Sequence[Callable[[], gym.Env]],
    num_workers: int,
    *,
    batch_size: int | None = None,
    copy: bool = True,
    step_timeout: float = 60.0,
    restart_on_crash: bool = False,
    context: str = "spawn",
    seed: int | None = None,
    name: str = "process vector env",
    inline: bool = False,
    spin: float = 0.0,
) -> BatchedVectorEnv:
    """``num_workers`` groups, each running a contiguous share of ``env_fns`` in its own process;
    with ``inline`` the last group runs in this process instead (see ``make_vec``)."""
    if inline and num_workers < 2:
        raise LayoutError(
            "inline=True needs num_workers >= 2 (one group stays in this process; with a "
            "single group use backend='serial')"
        )
    ranges = split_envs(len(env_fns), num_workers)
    ctx = get_context(context)
    workers: list[Worker] = []
    resources = WorkerResources(workers)
    try:
        procs = ranges[:-1] if inline else ranges
        for k, (a, b) in enumerate(procs):
            payload = cloudpickle.dumps(list(env_fns[a:b]))
            workers.append(ProcessWorker(ctx, k, a, b, payload, step_timeout, spin))
        if inline:  # built after the processes were started: they build their envs meanwhile
            k, (a, b) = len(procs), ranges[-1]
            make_group = functools.partial(EnvGroup, list(env_fns[a:b]), a)
            workers.append(LocalWorker(k, a, b, make_group))
        spaces = [
            w.handshake_spaces()
            if isinstance(w, ProcessWorker)
            else (w.group.single_observation_space, w.group.single_action_space)
            for w in workers
        ]
        obs_space, act_space = spaces[0]
        for w, (o, a) in zip(workers, spaces):
            if o != obs_space or a != act_space:
                raise ValueError(
                    f"worker {w.index} (envs {w.env_ids}) has spaces {o}, {a}; worker 0 has "
                    f"{obs_space}, {act_space}: all envs of a vector env need the same spaces"
                )
        specs = StepArrays.specs(obs_space, act_space, len(env_fns))
        shm = SharedMemory(create=True, size=StepArrays.nbytes(specs))
        resources.extra.append(lambda: _free_shm(shm))
        bufs = StepArrays.from_buffer(shm.buf, specs)
        for w in workers:
            if isinstance(w, ProcessWorker):
                w.attach(shm.name, specs)
            else:
                w.attach(bufs)
        venv = BatchedVectorEnv(
            workers,
            bufs,
            obs_space,
            act_space,
            batch_size=batch_size,
            copy=copy,
            step_timeout=step_timeout,
            restart_on_crash=restart_on_crash,
            seed=seed,
            resources=resources,
            name=name,
            spin=spin,
        )
        venv.shm_name = shm.name  # for diagnostics (and the leak test)
        return venv
    except BaseException:
        resources.release()
        raise
