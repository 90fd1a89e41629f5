"""The DQN-family trainer: ``train(cfg) -> summary``; reads top to bottom like a CleanRL script.

One loop serves every preset (DQN ... Rainbow): build the envs, the nets, the optimizer and the
replay; then repeat: act (epsilon-greedy, or NoisyNet), step the vector env, add the transitions
to the replay (``next_obs = infos["final_obs"]`` where an episode ended), and after every
``steps_per_update`` agent steps do one update on ``batch_size * steps_per_update`` transitions;
sync the target net by agent steps; log, checkpoint, stop on solved / max_frames / max_minutes /
Ctrl-C. ``terminated`` and ``truncated`` stay apart all the way: the replay's n-step discounts are
0 only after a true termination, a time limit bootstraps.

In-process acting (``actor_processes=0``) hands the actions to the vector env (``send``), runs
the due updates, and only then collects the step (``recv``): with a process backend the envs step
while the learner computes. With ``actor_processes >= 1`` the envs and an acting copy of the net
live in actor processes (:mod:`rapidrl.algos.dqn.actor`) and the learner consumes their steps at
the same replay ratio. With ``ray`` set, ``train`` runs :mod:`rapidrl.algos.dqn.ray_loop`
instead (Ape-X style: Ray workers fill this process's replay; same update step, run directory and
checkpoints).

Resume (``--resume RUN_DIR``) -- what is exact and what is not
--------------------------------------------------------------
Exact: online and target weights, optimizer state, step/update/episode counters (so the epsilon,
PER-beta and target-sync schedules), the episode window and best mean, the training clock, the
metric accumulators, and every RNG (Python, NumPy, torch, exploration, replay sampling); with
``--save-replay`` also the whole replay buffer including priorities. Not exact: the envs. Their
emulator state is not saved; on resume they are re-seeded deterministically from the saved step
counter and start fresh episodes. The episodes in progress at the checkpoint are dropped from the
statistics; their stored transitions end as ``truncated`` (they bootstrap). So a stopped and
resumed run equals the uninterrupted run up to the checkpoint, and resuming the same checkpoint
twice gives the same run (CPU, in-process acting, same thread count), but after the checkpoint it
follows other episodes than the uninterrupted run would have. Without ``--save-replay`` the
replay restarts empty and refills ``learning_starts`` transitions before updates go on. Actor
processes make any run timing-dependent (how far actors run ahead varies), hence not
reproducible step for step.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

from rapidrl.algos import DEFAULT_PRESETS
from rapidrl.algos.dqn.config import PRESETS, DQNConfig
from rapidrl.algos.dqn.learner import (
    METRIC_COLUMNS,
    DQNLearner,
    make_q_network,
    net_kwargs,
)
from rapidrl.algos.eval import final_eval, greedy_actions, restore_for_eval
from rapidrl.train.cli import parse_with_resume, run_from_cli
from rapidrl.train.loop import cpu_count
from rapidrl.train.replay_source import VectorSource
from rapidrl.train.runner import Algorithm, run_training, started
from rapidrl.train.session import LogEvent

__all__ = [
    "LogEvent",
    "algorithm",
    "eval_policy",
    "main_dqn",
    "main_rainbow",
    "make_q_network",
    "parse_dqn_args",
    "train",
]


# --------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------
def train(cfg: DQNConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train, write the run directory, return the summary (what ``summary.json`` holds)."""
    if cfg.ray is not None:  # Ape-X style on Ray workers: rapidrl.algos.dqn.ray_loop
        from rapidrl.algos.dqn.ray_loop import train_ray

        summary = train_ray(cfg, on_log=on_log)
    else:
        summary = run_training(cfg, algorithm(cfg), on_log=on_log)
    return final_eval(summary, cfg)  # --eval-episodes: the final policy played greedily


def algorithm(cfg: DQNConfig) -> Algorithm:
    """What this algorithm brings to the run loop (:func:`rapidrl.train.runner.run_training`):
    its learner, its local source of experience, one iteration, its metrics row."""
    return Algorithm(
        name="dqn", label="DQN", title="DQN {env}", columns=METRIC_COLUMNS,
        learner=lambda cfg, env, device: DQNLearner(
            cfg, env.obs_shape, env.obs_space.dtype, env.n_actions, device
        ),
        source=_source, iterate=iterate,
        start=lambda lrn, source: lrn.attach_replay(lrn.cfg.num_envs),
        row=lambda lrn, source, frames: lrn.metrics_row(frames, source.eps),
        loop_threads=lambda cfg, source: (
            cfg.torch_threads or max(1, cpu_count() - cfg.actor_processes)
        ),
        grad_steps=False,
    )  # fmt: skip


def _source(cfg: DQNConfig, env: Any, lrn: DQNLearner, env_seed: int) -> VectorSource | ActorSource:
    """The envs, in this process or in actor processes, started from ``env_seed``."""
    if cfg.actor_processes == 0:
        source = started(VectorSource(cfg, env.options), env_seed)
    else:
        source = ActorSource(cfg, env.options, lrn, env_seed)
    source.eps = lrn.epsilon()
    return source


def iterate(lrn: DQNLearner, source: VectorSource | ActorSource, session: Any) -> None:
    """One vector step of experience and the updates due for it."""
    # 1-3. Act, learn what is due while the envs step, add the step to the replay (the source
    #      does all three, see VectorSource/ActorSource).
    n_new, infos, source.eps = source.step(lrn)
    # 4. Count the steps (the target net syncs by agent steps); episodes.
    lrn.count(n_new)
    lrn.tracker.update(infos, lrn.frames, lrn.clock.seconds)
    session.bar.update(lrn.frames, lrn.tracker, eps=source.eps, upd=lrn.counters.updates)


# --------------------------------------------------------------------------------------------
# Where the local loop's transitions come from
# --------------------------------------------------------------------------------------------
class ActorSource:
    """Envs and an acting copy of the Q-network in actor processes
    (:mod:`rapidrl.algos.dqn.actor`): each step is one vector step of an actor, taken from its
    shared-memory slot; the learner consumes them at the replay ratio of the local loop and
    publishes its weights every ``weight_sync_every`` updates."""

    def __init__(self, cfg: DQNConfig, options: dict[str, Any], lrn: DQNLearner, env_seed: int):
        from rapidrl.algos.dqn.actor import ActorPool

        backend = cfg.backend
        if backend == "auto" and cfg.num_envs // cfg.actor_processes == 1:
            backend = "serial"
        per_update = math.ceil(cfg.steps_per_update / cfg.num_envs)
        c = lrn.counters
        self.pool = ActorPool(
            cfg.actor_processes,
            env=cfg.env,
            env_options=options,
            num_envs=cfg.num_envs,
            backend=backend,
            num_workers=cfg.num_workers,
            obs_shape=lrn.obs_shape,
            obs_dtype=lrn.obs_dtype,
            q=lrn.q,
            net_kwargs={**net_kwargs(cfg, lrn.obs_shape, lrn.n_actions), "channels_last": False},
            slots=cfg.actor_ring_slots or max(2, 2 * per_update),
            env_seed=env_seed,
            rng_seed=cfg.seed,
            start_steps=c.steps,
            epsilon=(cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_decay_steps),
            noisy=cfg.noisy,
            version=c.updates,
            timeout=cfg.actor_timeout_s,
        )

        def publish(updates: int) -> None:
            if updates % cfg.weight_sync_every == 0:
                self.pool.publish(lrn.q, updates)

        lrn.on_update = publish

    @property
    def pids(self) -> list[int | None]:
        return self.pool.pids

    def step(self, lrn: DQNLearner) -> tuple[int, dict[str, Any], float]:
        """1. take an actor's step into the replay; 2. run the updates due for it (the actors
        keep playing meanwhile)."""
        step = self.pool.next()
        lrn.rb.add(
            step.obs,
            step.actions,
            step.rewards,
            step.terminated,
            step.truncated,
            step.next_obs,
            env_ids=step.env_ids,
        )
        infos, eps = dict(step.infos), step.epsilon
        lrn.add_lag(lrn.counters.updates - step.version)
        self.pool.release(step)
        n_new = len(step.env_ids)
        lrn.learn(n_new)
        return n_new, infos, eps

    def close(self) -> None:
        self.pool.close()


# --------------------------------------------------------------------------------------------
# Evaluation: the DQN policy loader of ``rapidrl eval``
# --------------------------------------------------------------------------------------------
def eval_policy(config: dict[str, Any], ckpt, device: str = "cpu"):
    """``rapidrl eval`` loader: the greedy policy of a DQN checkpoint.

    Returns ``(act, env_id, env_options)`` where ``act(obs [B, ...]) -> actions [B]``.
    """
    cfg, env, q = restore_for_eval(DQNConfig, "DQN", make_q_network, config, ckpt, device, key="q")
    return greedy_actions(q, device), cfg.env, env.options


# --------------------------------------------------------------------------------------------
# Command line: rapidrl train dqn / rapidrl train rainbow
# --------------------------------------------------------------------------------------------
def parse_dqn_args(argv: Sequence[str], prog: str, default_preset: str) -> DQNConfig:
    """``--preset NAME`` + field flags -> ``DQNConfig``. With ``--resume RUN_DIR`` the run's own
    config.json gives the defaults (flags still override; the checkpoint check rejects changes
    that would alter what the checkpoint means)."""
    return parse_with_resume(
        DQNConfig,
        PRESETS,
        argv,
        prog=prog,
        default_preset=default_preset,
        algo="dqn",
        description=inspect.cleandoc(DQNConfig.__doc__ or ""),
    )


def _main(argv: Sequence[str], prog: str, default_preset: str) -> int:
    from rapidrl.algos.dqn.actor import ActorError
    from rapidrl.distributed import RolloutWorkerError, WorkerFailedError

    cfg = parse_dqn_args(argv, prog, default_preset)
    return run_from_cli(train, cfg, prog, (ActorError, RolloutWorkerError, WorkerFailedError))


def main_dqn(argv: Sequence[str]) -> int:
    """``rapidrl train dqn [--preset lean|lean-long|fast|dqn|rainbow|rainbow-lean|rainbow-long]
    [--FIELD VALUE ...]`` (default: lean)."""
    return _main(argv, "rapidrl train dqn", DEFAULT_PRESETS["dqn"])


def main_rainbow(argv: Sequence[str]) -> int:
    """``rapidrl train rainbow [--preset NAME] [--FIELD VALUE ...]`` (default: rainbow-lean)."""
    return _main(argv, "rapidrl train rainbow", DEFAULT_PRESETS["rainbow"])
