"""The run loop, written once: :func:`run_training` owns the skeleton of every local trainer (DQN,
PPO, PPO-LSTM, PQN) -- checks, seeding, the probe env, the run dir and its lock, the session
(metrics, progress bar, stop rules), the cadences of rows and checkpoints, the end -- and an
:class:`Algorithm` brings only what is its own: its learner, where its experience comes from,
and one iteration.

The order of a start is fixed here, so every trainer starts the same way: nothing goes on disk
until the config, the env and the env layout are accepted (a refused start leaves no run dir);
the global RNGs are seeded before the probe env and the learner, which then keeps one generator
per consumer; the run dir is made (or reopened and restored, with ``--resume``) only once the
learner and the experience source exist; the envs start from a seed derived from the step counter
(a resumed run's envs restart, see :func:`rapidrl.train.loop.restart_env_seed`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

from rapidrl.train.checkpoint import StopOnInterrupt
from rapidrl.train.loop import (
    EnvProbe,
    LogEvent,
    RunSession,
    cpu_count,
    num_threads,
    probe_env,
    resolve_device,
    restart_env_seed,
    start_run,
)
from rapidrl.train.run import RunDir
from rapidrl.train.seeding import seed_everything

__all__ = ["Algorithm", "run_training"]


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """What one algorithm brings to :func:`run_training`. ``lrn`` is its learner (counters ``c``,
    ``frames``, ``tracker``, ``clock``, ``log_every``, ``ckpt_every``, ``save``, ``start``: see
    :class:`rapidrl.train.learner.RolloutLearner`); ``source`` is where its experience comes
    from (a local vector env, actor processes): anything with ``close()`` and, optionally,
    ``pids`` (the processes that step its envs)."""

    name: str
    """The run's name: run dir prefix, checkpoint algo, progress bar ("ppo-lstm")."""
    label: str
    """The algorithm in error messages ("PPO")."""
    title: str
    """The learning curve's title, before the env id ("PPO-LSTM")."""
    columns: tuple[str, ...]
    """The metrics.csv columns besides the common ones."""
    learner: Callable[[Any, EnvProbe, Any], Any]
    """``(cfg, env, device) -> lrn``: the network, optimizer, generators and counters."""
    source: Callable[[Any, EnvProbe, Any], Any]
    """``(cfg, env, lrn) -> source``, built before the run dir: a bad env layout is a
    ConfigError that leaves nothing on disk."""
    start: Callable[[Any, Any, int], Any]
    """``(lrn, source, env_seed) -> source``: start the envs once the learner is restored
    (returns the source to use: DQN's actor processes are made only now)."""
    iterate: Callable[[Any, Any, RunSession], None]
    """``(lrn, source, session)``: one iteration (collect, learn, count)."""
    row: Callable[[Any, Any, int], Mapping[str, Any]]
    """``(lrn, source, frames) -> the metrics row``."""
    summary_algo: str | None = None
    """``algo`` in summary.json (default ``name``)."""
    recurrent: bool | None = None
    """``recurrent`` in summary.json (None: no such key)."""
    threads: int | None = None
    """torch threads of the learner (None: every core)."""
    grad_steps: bool = True
    """Whether summary.json counts gradient steps."""


def run_training(
    cfg: Any, algo: Algorithm, *, on_log: Callable[[LogEvent], bool | None] | None = None
) -> dict[str, Any]:
    """Train ``algo`` on ``cfg``; write the run directory; return the summary (what
    ``summary.json`` holds)."""
    cfg.validate()
    resuming = cfg.resume is not None
    # A wrong --run-dir/--resume (or a run dir another process writes) fails here, first.
    RunDir.check(cfg.resume or cfg.run_dir, resume=resuming)
    device = resolve_device(cfg.device)
    source = session = run = None
    try:
        with num_threads(algo.threads or cfg.torch_threads or cpu_count()):
            seed_everything(cfg.seed)
            env = probe_env(cfg, algo.label)  # spaces, options, frame skip, stop score
            lrn = algo.learner(cfg, env, device)
            source = algo.source(cfg, env, lrn)
            # Everything is accepted: now the run dir and its checkpoints (restored on resume;
            # config.json rewritten once the checkpoint has accepted cfg), then the envs.
            run = start_run(cfg, lrn, env, algo=algo.name)
            source = algo.start(lrn, source, restart_env_seed(cfg.seed, lrn.c.steps))
            session = RunSession(
                run, cfg, algo=algo.summary_algo or algo.name, env_id=env.info.env_id,
                device=device, tracker=lrn.tracker, clock=lrn.clock, stop_score=env.stop_score,
                recurrent=algo.recurrent,
            )  # fmt: skip
            session.open(
                columns=algo.columns, frames=lrn.frames, desc=f"{algo.name} {env.info.env_id}"
            )
            with StopOnInterrupt() as stop:
                while not session.should_stop(stop, lrn.frames):
                    algo.iterate(lrn, source, session)
                    # Metrics row and checkpoint, by seconds and/or frames.
                    frames = lrn.frames
                    session.cadence(
                        frames, log_every=lrn.log_every, ckpt_every=lrn.ckpt_every,
                        row=functools.partial(algo.row, lrn, source, frames), save=lrn.save,
                        on_log=on_log, pids=getattr(source, "pids", ()),
                    )  # fmt: skip
            # The end: a last checkpoint and row, the summary and the learning curve.
            frames, c = lrn.frames, lrn.c
            counts = {"steps": c.steps, "updates": c.updates}
            if algo.grad_steps:
                counts["grad_steps"] = c.grad_steps
            return session.end(
                frames, row=functools.partial(algo.row, lrn, source, frames), save=lrn.save,
                title=f"{algo.title} {env.info.env_id}", **counts,
            )  # fmt: skip
    finally:
        if session is not None:
            session.close()
        elif run is not None:  # started, then failed before the session: unlock
            run.release()
        if hasattr(source, "close"):  # not a factory of a source that never started
            source.close()
