"""The PQN trainer: ``train(cfg) -> summary``; reads top to bottom like CleanRL's
``pqn_atari_envpool.py``.

Each update: (1) set the annealed learning rate; (2) collect a rollout of ``num_steps x
num_envs`` agent steps, epsilon-greedy, recording each observation's max-Q as it is acted on;
(3) Q(lambda) targets over the rollout with the current network
(:func:`rapidrl.algos.pqn.learner.rollout_targets`); (4) ``epochs`` passes of ``minibatches`` MSE
steps (:meth:`PQNLearner.train_on_rollout`); (5) log, checkpoint, check the stop conditions (solved,
max_frames, max_minutes, Ctrl-C). The network, optimizer, counters and checkpoints live in
:class:`rapidrl.algos.pqn.learner.PQNLearner`.

Rollout layout and truncation
-----------------------------
Time-major buffers ``[T, N]``, as PPO's. With the same-step autoreset of the vector API the
observation returned by a step that ended an episode is already the next episode's first one, so
where ``truncated`` (a time limit) the trainer evaluates the max-Q of ``infos["final_obs"]`` right
away and the target bootstraps from it; where ``terminated`` nothing is bootstrapped. The
rollout's last step bootstraps from the max-Q of the observation each env holds after it. Every
env steps on every step: a first-ready vector env (``backend async``) is stepped batch by batch
until all envs have stepped (:func:`step_all`).

Resume (``--resume RUN_DIR``) -- what is exact and what is not
--------------------------------------------------------------
Checkpoints are taken between updates. Exact: the network, the RAdam state, the counters (so
the epsilon and learning-rate schedules), the episode window and best mean, the training clock,
the metric accumulators and every RNG (Python, NumPy, torch, the exploration and minibatch
generators). Not exact: the envs, whose emulator state is not saved: on resume they restart from
seeds derived from the step counter (fresh episodes). So a stopped run's checkpoint equals the
uninterrupted run's at the same frame bit for bit (CPU, same thread count), resuming the same
checkpoint twice gives the same run, and after the checkpoint the resumed run plays other
episodes than the uninterrupted one would have. The schedules follow ``schedule_frames``
(default ``max_frames``): resuming with a larger ``max_frames`` stretches them unless
``schedule_frames`` is set.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from rapidrl.algos import DEFAULT_PRESETS
from rapidrl.algos.pqn.config import PRESETS, PQNConfig
from rapidrl.algos.pqn.learner import (
    METRIC_COLUMNS,
    PQNLearner,
    epsilon_at,
    make_pqn_network,
    q_lambda_at,
    rollout_targets,
)
from rapidrl.config import ConfigError
from rapidrl.train import config_from_dict
from rapidrl.train.cli import parse_with_resume, run_from_cli
from rapidrl.train.loop import num_threads, probe_env
from rapidrl.train.runner import Algorithm, run_training, started
from rapidrl.train.session import LogEvent

__all__ = [
    "LogEvent",
    "algorithm",
    "eval_policy",
    "main_pqn",
    "parse_pqn_args",
    "step_all",
    "train",
]


def step_all(envs, actions: np.ndarray):
    """One step of every env: ``(obs, rewards, terminated, truncated, infos)`` in env-id order.
    A synchronous vector env takes ``step``; a first-ready one gets every action, then returns
    batches until each env has come back once, merged here."""
    n = envs.num_envs
    if envs.batch_size == n:
        return envs.step(actions)
    envs.send(actions, np.arange(n))
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
        for k in ("final_obs", "episode_end", "episode_return", "episode_length"):
            infos[k][ids] = info[k]
    return obs, rewards, terminated, truncated, infos


def train(cfg: PQNConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train, write the run directory, return the summary (what ``summary.json`` holds). The
    run loop (:func:`rapidrl.train.runner.run_training`) calls :func:`iterate` once per update."""
    if cfg.ray is not None:  # rollouts from Ray workers: rapidrl.algos.pqn.ray_loop
        from rapidrl.algos.pqn.ray_loop import train_ray

        return train_ray(cfg, on_log=on_log)
    return run_training(cfg, algorithm(cfg), on_log=on_log)


def algorithm(cfg: PQNConfig) -> Algorithm:
    """What this algorithm brings to the run loop (:func:`rapidrl.train.runner.run_training`):
    its learner, its local source of experience, one iteration, its metrics row."""
    return Algorithm(
        name="pqn", label="PQN", title="PQN {env}", columns=METRIC_COLUMNS,
        learner=lambda cfg, env, device: PQNLearner(cfg, env.obs_shape, env.n_actions, device),
        source=_rollout,
        iterate=iterate,
        row=lambda lrn, rollout, frames: lrn.metrics_row(frames),
    )  # fmt: skip


def _rollout(cfg, env: Any, lrn: PQNLearner, env_seed: int) -> PQNRollout:
    """The local vector env (a bad layout: ConfigError), its envs reset from ``env_seed``."""
    return started(PQNRollout(cfg, env.options, env.obs_space, lrn), env_seed)


def iterate(lrn: PQNLearner, rollout: PQNRollout, session: Any) -> None:
    """One PQN update."""
    # 1. Learning rate: annealed linearly to 0 over schedule_frames.
    lrn.set_lr(lrn.frames)
    # 2. Rollout: num_steps x num_envs epsilon-greedy agent steps.
    t0 = time.perf_counter()
    rollout.collect(functools.partial(lrn.steps_done, session))
    rollout_s = time.perf_counter() - t0
    # 3. Q(lambda) targets, bootstrapped from the max-Q of the observations held now.
    t1 = time.perf_counter()
    returns = rollout.targets()
    # 4. epochs x minibatches of MSE regression of Q(s, a) to the targets.
    lrn.train_on_rollout(rollout.obs, rollout.actions, returns, rollout_s=rollout_s, t_start=t1)


class PQNRollout:
    """``num_steps x num_envs`` epsilon-greedy agent steps into time-major ``[T, N]`` buffers,
    recording each observation's max-Q as it is acted on, and their Q(lambda) targets."""

    def __init__(self, cfg: PQNConfig, options: dict, obs_space: Any, lrn: PQNLearner):
        from rapidrl.vector import make_vec

        backend = "serial" if cfg.backend == "auto" and cfg.num_envs == 1 else cfg.backend
        try:
            self.envs = make_vec(
                cfg.env, cfg.num_envs, backend, num_workers=cfg.num_workers, env_options=options
            )
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"cannot build the vector env: {exc}") from exc
        self.cfg, self.lrn, self.device = cfg, lrn, lrn.device
        T, N, device = cfg.num_steps, cfg.num_envs, lrn.device
        obs_dtype = torch.from_numpy(np.empty(0, dtype=obs_space.dtype)).dtype
        self.obs = torch.zeros((T, N, *obs_space.shape), dtype=obs_dtype, device=device)
        self.actions = torch.zeros((T, N), dtype=torch.long, device=device)
        self.rewards = torch.zeros((T, N), device=device)
        self.terminated = torch.zeros((T, N), dtype=torch.bool, device=device)
        self.truncated = torch.zeros((T, N), dtype=torch.bool, device=device)
        self.max_q = torch.zeros((T, N), device=device)  # max-Q of obs[t], recorded when acting
        self.trunc_q = torch.zeros((T, N), device=device)  # max-Q of final_obs where truncated

    def reset(self, seed: int) -> None:
        self.next_obs, _ = self.envs.reset(seed=seed)

    def collect(self, on_steps: Callable[..., None]) -> None:
        """One rollout; ``on_steps(n, infos, eps=eps)`` after every vector step."""
        cfg, lrn, device = self.cfg, self.lrn, self.device
        with num_threads(cfg.act_threads or 1):
            for t in range(cfg.num_steps):
                obs = torch.as_tensor(self.next_obs, device=device)
                eps = epsilon_at(cfg, lrn.frames)
                actions, max_q = lrn.act(obs, eps)
                self.obs[t], self.actions[t], self.max_q[t] = obs, actions, max_q
                self.next_obs, rewards, terminated, truncated, infos = step_all(
                    self.envs, actions.cpu().numpy()
                )
                rewards_t = torch.as_tensor(rewards, device=device).float()
                self.rewards[t] = rewards_t * cfg.reward_scale
                self.terminated[t] = torch.as_tensor(terminated, device=device)
                self.truncated[t] = torch.as_tensor(truncated, device=device)
                # A time limit: bootstrap from the max-Q of the episode's last obs.
                cut = truncated & ~terminated
                if cut.any():
                    final = torch.as_tensor(infos["final_obs"][cut], device=device)
                    self.trunc_q[t, torch.as_tensor(cut, device=device)] = lrn.max_q(final)
                on_steps(cfg.num_envs, infos, eps=eps)

    def targets(self) -> torch.Tensor:
        """The Q(lambda) targets ``[T, N]`` of the collected rollout, bootstrapped from the
        max-Q of the observations the envs hold now."""
        boot = self.lrn.max_q(torch.as_tensor(self.next_obs, device=self.device))
        return rollout_targets(
            self.rewards, self.max_q, self.terminated, self.truncated, self.trunc_q, boot,
            self.cfg.gamma, q_lambda_at(self.cfg, self.lrn.frames),
        )  # fmt: skip

    def close(self) -> None:
        self.envs.close()


# --------------------------------------------------------------------------------------------
# Evaluation: the PQN policy loader of ``rapidrl eval``
# --------------------------------------------------------------------------------------------
def eval_policy(config: dict[str, Any], ckpt, device: str = "cpu"):
    """``rapidrl eval`` loader: the greedy (argmax-Q) policy of a PQN checkpoint.

    Returns ``(act, env_id, env_options)`` where ``act(obs [B, ...]) -> actions [B]``.
    """
    cfg = config_from_dict(PQNConfig, config)
    env = probe_env(cfg, "PQN")
    net = make_pqn_network(cfg, env.obs_shape, env.n_actions, device).to(device)
    ckpt.restore(net=net)  # a clear CheckpointError when the weights do not fit
    net.eval()

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return net(torch.as_tensor(np.asarray(obs), device=device)).argmax(1).cpu().numpy()

    return act, cfg.env, env.options


# --------------------------------------------------------------------------------------------
# Command line: rapidrl train pqn
# --------------------------------------------------------------------------------------------
def parse_pqn_args(argv: Sequence[str], prog: str = "rapidrl train pqn") -> PQNConfig:
    """``--preset NAME`` + field flags -> ``PQNConfig``; ``--resume RUN_DIR`` takes the run's own
    config as the defaults."""
    return parse_with_resume(
        PQNConfig, PRESETS, argv, prog=prog, default_preset=DEFAULT_PRESETS["pqn"], algo="pqn"
    )


def main_pqn(argv: Sequence[str]) -> int:
    """``rapidrl train pqn [--preset fast|pqn|cartpole] [--FIELD VALUE ...]`` (default: fast)."""
    prog = "rapidrl train pqn"
    return run_from_cli(train, parse_pqn_args(argv, prog), prog)
