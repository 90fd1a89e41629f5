"""The local source of on-policy experience that PPO and PQN share: a vector env of this process
and time-major ``[T, N]`` buffers filled from it, written once.

An algorithm says what it records per step besides the common fields (``extras``: PPO's
log-probabilities and values, PQN's max-Q) and brings two functions:

- ``act(obs [b, ...], ids [b], starts [b]) -> (actions [b], {extra: [b]})``: its actions for the
  observations the envs ``ids`` hold (``starts``: whether each opens an episode);
- ``final_value(final_obs [c, ...], ids [c]) -> [c]``: the value to bootstrap from where an
  episode was cut by a time limit (``truncated and not terminated``), read at once: with the
  same-step autoreset of the vector API the returned observation is already the next episode's.

Two ways to meet a first-ready vector env (``batch_size B < N``):

- per env (``lockstep=False``, PPO): every env has a write position ``lengths[i]``; each
  ``recv``'s envs are stored at their own positions and acted on again at once while the
  rollout's budget of ``num_steps x num_envs`` actions lasts, then held (a drain) so every env is
  idle at the update. Per env between about ``num_steps - k`` and ``num_steps + k`` steps; the
  buffers have room for ``num_steps x N / B`` (the most one env can get).
- in lockstep (``lockstep=True``, PQN): every env takes exactly one step per ``t``: the batches
  of one vector step are merged before anything is stored (Q(lambda) wants whole ``[T, N]``).

With a synchronous vector env (``B = N``) the two are the same classic rollout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rapidrl.config import ConfigError
from rapidrl.train.loop import num_threads

__all__ = ["Act", "FinalValue", "VectorRollout"]

Act = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, dict[str, Any]]]
FinalValue = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
_INFO_KEYS = ("final_obs", "episode_end", "episode_return", "episode_length")


class VectorRollout:
    """``num_steps x num_envs`` agent steps of a local vector env into ``[T, N]`` buffers:
    ``obs``, ``actions`` (``[T, N, A]`` float32 for a ``Box``: as sampled, clipped to the
    bounds only when sent), ``rewards`` (times ``reward_scale``), ``terminated``, ``truncated``,
    ``starts``, ``final_values`` (where truncated) and each of ``extras`` (float32), with
    ``lengths`` the steps of each env in the rollout. ``next_obs`` / ``next_start``: what every
    env holds after it. Config fields read: ``env``, ``num_envs``, ``num_steps``, ``backend``,
    ``num_workers``, ``act_threads`` and (when ``batch_size`` is None) ``env_batch_size``."""

    def __init__(
        self,
        cfg: Any,
        options: dict[str, Any],
        obs_space: Any,
        device: torch.device,
        extras: tuple[str, ...],
        *,
        lockstep: bool,
        reward_scale: float = 1.0,
    ):
        from rapidrl.vector import LayoutError, make_vec

        backend = "serial" if cfg.backend == "auto" and cfg.num_envs == 1 else cfg.backend
        try:
            self.envs = make_vec(
                cfg.env,
                cfg.num_envs,
                backend,
                num_workers=cfg.num_workers,
                batch_size=getattr(cfg, "env_batch_size", None),
                env_options=options,
            )
        except LayoutError as exc:  # ours: a layout that does not fit; anything else is a bug
            raise ConfigError(f"cannot build the vector env: {exc}") from exc
        N, T, B = cfg.num_envs, cfg.num_steps, self.envs.batch_size
        if N % B:
            self.envs.close()
            raise ConfigError(
                f"the {backend} vector env returns batches of {B} envs, which do not divide "
                f"--num-envs {N}; set --env-batch-size to a divisor of {N}"
            )
        self.num_envs, self.num_steps, self.lockstep = N, T, lockstep
        self.act_threads, self.reward_scale, self.device = cfg.act_threads, reward_scale, device
        # Per env, an env gets at most one step per recv: T * N / B steps.
        t_max = T if lockstep or B == N else T * N // B
        obs_dtype = torch.from_numpy(np.empty(0, dtype=obs_space.dtype)).dtype

        def buf(*shape, dtype=torch.float32):
            return torch.zeros((t_max, N, *shape), dtype=dtype, device=device)

        self.obs = buf(*obs_space.shape, dtype=obs_dtype)
        # Box actions (PPO's Gaussian policy): stored as sampled, clipped to the bounds only
        # where they are sent (the log-probs are those of the unclipped samples).
        act_space = self.envs.single_action_space
        self.action_bounds = None
        if isinstance(act_space, gym.spaces.Box):
            self.actions = buf(*act_space.shape)
            self.action_bounds = (act_space.low, act_space.high, act_space.dtype)
        else:
            self.actions = buf(dtype=torch.long)
        self.rewards = buf()
        self.terminated, self.truncated = buf(dtype=torch.bool), buf(dtype=torch.bool)
        self.starts = buf(dtype=torch.bool)
        self.final_values = buf()  # the bootstrap value of final_obs where truncated
        self.extras = {name: buf() for name in extras}
        self.lengths = np.zeros(N, dtype=np.int64)  # steps of each env in this rollout so far

    def reset(self, seed: int) -> None:
        """Reset every env (a fresh run, or a resumed one: fresh episodes)."""
        self.next_obs, _ = self.envs.reset(seed=seed)
        self.next_start = np.ones(self.num_envs, dtype=bool)  # every env begins an episode

    def _act_and_send(self, ids: np.ndarray, act: Act) -> None:
        """Act on the held observations of envs ``ids``, store, send the actions."""
        device = self.device
        pos = torch.as_tensor(self.lengths[ids], device=device)
        ids_t = torch.as_tensor(ids, device=device)
        obs = torch.as_tensor(self.next_obs[ids], device=device)
        start = torch.as_tensor(self.next_start[ids], device=device)
        with torch.no_grad():
            actions, extras = act(obs, ids_t, start)
        self.obs[pos, ids_t] = obs
        self.starts[pos, ids_t] = start
        self.actions[pos, ids_t] = actions
        for name, values in extras.items():
            self.extras[name][pos, ids_t] = values
        sent = actions.cpu().numpy()
        if self.action_bounds is not None:
            low, high, dtype = self.action_bounds
            sent = np.clip(sent, low, high).astype(dtype, copy=False)
        self.envs.send(sent, ids)

    def _recv_every_env(self):
        """``recv`` until every env has come back once, merged in env order (lockstep)."""
        envs, n = self.envs, self.num_envs
        if envs.batch_size == n:
            return envs.recv()
        obs = np.empty((n, *envs.obs_shape), dtype=envs.obs_dtype)
        rewards = np.zeros(n, np.float64)
        terminated, truncated = np.zeros(n, bool), np.zeros(n, bool)
        infos: dict[str, np.ndarray] = {
            "env_id": np.arange(n),
            "final_obs": np.zeros_like(obs),
            "episode_end": np.zeros(n, bool),
            "episode_return": np.zeros(n, np.float64),
            "episode_length": np.zeros(n, np.int64),
        }
        for _ in range(n // envs.batch_size):
            o, r, te, tr, info, ids = envs.recv()
            obs[ids], rewards[ids], terminated[ids], truncated[ids] = o, r, te, tr
            for k in _INFO_KEYS:
                infos[k][ids] = info[k]
        return obs, rewards, terminated, truncated, infos, np.arange(n)

    def collect(
        self, act: Act, final_value: FinalValue, on_steps: Callable[[int, dict], None]
    ) -> None:
        """One rollout; ``on_steps(n, infos)`` after every ``n`` steps received (the counters,
        the episode statistics)."""
        device, budget = self.device, self.num_steps * self.num_envs
        recv = self._recv_every_env if self.lockstep else self.envs.recv
        self.lengths[:] = 0
        # The whole rollout on act_threads: with more, tensor copies here (obs into the buffer)
        # fork OpenMP regions whose spinning threads take the core an env worker needs
        # (profiled: each command write to a worker then cost ~1 ms).
        with num_threads(self.act_threads or 1):
            self._act_and_send(np.arange(self.num_envs), act)
            sent, received = self.num_envs, 0
            while received < budget:
                obs, rewards, terminated, truncated, infos, ids = recv()
                pos = torch.as_tensor(self.lengths[ids], device=device)
                ids_t = torch.as_tensor(ids, device=device)
                rewards_t = torch.as_tensor(rewards, device=device).float()
                self.rewards[pos, ids_t] = rewards_t * self.reward_scale
                self.terminated[pos, ids_t] = torch.as_tensor(terminated, device=device)
                self.truncated[pos, ids_t] = torch.as_tensor(truncated, device=device)
                # A time limit: bootstrap from the episode's last observation -- before act()
                # below starts the next episode (for an LSTM: from the ended episode's state).
                cut = truncated & ~terminated
                if cut.any():
                    cut_t = torch.as_tensor(cut, device=device)
                    final = torch.as_tensor(infos["final_obs"][cut], device=device)
                    with torch.no_grad():
                        values = final_value(final, ids_t[cut_t])
                    self.final_values[pos[cut_t], ids_t[cut_t]] = values
                self.lengths[ids] += 1
                self.next_obs[ids] = obs
                self.next_start[ids] = terminated | truncated
                received += len(ids)
                on_steps(len(ids), infos)
                if sent < budget:  # else hold the env until the update is done
                    self._act_and_send(ids, act)
                    sent += len(ids)

    def close(self) -> None:
        self.envs.close()
