"""``RolloutWorker``: a vector env + a policy that turn weights into batches of experience.

A plain Python class. In-process it is the serial mode and the ground truth of the tests; the
sampler wraps the very same class with ``ray.remote(max_restarts=-1, max_task_retries=0)`` to run
one per Ray actor. It never sees Ray types except to name its node.

Seeding: the worker derives its env and torch seeds from ``(seed, worker_id)``; a worker that Ray
*rebuilt* after a crash mixes in fresh entropy, so it does not replay its first life's episodes.
The torch generator state is the worker's own (saved and restored around each ``act``), so
in-process workers neither disturb nor depend on the caller's torch RNG: a worker gives the same
batches in-process and as a Ray actor.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rapidrl.distributed.batches import BatchMeta, RolloutBatch, TransitionBatch

__all__ = ["RolloutWorker", "frames_per_step"]


def frames_per_step(env: Any, env_options: Any = None) -> int:
    """Emulator frames per agent step: the Atari frame skip (default 4) for Atari ids, else 1."""
    if not isinstance(env, str):
        return 1
    from rapidrl.envs import resolve_env

    if not resolve_env(env).is_atari:
        return 1
    if env_options is None:
        skip = None
    elif isinstance(env_options, Mapping):
        skip = env_options.get("frame_skip")
    else:
        skip = getattr(env_options, "frame_skip", None)
    if skip is None:
        from rapidrl.envs import AtariOptions

        skip = AtariOptions().frame_skip
    return int(skip)


def _runtime() -> tuple[str, bool]:
    """(node id, rebuilt by Ray after a crash?) -- ("local", False) outside Ray."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return "local", False
    ctx = ray.get_runtime_context()
    rebuilt = False
    try:
        if ctx.get_actor_id() is not None:
            with warnings.catch_warnings():  # Ray >= 2.5x: a DeprecationWarning from inside Ray
                warnings.simplefilter("ignore", DeprecationWarning)
                rebuilt = bool(ctx.was_current_actor_reconstructed)
    except Exception:  # not inside an actor
        pass
    return ctx.get_node_id(), rebuilt


def _check_keys(out: Any, keys: tuple[str, ...], what: str) -> None:
    missing = [k for k in keys if not isinstance(out, Mapping) or k not in out]
    if missing:
        got = sorted(out) if isinstance(out, Mapping) else type(out).__name__
        raise KeyError(
            f"{what} needs policy.act() to return a dict with {list(keys)}; missing {missing} "
            f"(got {got}); see rapidrl.distributed.policy"
        )


class RolloutWorker:
    """Owns ``make_vec(env, num_envs, backend)`` and ``policy_factory()``; collects batches.

    Args:
        env: env id (``rapidrl.envs.make_env``) or env factory / list of factories (picklable).
        policy_factory: picklable ``() -> nn.Module`` with ``act`` (:mod:`.policy`).
        num_envs: envs of this worker's vector env.
        backend, env_options, vec_kwargs: passed to :func:`rapidrl.vector.make_vec`.
        worker_id: index of this worker among the sampler's (stable across restarts).
        seed: run seed; env ``i`` of the worker is seeded from ``(seed, worker_id)`` + ``i``.
        torch_threads: ``torch.set_num_threads`` for acting (None: leave as is; the Ray sampler
            passes the actor's CPUs).
        frames_per_step: emulator frames per agent step (None: :func:`frames_per_step`).
    """

    def __init__(
        self,
        env: Any,
        policy_factory: Callable[[], torch.nn.Module],
        num_envs: int = 1,
        *,
        backend: str = "serial",
        env_options: Any = None,
        vec_kwargs: Mapping[str, Any] | None = None,
        worker_id: int = 0,
        seed: int = 0,
        torch_threads: int | None = None,
        frames_per_step: int | None = None,
    ):
        from rapidrl.vector import make_vec

        if torch_threads is not None:
            torch.set_num_threads(int(torch_threads))
        self.worker_id = int(worker_id)
        self.node_id, self.rebuilt = _runtime()
        self.pid = os.getpid()
        entropy = [int(seed), self.worker_id]
        if self.rebuilt:
            entropy.append(time.time_ns() ^ self.pid)
        env_seed, torch_seed = np.random.SeedSequence(entropy).generate_state(2)
        gen = torch.Generator().manual_seed(int(torch_seed))
        self._rng_state = gen.get_state()
        self.num_envs = int(num_envs)
        self.frames_per_step = (
            int(frames_per_step) if frames_per_step else _frames_per_step(env, env_options)
        )
        self.venv = make_vec(
            env, self.num_envs, backend=backend, env_options=env_options, **dict(vec_kwargs or {})
        )
        try:
            self.obs_shape = tuple(self.venv.single_observation_space.shape)
            self.obs_dtype = np.dtype(self.venv.single_observation_space.dtype)
            # Box actions (PPO's Gaussian policy): kept as sampled, clipped where they are sent.
            space = self.venv.single_action_space
            boxed = isinstance(space, gym.spaces.Box)
            self.action_bounds = (space.low, space.high, space.dtype) if boxed else None
            if len(self.obs_shape) >= 2 and self.obs_dtype != np.uint8:
                raise TypeError(
                    f"image observations must be uint8 (got {self.obs_dtype} {self.obs_shape}): "
                    "float frames are 4x the bytes through the object store"
                )
            with torch.random.fork_rng(devices=[]):  # initial weights from the worker's seed
                torch.manual_seed(int(torch_seed))
                self.policy = policy_factory()
            if not callable(getattr(self.policy, "act", None)):
                raise TypeError(
                    f"policy_factory() returned {type(self.policy).__name__} without an act() "
                    "method; see rapidrl.distributed.policy for the protocol"
                )
            self.obs, _ = self.venv.reset(seed=int(env_seed % 2**31))
        except BaseException:
            self.venv.close()
            raise
        self.version = -1
        self.seq = 0

    # --- control -------------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """Who and where this worker is, and its spaces."""
        space = self.venv.single_action_space
        return {
            "worker_id": self.worker_id,
            "node_id": self.node_id,
            "pid": self.pid,
            "rebuilt": self.rebuilt,
            "num_envs": self.num_envs,
            "obs_shape": self.obs_shape,
            "obs_dtype": self.obs_dtype.str,
            "action_space": space,
            "frames_per_step": self.frames_per_step,
            "weights_version": self.version,
        }

    def set_weights(self, weights: Any, version: int) -> None:
        """Load a state dict (numpy arrays or tensors; a Ray ``ObjectRef`` of one is fetched)."""
        if type(weights).__name__ == "ObjectRef":  # in-process use with a ref
            import ray

            weights = ray.get(weights)
        if isinstance(weights, torch.nn.Module):
            weights = weights.state_dict()
        with warnings.catch_warnings():  # object-store arrays are read-only; load copies anyway
            warnings.simplefilter("ignore", UserWarning)
            sd = {k: torch.as_tensor(v) for k, v in weights.items()}
        self.policy.load_state_dict(sd)
        self.version = int(version)

    def close(self) -> None:
        self.venv.close()

    # --- acting --------------------------------------------------------------------------------
    def _act(self, obs: np.ndarray, epsilon: torch.Tensor | None) -> dict:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.set_rng_state(self._rng_state)
            out = self.policy.act(torch.from_numpy(obs), epsilon)
            self._rng_state = torch.get_rng_state()
        return out

    def _values(self, obs: np.ndarray) -> np.ndarray:
        """The policy's values of ``obs`` ``[B]`` float32: its ``values()`` where it has one
        (no action drawn, the random stream untouched), else ``act()["values"]``."""
        if not callable(getattr(self.policy, "values", None)):
            return self._act(obs, None)["values"].numpy().astype(np.float32)
        with torch.no_grad():
            return self.policy.values(torch.from_numpy(obs)).float().numpy()

    def _meta(self, steps: int, seconds: float, rets: list, lens: list) -> BatchMeta:
        meta = BatchMeta(
            worker_id=self.worker_id,
            node_id=self.node_id,
            pid=self.pid,
            weights_version=self.version,
            seq=self.seq,
            env_steps=steps * self.num_envs,
            frames=steps * self.num_envs * self.frames_per_step,
            collect_seconds=seconds,
            episode_returns=np.asarray(rets, np.float64),
            episode_lengths=np.asarray(lens, np.int64),
        )
        self.seq += 1
        return meta

    @staticmethod
    def _episodes(infos: Mapping[str, np.ndarray], rets: list, lens: list) -> None:
        ended = infos["episode_end"]
        if ended.any():
            rets.extend(infos["episode_return"][ended].tolist())
            lens.extend(infos["episode_length"][ended].tolist())

    def _load(self, weights: Any, version: int | None) -> None:
        if weights is not None:
            self.set_weights(weights, -1 if version is None else version)

    def collect_transitions(
        self,
        num_steps: int,
        epsilon: float | np.ndarray = 0.0,
        weights: Any = None,
        version: int | None = None,
    ) -> TransitionBatch:
        """``num_steps`` epsilon-greedy steps of every env (DQN / Ape-X).

        ``epsilon``: one value or one per env. ``weights``/``version``: load these first
        (what the sampler sends when this worker's weights are stale).
        """
        self._load(weights, version)
        t_len, n = int(num_steps), self.num_envs
        if t_len < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}")
        eps = np.broadcast_to(np.asarray(epsilon, np.float32), (n,)).copy()
        eps_t = torch.from_numpy(eps)
        t0 = time.perf_counter()
        obs = np.empty((t_len + 1, n, *self.obs_shape), self.obs_dtype)
        actions = None
        rewards = np.empty((t_len, n), np.float32)
        terminated = np.empty((t_len, n), bool)
        truncated = np.empty((t_len, n), bool)
        final_t, final_env, final_obs = [], [], []
        rets: list = []
        lens: list = []
        for t in range(t_len):
            obs[t] = self.obs
            out = self._act(obs[t], eps_t)
            if t == 0:
                _check_keys(out, ("actions",), "DQN collection")
            a = out["actions"].numpy()
            if actions is None:
                actions = np.empty((t_len, *a.shape), a.dtype)
            actions[t] = a
            self.obs, r, te, tr, infos = self.venv.step(a)
            rewards[t], terminated[t], truncated[t] = r, te, tr
            done = np.flatnonzero(te | tr)
            if len(done):
                final_t.extend([t] * len(done))
                final_env.extend(done.tolist())
                final_obs.append(infos["final_obs"][done])
            self._episodes(infos, rets, lens)
        obs[t_len] = self.obs
        final = (
            np.concatenate(final_obs)
            if final_obs
            else np.empty((0, *self.obs_shape), self.obs_dtype)
        )
        return TransitionBatch(
            obs=obs,
            actions=actions,
            rewards=rewards,
            terminated=terminated,
            truncated=truncated,
            final_obs=final,
            final_t=np.asarray(final_t, np.int64),
            final_env=np.asarray(final_env, np.int64),
            epsilon=eps,
            meta=self._meta(t_len, time.perf_counter() - t0, rets, lens),
        )

    def collect_rollout(
        self, num_steps: int, weights: Any = None, version: int | None = None
    ) -> RolloutBatch:
        """``num_steps`` on-policy steps of every env (PPO); see :class:`RolloutBatch`."""
        self._load(weights, version)
        t_len, n = int(num_steps), self.num_envs
        if t_len < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}")
        t0 = time.perf_counter()
        obs = np.empty((t_len, n, *self.obs_shape), self.obs_dtype)
        actions = None
        logprobs = np.empty((t_len, n), np.float32)
        values = np.empty((t_len, n), np.float32)
        rewards = np.empty((t_len, n), np.float32)
        terminated = np.empty((t_len, n), bool)
        truncated = np.empty((t_len, n), bool)
        final_values = np.zeros((t_len, n), np.float32)
        boot_t, boot_env, boot_obs = [], [], []
        rets: list = []
        lens: list = []
        for t in range(t_len):
            obs[t] = self.obs
            out = self._act(obs[t], None)
            if t == 0:
                _check_keys(out, ("actions", "logprobs", "values"), "PPO collection")
            a = out["actions"].numpy()
            if actions is None:
                actions = np.empty((t_len, *a.shape), a.dtype)
            actions[t] = a
            logprobs[t] = out["logprobs"].numpy()
            values[t] = out["values"].numpy()
            if self.action_bounds is not None:
                low, high, dtype = self.action_bounds
                a = np.clip(a, low, high).astype(dtype, copy=False)
            self.obs, r, te, tr, infos = self.venv.step(a)
            rewards[t], terminated[t], truncated[t] = r, te, tr
            boot = np.flatnonzero(tr & ~te)  # time limit: bootstrap from V(final_obs)
            if len(boot):
                boot_t.extend([t] * len(boot))
                boot_env.extend(boot.tolist())
                boot_obs.append(infos["final_obs"][boot])
            self._episodes(infos, rets, lens)
        # One forward pass for the bootstrap values: the observation after the rollout and the
        # final observations of the truncated episodes.
        last_obs = self.obs.copy()
        both = np.concatenate([last_obs, *boot_obs]) if boot_obs else last_obs
        v = self._values(both)
        if boot_t:
            final_values[np.asarray(boot_t), np.asarray(boot_env)] = v[n:]
        return RolloutBatch(
            obs=obs,
            actions=actions,
            logprobs=logprobs,
            values=values,
            rewards=rewards,
            terminated=terminated,
            truncated=truncated,
            final_values=final_values,
            last_obs=last_obs,
            last_values=v[:n].copy(),
            meta=self._meta(t_len, time.perf_counter() - t0, rets, lens),
        )


_frames_per_step = frames_per_step
