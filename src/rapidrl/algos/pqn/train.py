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
until all envs have stepped (:class:`rapidrl.train.rollout.VectorRollout` in lockstep).

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

from collections.abc import Callable, Sequence
from typing import Any

import torch

from rapidrl.algos import DEFAULT_PRESETS
from rapidrl.algos.eval import final_eval, greedy_actions, restore_for_eval
from rapidrl.algos.pqn.config import PRESETS, PQNConfig
from rapidrl.algos.pqn.learner import METRIC_COLUMNS, PQNLearner, make_pqn_network, rollout_targets
from rapidrl.train.cli import parse_with_resume, run_from_cli
from rapidrl.train.rollout import VectorRollout
from rapidrl.train.runner import Algorithm, rollout_source, run_training
from rapidrl.train.session import LogEvent

__all__ = [
    "LogEvent",
    "algorithm",
    "eval_policy",
    "main_pqn",
    "parse_pqn_args",
    "train",
]


def train(cfg: PQNConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train, write the run directory, return the summary (what ``summary.json`` holds). The
    run loop (:func:`rapidrl.train.runner.run_training`) calls :func:`iterate` once per update."""
    if cfg.ray is not None:  # rollouts from Ray workers: rapidrl.algos.pqn.ray_loop
        from rapidrl.algos.pqn.ray_loop import train_ray

        summary = train_ray(cfg, on_log=on_log)
    else:
        summary = run_training(cfg, algorithm(cfg), on_log=on_log)
    return final_eval(summary, cfg)  # --eval-episodes: the final policy played greedily


def algorithm(cfg: PQNConfig) -> Algorithm:
    """What this algorithm brings to the run loop (:func:`rapidrl.train.runner.run_training`):
    its learner, its local source of experience (the local vector env), one iteration."""
    return Algorithm(
        name="pqn", label="PQN", title="PQN {env}", columns=METRIC_COLUMNS,
        learner=PQNLearner.for_env, source=rollout_source(PQNRollout), iterate=iterate,
    )  # fmt: skip


def iterate(lrn: PQNLearner, rollout: PQNRollout, session: Any) -> None:
    """One PQN update."""
    # 1. Learning rate: annealed linearly to 0 over schedule_frames.
    lrn.set_lr(lrn.frames)
    # 2. Rollout: num_steps x num_envs epsilon-greedy agent steps.
    rollout_s, t_end = lrn.collect(rollout, session)
    # 3. Q(lambda) targets, bootstrapped from the max-Q of the observations held now.
    returns = rollout.targets()
    # 4. epochs x minibatches of MSE regression of Q(s, a) to the targets.
    lrn.train_on_rollout(rollout.obs, rollout.actions, returns, rollout_s=rollout_s, t_start=t_end)


class PQNRollout:
    """``num_steps x num_envs`` epsilon-greedy agent steps into time-major ``[T, N]`` buffers
    (:class:`rapidrl.train.rollout.VectorRollout` in lockstep: every env steps on every step),
    recording each observation's max-Q as it is acted on, and their Q(lambda) targets."""

    def __init__(self, cfg: PQNConfig, options: dict, obs_space: Any, lrn: PQNLearner):
        self.steps = VectorRollout(
            cfg, options, obs_space, lrn.device, ("max_q",), lockstep=True,
            reward_scale=cfg.reward_scale,
        )  # fmt: skip
        self.envs = self.steps.envs
        self.cfg, self.lrn, self.device = cfg, lrn, lrn.device

    @property
    def obs(self) -> torch.Tensor:
        return self.steps.obs

    @property
    def actions(self) -> torch.Tensor:
        return self.steps.actions

    def reset(self, seed: int) -> None:
        self.steps.reset(seed)

    def collect(self, on_steps: Callable[..., None]) -> None:
        """One rollout; ``on_steps(n, infos, eps=eps)`` after every vector step."""
        lrn = self.lrn
        eps = [0.0]  # the exploration rate of the step being taken

        def act(obs: torch.Tensor, ids: torch.Tensor, start: torch.Tensor):
            eps[0] = lrn.epsilon()
            actions, max_q = lrn.act(obs, eps[0])
            return actions, {"max_q": max_q}

        self.steps.collect(
            act,
            lambda final_obs, ids: lrn.max_q(final_obs),
            lambda n, infos: on_steps(n, infos, eps=eps[0]),
        )

    def targets(self) -> torch.Tensor:
        """The Q(lambda) targets ``[T, N]`` of the collected rollout, bootstrapped from the
        max-Q of the observations the envs hold now."""
        r = self.steps
        boot = self.lrn.max_q(torch.as_tensor(r.next_obs, device=self.device))
        return rollout_targets(
            r.rewards, r.extras["max_q"], r.terminated, r.truncated, r.final_values, boot,
            self.cfg.gamma, self.lrn.q_lambda(),
        )  # fmt: skip

    def close(self) -> None:
        self.steps.close()


# --------------------------------------------------------------------------------------------
# Evaluation: the PQN policy loader of ``rapidrl eval``
# --------------------------------------------------------------------------------------------
def eval_policy(config: dict[str, Any], ckpt, device: str = "cpu"):
    """``rapidrl eval`` loader: the greedy (argmax-Q) policy of a PQN checkpoint.

    Returns ``(act, env_id, env_options)`` where ``act(obs [B, ...]) -> actions [B]``.
    """
    cfg, env, net = restore_for_eval(PQNConfig, "PQN", make_pqn_network, config, ckpt, device)
    return greedy_actions(net, device), cfg.env, env.options


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
