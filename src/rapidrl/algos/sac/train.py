"""The SAC trainer: ``train(cfg) -> summary``; reads top to bottom like a CleanRL script.

Build the envs (a vector env of this process), the actor, the twin critics and their targets, the
temperature and the replay; then repeat: act (uniformly random for the first
``learning_starts`` agent steps, then a sample of the policy), send the actions, run the due
updates while the envs step (one critic step per ``steps_per_update`` agent steps; the actor and
the temperature every ``policy_frequency`` critic steps; the targets follow softly), collect the
step into the replay (``next_obs = infos["final_obs"]`` where an episode ended); log, checkpoint,
stop on a score / max_frames / max_minutes / Ctrl-C. ``terminated`` and ``truncated`` stay apart:
a time limit bootstraps from the last observation, a termination does not.

Resume (``--resume RUN_DIR``) is exact as DQN's is (:mod:`rapidrl.algos.dqn.train`): weights,
Adam, counters, temperature, tracker, clock and every generator; the replay with
``--save-replay`` (else it refills ``learning_starts`` transitions with the policy's actions
before the updates go on); the envs restart from seeds that follow the step counter.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from rapidrl.algos import DEFAULT_PRESETS
from rapidrl.algos.eval import final_eval, restore_for_eval
from rapidrl.algos.sac.config import PRESETS, SACConfig
from rapidrl.algos.sac.learner import LOSS_KEYS, METRIC_COLUMNS, SACLearner, make_sac_nets
from rapidrl.train.cli import parse_with_resume, run_from_cli
from rapidrl.train.replay_source import VectorSource
from rapidrl.train.runner import Algorithm, run_training, started
from rapidrl.train.session import LogEvent

__all__ = ["LOSS_KEYS", "algorithm", "eval_policy", "main_sac", "parse_sac_args", "train"]


def train(cfg: SACConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train, write the run directory, return the summary (what ``summary.json`` holds)."""
    summary = run_training(cfg, algorithm(cfg), on_log=on_log)
    return final_eval(summary, cfg)  # --eval-episodes: the final policy played greedily


def algorithm(cfg: SACConfig) -> Algorithm:
    """What SAC brings to the run loop (:func:`rapidrl.train.runner.run_training`)."""
    return Algorithm(
        name="sac", label="SAC", title="SAC {env}", columns=METRIC_COLUMNS,
        learner=lambda cfg, env, device: SACLearner(
            cfg, env.obs_shape, env.action_space, device
        ),
        source=lambda cfg, env, lrn, env_seed: started(VectorSource(cfg, env.options), env_seed),
        iterate=iterate,
        continuous=True,
        discrete=False,
    )  # fmt: skip


def iterate(lrn: SACLearner, source: VectorSource, session: Any) -> None:
    """One vector step of experience and the updates due for it."""
    # 1-3. Act, learn what is due while the envs step, add the step to the replay (VectorSource).
    n_new, infos, _ = source.step(lrn)
    # 4. Count the steps and the episodes that ended.
    lrn.steps_done(session, n_new, infos, alpha=lrn.alpha)


# --------------------------------------------------------------------------------------------
# Evaluation: the SAC policy loader of ``rapidrl eval``
# --------------------------------------------------------------------------------------------
def eval_policy(config: dict[str, Any], ckpt, device: str = "cpu"):
    """``rapidrl eval`` loader: the deterministic policy of a SAC checkpoint, ``center + half *
    tanh(mean)``. Returns ``(act, env_id, env_options)``, ``act(obs [B, D]) -> actions [B, A]``."""
    cfg, env, nets = restore_for_eval(
        SACConfig, "SAC", make_sac_nets, config, ckpt, device, continuous=True, discrete=False
    )

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            x = torch.as_tensor(np.asarray(obs, dtype=np.float32), device=device)
            return nets.mode(x).cpu().numpy()

    return act, cfg.env, env.options


# --------------------------------------------------------------------------------------------
# Command line: rapidrl train sac
# --------------------------------------------------------------------------------------------
def parse_sac_args(argv: Sequence[str], prog: str = "rapidrl train sac") -> SACConfig:
    """``--preset NAME`` + field flags -> ``SACConfig``; ``--resume RUN_DIR`` takes the run's own
    config as the defaults."""
    return parse_with_resume(
        SACConfig, PRESETS, argv, prog=prog, default_preset=DEFAULT_PRESETS["sac"], algo="sac",
        description=inspect.cleandoc(SACConfig.__doc__ or ""),
    )  # fmt: skip


def main_sac(argv: Sequence[str]) -> int:
    """``rapidrl train sac [--preset sac|sac-fast] [--FIELD VALUE ...]`` (default: sac)."""
    prog = "rapidrl train sac"
    return run_from_cli(train, parse_sac_args(argv, prog), prog)
