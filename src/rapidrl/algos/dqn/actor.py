"""Acting in separate processes: a vector env + a CPU copy of the Q-net per actor process.

Data path (never a pickled frame)
---------------------------------
- **Ring** (one shared-memory block per actor): ``S`` fixed-size slots, each one vector step of
  the actor's ``M`` envs: ``obs``/``next_obs`` uint8 ``[M, *obs_shape]`` (``next_obs`` is already
  ``final_obs`` where an episode ended), actions, rewards, ``terminated``/``truncated``, the
  episode stats, the weights ``version`` the actions were chosen with, and epsilon.
- **Pipe** per actor, carrying slot ids only: learner -> actor ``("free", s)`` / ``("stop",)``;
  actor -> learner ``("full", s)`` / ``("error", traceback)``. An actor starts with all its slots
  free, so it runs at most ``S`` vector steps ahead of the learner: the learner consumes exactly
  ``steps_per_update`` agent steps per update, which keeps the replay ratio of the in-process loop.
- **Weights** (one shared block for all actors): one array per ``state_dict`` entry plus a version
  counter. The learner copies the online net in under a lock every ``weight_sync_every`` updates
  and bumps the version; an actor that sees a new version copies it out under the same lock.

Failure handling: every wait has a timeout and a liveness check. The learner waits on the pipes
*and* the actor process sentinels together (``multiprocessing.connection.wait``), so a killed
actor is noticed at once (``ActorDiedError`` with its exit code / signal); an actor exception
arrives with its traceback (``ActorError``); an actor alive but silent for ``timeout`` seconds is
reported as stuck. Actors poll for their parent and exit if the learner died. ``close()`` stops,
joins, then terminates and kills stragglers, and unlinks every shared block.
"""

from __future__ import annotations

import functools
import math
import os
import time
import traceback
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from multiprocessing import connection, get_context
from multiprocessing.shared_memory import SharedMemory
from typing import Any, NoReturn

import numpy as np
import torch

from rapidrl.nets.exploration import epsilon_greedy
from rapidrl.train.schedules import linear_schedule
from rapidrl.vector.step_arrays import block_layout
from rapidrl.vector.supervise import describe_exit, leave_stop_signals_to_parent, stop_processes

__all__ = ["ActorDiedError", "ActorError", "ActorPool", "SharedArrays", "StepBatch"]

_POLL_S = 0.5  # period of liveness checks inside long waits


class ActorError(RuntimeError):
    """An actor process raised, got stuck, or could not be reached."""


class ActorDiedError(ActorError):
    """An actor process exited while the learner still needed it (killed, crashed)."""


# --------------------------------------------------------------------------------------------
# Shared arrays
# --------------------------------------------------------------------------------------------
class SharedArrays:
    """Named numpy arrays in one ``SharedMemory`` block. ``create`` in the parent (which unlinks
    it on ``close(unlink=True)``), ``attach`` by name in a child. ``specs``: name -> (shape, dtype
    str), picklable."""

    def __init__(self, shm: SharedMemory, specs: Mapping[str, tuple[tuple[int, ...], str]], owner):
        self.shm, self.specs, self.owner = shm, dict(specs), owner
        offsets, _ = block_layout(_sizes(self.specs))
        self.arrays: dict[str, np.ndarray] = {
            name: np.ndarray(shape, dtype=np.dtype(dtype), buffer=shm.buf, offset=offset)
            for (name, (shape, dtype)), offset in zip(self.specs.items(), offsets)
        }

    @staticmethod
    def nbytes(specs: Mapping[str, tuple[tuple[int, ...], str]]) -> int:
        return block_layout(_sizes(specs))[1]

    @classmethod
    def create(cls, specs) -> SharedArrays:
        shm = SharedMemory(create=True, size=cls.nbytes(specs))
        out = cls(shm, specs, owner=True)
        for a in out.arrays.values():
            a.fill(0)
        return out

    @classmethod
    def attach(cls, name: str, specs) -> SharedArrays:
        return cls(SharedMemory(name=name), specs, owner=False)

    @property
    def name(self) -> str:
        return self.shm.name

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    def close(self) -> None:
        self.arrays.clear()  # views must go before the buffer can be released
        try:
            self.shm.close()
        except BufferError:  # a view still alive somewhere: the OS frees it at exit
            pass
        if self.owner:
            try:
                self.shm.unlink()
            except FileNotFoundError:
                pass
            self.owner = False


def _sizes(specs: Mapping[str, tuple[tuple[int, ...], str]]) -> list[int]:
    return [
        int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        for shape, dtype in specs.values()
    ]


def ring_specs(slots: int, num_envs: int, obs_shape, obs_dtype) -> dict:
    s, m, od = slots, num_envs, np.dtype(obs_dtype).str
    return {
        "obs": ((s, m, *obs_shape), od),
        "next_obs": ((s, m, *obs_shape), od),
        "actions": ((s, m), "<i8"),
        "rewards": ((s, m), "<f4"),
        "terminated": ((s, m), "|b1"),
        "truncated": ((s, m), "|b1"),
        "episode_end": ((s, m), "|b1"),
        "episode_return": ((s, m), "<f8"),
        "episode_length": ((s, m), "<i8"),
        "version": ((s,), "<i8"),
        "epsilon": ((s,), "<f8"),
    }


def weight_specs(state_dict: Mapping[str, torch.Tensor]) -> dict:
    specs = {
        f"w:{k}": (tuple(v.shape), np.dtype(str(v.dtype).replace("torch.", "")).str)
        for k, v in state_dict.items()
    }
    specs["version"] = ((1,), "<i8")
    return specs


# --------------------------------------------------------------------------------------------
# The actor process
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ActorSpec:
    """Everything an actor process needs; picklable (sent once at spawn)."""

    actor_id: int
    env: str
    env_options: dict[str, Any]
    num_envs: int
    backend: str
    num_workers: int | None
    net_kwargs: dict[str, Any]
    ring_name: str
    ring_specs: dict
    weights_name: str
    weights_specs: dict
    env_seed: int
    rng_seed: tuple[int, ...]
    start_steps: int
    epsilon: tuple[float, float, int]
    noisy: bool
    timeout: float
    extra: dict[str, Any] = field(default_factory=dict)


def _greedy(q: torch.nn.Module, obs: np.ndarray, noise: torch.Generator | None) -> np.ndarray:
    """Greedy actions of the acting copy (a noisy net draws new noise from ``noise``)."""
    if noise is not None:
        q.reset_noise(noise)
    with torch.no_grad():
        return q(torch.from_numpy(obs)).argmax(1).numpy()


def _load_weights(q: torch.nn.Module, weights: SharedArrays) -> None:
    with torch.no_grad():
        for k, v in q.state_dict().items():
            v.copy_(torch.from_numpy(weights[f"w:{k}"]))


def actor_main(spec: ActorSpec, conn, lock) -> None:
    """Body of an actor process (see the module docstring for the protocol)."""
    leave_stop_signals_to_parent()  # signals to the learner's group: it checkpoints, then stops us
    parent = os.getppid()
    ring = weights = envs = None
    try:
        from rapidrl.nets.q import QNetwork
        from rapidrl.vector import make_vec

        torch.set_num_threads(1)
        ring = SharedArrays.attach(spec.ring_name, spec.ring_specs)
        weights = SharedArrays.attach(spec.weights_name, spec.weights_specs)
        q = QNetwork(**spec.net_kwargs)
        q.train()  # noisy layers act with their noise; nothing else differs
        version = -1
        gen = torch.Generator().manual_seed(
            int(np.random.SeedSequence(spec.rng_seed).generate_state(1)[0])
        )
        rng = np.random.default_rng(spec.rng_seed)
        envs = make_vec(
            spec.env,
            spec.num_envs,
            spec.backend,
            num_workers=spec.num_workers,
            env_options=spec.env_options,
        )
        obs, _ = envs.reset(seed=spec.env_seed)
        n_actions = q.n_actions
        free = deque(range(ring["version"].shape[0]))
        steps = spec.start_steps
        while True:
            # Messages from the learner; block (with liveness checks) only while no slot is free.
            while conn.poll(0 if free else _POLL_S):
                msg = conn.recv()
                if msg[0] == "free":
                    free.append(msg[1])
                elif msg[0] == "stop":
                    return
            if not free:
                if os.getppid() != parent:
                    return  # the learner is gone
                continue
            s = free.popleft()
            if int(weights["version"][0]) != version:
                if not lock.acquire(timeout=spec.timeout):
                    raise ActorError(f"weight lock not released within {spec.timeout} s")
                try:
                    version = int(weights["version"][0])
                    _load_weights(q, weights)
                finally:
                    lock.release()
            eps = linear_schedule(*spec.epsilon, steps)
            greedy = functools.partial(_greedy, q, obs, gen if spec.noisy else None)
            actions = epsilon_greedy(rng, eps, n_actions, spec.num_envs, greedy)
            next_obs, rewards, terminated, truncated, infos = envs.step(actions)
            done = terminated | truncated
            ring["obs"][s] = obs
            ring["next_obs"][s] = next_obs
            if done.any():
                ring["next_obs"][s][done] = infos["final_obs"][done]
            ring["actions"][s] = actions
            ring["rewards"][s] = rewards
            ring["terminated"][s] = terminated
            ring["truncated"][s] = truncated
            ring["episode_end"][s] = infos["episode_end"]
            ring["episode_return"][s] = infos["episode_return"]
            ring["episode_length"][s] = infos["episode_length"]
            ring["version"][s] = version
            ring["epsilon"][s] = eps
            conn.send(("full", s))
            obs = next_obs
            steps += spec.num_envs
    except BaseException:
        try:
            conn.send(("error", traceback.format_exc()))
        except Exception:
            pass
    finally:
        if envs is not None:
            try:
                envs.close()
            except Exception:
                pass
        for block in (ring, weights):
            if block is not None:
                block.close()


# --------------------------------------------------------------------------------------------
# The learner's side
# --------------------------------------------------------------------------------------------
@dataclass
class StepBatch:
    """One vector step of one actor, as views into its ring slot (valid until ``release``)."""

    actor_id: int
    slot: int
    env_ids: np.ndarray
    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    next_obs: np.ndarray
    infos: dict[str, np.ndarray]
    version: int
    epsilon: float


_EXIT_GRACE = 2.0  # s: how long a closed pipe's actor gets to be reaped before we report it


class ActorPool:
    """Starts ``num_actors`` actor processes and hands their steps to the learner.

    Args:
        num_actors: actor processes; actor ``a`` runs envs ``a*M .. a*M+M-1`` (``M = num_envs /
            num_actors``), which are the replay streams of its rows.
        q: the learner's online net (weights are published from it; architecture via
            ``net_kwargs``, rebuilt in each actor as ``QNetwork(**net_kwargs)`` on CPU).
        slots: ring slots per actor.
        seed: env ``i`` of the first reset gets ``env_seed + i`` (as ``make_vec`` does).
        start_steps: agent steps so far (epsilon schedule position on resume).
        epsilon: ``(start, end, decay_steps)``; each actor counts ``M`` steps per vector step.
    """

    def __init__(
        self,
        num_actors: int,
        *,
        env: str,
        env_options: dict[str, Any],
        num_envs: int,
        backend: str,
        num_workers: int | None,
        obs_shape: tuple[int, ...],
        obs_dtype: Any,
        q: torch.nn.Module,
        net_kwargs: dict[str, Any],
        slots: int,
        env_seed: int,
        rng_seed: int,
        start_steps: int,
        epsilon: tuple[float, float, int],
        noisy: bool,
        version: int,
        timeout: float,
    ):
        if num_envs % num_actors:
            raise ValueError(f"num_envs {num_envs} is not a multiple of {num_actors} actors")
        self.num_actors = num_actors
        self.envs_per_actor = m = num_envs // num_actors
        self.timeout = float(timeout)
        self._ctx = get_context("spawn")
        self._lock = self._ctx.Lock()
        self._rings: list[SharedArrays] = []
        self._conns: list[Any] = []
        self.procs: list[Any] = []
        self._ready: deque[tuple[int, int]] = deque()
        self._closed = False
        sd = {k: v.detach() for k, v in q.state_dict().items()}
        try:
            self._weights = SharedArrays.create(weight_specs(sd))
            self.publish(q, version)
            # The epsilon schedule counts all envs' steps; each actor sees 1/num_actors of them.
            start, end, decay = epsilon
            for a in range(num_actors):
                ring = SharedArrays.create(ring_specs(slots, m, obs_shape, obs_dtype))
                self._rings.append(ring)
                spec = ActorSpec(
                    actor_id=a,
                    env=env,
                    env_options=dict(env_options),
                    num_envs=m,
                    backend=backend,
                    num_workers=num_workers,
                    net_kwargs=dict(net_kwargs),
                    ring_name=ring.name,
                    ring_specs=ring.specs,
                    weights_name=self._weights.name,
                    weights_specs=self._weights.specs,
                    env_seed=env_seed + a * m,
                    rng_seed=(rng_seed, a, start_steps),
                    start_steps=start_steps // num_actors,
                    epsilon=(start, end, math.ceil(decay / num_actors)),
                    noisy=noisy,
                    timeout=self.timeout,
                )
                parent_conn, child_conn = self._ctx.Pipe(duplex=True)
                # Not a daemon: an actor may start env worker processes of its own.
                proc = self._ctx.Process(
                    target=actor_main,
                    args=(spec, child_conn, self._lock),
                    name=f"rapidrl-dqn-actor-{a}",
                    daemon=False,
                )
                proc.start()
                child_conn.close()
                self._conns.append(parent_conn)
                self.procs.append(proc)
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int | None]:
        return [p.pid for p in self.procs]

    # --- weights ------------------------------------------------------------------------------
    def publish(self, q: torch.nn.Module, version: int) -> None:
        """Copy ``q``'s weights into the shared block and set the version (under the lock)."""
        if not self._lock.acquire(timeout=self.timeout):
            self._check_alive()
            raise ActorError(
                f"the weight lock was not released within {self.timeout} s by an actor"
            )
        try:
            with torch.no_grad():
                for k, v in q.state_dict().items():
                    torch.from_numpy(self._weights[f"w:{k}"]).copy_(v.detach())
            self._weights["version"][0] = int(version)
        finally:
            self._lock.release()

    # --- steps --------------------------------------------------------------------------------
    def next(self) -> StepBatch:
        """The next finished vector step of any actor (waits with timeout + liveness checks)."""
        deadline = time.monotonic() + self.timeout
        while not self._ready:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ActorError(
                    f"no step from any actor for {self.timeout:.0f} s although they are alive "
                    f"(pids {self.pids}); an env or the actor is stuck. Raise --actor-timeout-s "
                    "if steps are legitimately that slow"
                )
            sentinels = [p.sentinel for p in self.procs]
            ready = connection.wait(self._conns + sentinels, timeout=min(remaining, _POLL_S))
            for a, conn in enumerate(self._conns):
                if conn in ready:
                    self._drain(a)
            if any(s in ready for s in sentinels) and not self._ready:
                self._check_alive()
        a, s = self._ready.popleft()
        ring, m = self._rings[a], self.envs_per_actor
        return StepBatch(
            actor_id=a,
            slot=s,
            env_ids=np.arange(a * m, (a + 1) * m),
            obs=ring["obs"][s],
            actions=ring["actions"][s],
            rewards=ring["rewards"][s],
            terminated=ring["terminated"][s],
            truncated=ring["truncated"][s],
            next_obs=ring["next_obs"][s],
            infos={
                "episode_end": ring["episode_end"][s],
                "episode_return": ring["episode_return"][s],
                "episode_length": ring["episode_length"][s],
            },
            version=int(ring["version"][s]),
            epsilon=float(ring["epsilon"][s]),
        )

    def release(self, batch: StepBatch) -> None:
        """Give the slot back to its actor (call once its data is copied into the replay)."""
        try:
            self._conns[batch.actor_id].send(("free", batch.slot))
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self._pipe_closed(batch.actor_id)

    def _drain(self, a: int) -> None:
        conn = self._conns[a]
        try:
            while conn.poll(0):
                msg = conn.recv()
                if msg[0] == "full":
                    self._ready.append((a, msg[1]))
                elif msg[0] == "error":
                    raise ActorError(
                        f"actor process {a} (pid {self.procs[a].pid}) failed:\n{msg[1]}"
                    )
        except (EOFError, ConnectionResetError, OSError):
            self._pipe_closed(a)

    def _pipe_closed(self, a: int) -> NoReturn:
        """Actor ``a``'s pipe is closed: it is dying. The pipe can close before the process is
        reaped (a SIGKILL), so wait for its exit a bounded moment, then report how it ended."""
        p = self.procs[a]
        p.join(_EXIT_GRACE)
        self._check_alive()
        raise ActorDiedError(
            f"actor process {a} (pid {p.pid}) closed its pipe: {describe_exit(p.exitcode)} "
            f"after {_EXIT_GRACE:g} s; the learner stops here"
        ) from None

    def _check_alive(self) -> None:
        for a, p in enumerate(self.procs):
            if not p.is_alive():
                p.join(0.1)
                # An exception traceback sent just before exiting explains the death best.
                try:
                    while self._conns[a].poll(0):
                        msg = self._conns[a].recv()
                        if msg[0] == "error":
                            raise ActorError(f"actor process {a} (pid {p.pid}) failed:\n{msg[1]}")
                except (EOFError, OSError):
                    pass
                raise ActorDiedError(
                    f"actor process {a} (pid {p.pid}) died: {describe_exit(p.exitcode)}. "
                    "The learner stops here; resume from the last checkpoint with --resume "
                    "RUN_DIR (or run with --actor-processes 0 to act in the learner process)"
                )

    # --- shutdown -----------------------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        stop_processes(self.procs, self._conns, ("stop",), timeout)
        for ring in self._rings:
            ring.close()
        if getattr(self, "_weights", None) is not None:
            self._weights.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
