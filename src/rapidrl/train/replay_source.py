"""The local source of an off-policy learner (DQN, SAC): envs stepped by a vector env of this
process, their transitions added to the learner's replay, the due updates run while the envs
step.

The learner brings ``epsilon()`` (the share of actions drawn at random now, a metrics column),
``act(obs, epsilon)`` (actions for a batch of observations), ``learn(n)`` (the updates due after
``n`` more agent steps) and ``rb`` (its replay, :class:`rapidrl.buffers.ReplayBuffer`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rapidrl.config import ConfigError

__all__ = ["VectorSource"]


class VectorSource:
    """Envs stepped by a vector env of this process (its workers, if any, step them while the
    learner computes). Per-env state, so asynchronous backends (``recv`` returns the first-ready
    subset) work: the observation each env last returned and the action it was last sent.
    ``cfg`` gives ``env``, ``num_envs``, ``backend`` and ``num_workers``."""

    def __init__(self, cfg: Any, options: dict[str, Any]):
        from rapidrl.vector import LayoutError, make_vec

        backend = cfg.backend
        if backend == "auto" and cfg.num_envs == 1:
            backend = "serial"
        try:
            self.envs = make_vec(
                cfg.env, cfg.num_envs, backend, num_workers=cfg.num_workers, env_options=options
            )
        except LayoutError as exc:  # ours: a layout that does not fit; anything else is a bug
            raise ConfigError(f"cannot build the vector env: {exc}") from exc
        self.n = cfg.num_envs
        self.pids: list[int | None] = []  # no actor processes
        self.last_actions: np.ndarray | None = None  # [N, ...]: made on the first step

    def reset(self, seed: int) -> None:
        self.obs, _ = self.envs.reset(seed=seed)  # [N, ...]: every env waits for an action
        self.env_ids = np.arange(self.n)

    def step(self, lrn: Any) -> tuple[int, dict[str, Any], float]:
        """1. act on the waiting envs and send the actions; 2. run the due updates while the
        envs step; 3. collect the step (where an episode ended, ``next_obs`` already holds the
        next episode's first observation: the transition's is ``final_obs``) into the replay."""
        envs, ids, obs = self.envs, self.env_ids, self.obs
        eps = lrn.epsilon()
        full = len(ids) == self.n  # synchronous: all envs, in order
        actions = lrn.act(obs if full else obs[ids], eps)
        if self.last_actions is None:  # the first step is synchronous: every env waits
            self.last_actions = np.zeros((self.n, *actions.shape[1:]), actions.dtype)
        self.last_actions[ids] = actions
        envs.send(actions, ids)
        lrn.learn(envs.batch_size)
        next_obs, rewards, terminated, truncated, infos, ids = envs.recv()
        real_next = next_obs
        done = terminated | truncated
        if done.any():
            real_next = next_obs.copy()
            real_next[done] = infos["final_obs"][done]
        full = len(ids) == self.n
        lrn.rb.add(
            obs if full else obs[ids],
            self.last_actions if full else self.last_actions[ids],
            rewards,
            terminated,
            truncated,
            real_next,
            env_ids=None if full else ids,
        )
        if full:
            self.obs = next_obs
        else:
            obs[ids] = next_obs
        self.env_ids = ids
        return len(ids), infos, eps

    def close(self) -> None:
        self.envs.close()
