"""The run loop, written once: :func:`run_training` owns the skeleton of every local trainer (DQN,
PPO, PPO-LSTM, PQN) -- checks, seeding, the probe env, the run dir and its lock, the session
(metrics, progress bar, stop rules), the cadences of rows and checkpoints, the end -- and an
:class:`Algorithm` brings only what is its own: its learner, where its experience comes from,
and one iteration.

The order of a start is fixed here, so every trainer starts the same way: nothing goes on disk
until the config (with its tracker: ``--track wandb`` needs wandb), the env and the env layout
are accepted (a refused start leaves no run dir); the global RNGs are seeded before the probe env
and the learner, which then keeps one generator per consumer; the run dir is made (or reopened
and restored, with ``--resume``) only once the learner and the experience source exist; the envs
start from a seed derived from the step counter (a resumed run's envs restart, see
:func:`rapidrl.train.loop.restart_env_seed`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

from rapidrl.train.checkpoint import StopOnInterrupt
from rapidrl.train.loop import (
    EnvProbe,
    cpu_count,
    num_threads,
    probe_env,
    resolve_device,
    restart_env_seed,
    start_run,
)
from rapidrl.train.run import RunDir
from rapidrl.train.seeding import seed_everything
from rapidrl.train.session import LogEvent, RunSession
from rapidrl.train.track import check_tracker

__all__ = ["Algorithm", "rollout_source", "run_training", "started"]


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """What one algorithm brings to :func:`run_training`. ``lrn`` is its learner (counters ``c``,
    ``frames``, ``tracker``, ``clock``, ``log_every``, ``ckpt_every``, ``save``, ``start``: see
    :class:`rapidrl.train.learner.RolloutLearner`); ``source`` is where its experience comes
    from (a local vector env, actor processes, Ray workers): anything with ``close()`` and,
    optionally, ``pids`` (the processes that step its envs)."""

    name: str
    """The run's name: run dir prefix, checkpoint algo, progress bar ("ppo-lstm")."""
    label: str
    """The algorithm in error messages ("PPO")."""
    title: str
    """The learning curve's title; ``{env}`` is replaced by the env id ("PPO {env} (Ray)")."""
    columns: tuple[str, ...]
    """The metrics.csv columns besides the common ones."""
    learner: Callable[[Any, EnvProbe, Any], Any]
    """``(cfg, env, device) -> lrn``: the network, optimizer, generators and counters."""
    source: Callable[[Any, EnvProbe, Any, int], Any]
    """``(cfg, env, lrn, env_seed) -> source``, its envs started from ``env_seed``. Made before
    a fresh run's directory (a bad env layout, Ray or its workers refused: a ConfigError that
    leaves nothing on disk) and after a resumed run's restore (its learner as checkpointed)."""
    iterate: Callable[[Any, Any, RunSession], None]
    """``(lrn, source, session)``: one iteration (collect, learn, count)."""
    row: Callable[[Any, Any, int], Mapping[str, Any]] | None = None
    """``(lrn, source, frames) -> the metrics row``; None: ``lrn.metrics_row(frames)``."""
    start: Callable[[Any, Any], None] | None = None
    """``(lrn, source)``: what to do once the run dir exists, before the first iteration (DQN:
    its replay, sized by the source's env count)."""
    summary_algo: str | None = None
    """``algo`` in summary.json (default ``name``)."""
    recurrent: bool | None = None
    """``recurrent`` in summary.json (None: no such key)."""
    loop_threads: Callable[[Any, Any], int] | None = None
    """``(cfg, source) -> torch threads of the loop`` (default: those the learner was built
    with, ``cfg.torch_threads`` or every core): fewer where the source's processes share them."""
    describe: Callable[[Any], str] | None = None
    """``source -> what the progress bar adds after the env id`` (e.g. "ray x4")."""
    extra: Callable[[Any], Mapping[str, Any]] | None = None
    """``source -> more of summary.json`` (e.g. the Ray section)."""
    check: Callable[[Any], None] | None = None
    """``cfg ->`` checks before anything is built (e.g. that Ray is installed)."""
    grad_steps: bool = True
    """Whether summary.json counts gradient steps."""
    continuous: bool = False
    """Whether the algorithm takes continuous (bounded ``Box``) actions."""
    discrete: bool = True
    """Whether it takes ``Discrete`` actions (SAC: no)."""


def run_training(
    cfg: Any, algo: Algorithm, *, on_log: Callable[[LogEvent], bool | None] | None = None
) -> dict[str, Any]:
    """Train ``algo`` on ``cfg``; write the run directory; return the summary (what
    ``summary.json`` holds)."""
    cfg.validate()
    check_tracker(cfg)  # --track wandb without wandb: refused before anything is on disk
    if algo.check is not None:
        algo.check(cfg)
    resuming = cfg.resume is not None
    # A wrong --run-dir/--resume (or a run dir another process writes) fails here, first.
    RunDir.check(cfg.resume or cfg.run_dir, resume=resuming)
    device = resolve_device(cfg.device)
    row = algo.row or (lambda lrn, source, frames: lrn.metrics_row(frames))
    source = session = run = None
    threads = cfg.torch_threads or cpu_count()
    try:
        with num_threads(threads):
            seed_everything(cfg.seed)
            env = probe_env(
                cfg, algo.label, continuous=algo.continuous, discrete=algo.discrete
            )  # spaces, options, frame skip, stop score
            lrn = algo.learner(cfg, env, device)
            # A resumed run is restored first: its envs restart from seeds that follow its step
            # counter. A fresh run's directory (and config.json) is made once its source is
            # accepted, so a refused start leaves nothing on disk.
            if resuming:
                run = start_run(cfg, lrn, env, algo=algo.name)
            source = algo.source(cfg, env, lrn, restart_env_seed(cfg.seed, lrn.counters.steps))
            run = run or start_run(cfg, lrn, env, algo=algo.name)
        if algo.loop_threads is not None:
            threads = algo.loop_threads(cfg, source)
        with num_threads(threads):
            if algo.start is not None:
                algo.start(lrn, source)
            session = RunSession(
                run, cfg, algo=algo.summary_algo or algo.name, env_id=env.info.env_id,
                device=device, tracker=lrn.tracker, clock=lrn.clock, stop_score=env.stop_score,
                recurrent=algo.recurrent,
            )  # fmt: skip
            desc = f"{algo.name} {env.info.env_id}"
            if algo.describe is not None:
                desc += f" {algo.describe(source)}"
            session.open(columns=algo.columns, frames=lrn.frames, desc=desc)
            with StopOnInterrupt() as stop:
                while not session.should_stop(stop, lrn.frames):
                    algo.iterate(lrn, source, session)
                    # Metrics row and checkpoint, by seconds and/or frames.
                    frames = lrn.frames
                    session.cadence(
                        frames, log_every=lrn.log_every, ckpt_every=lrn.ckpt_every,
                        row=functools.partial(row, lrn, source, frames), save=lrn.save,
                        on_log=on_log, pids=getattr(source, "pids", ()),
                    )  # fmt: skip
            # The end: a last checkpoint and row, the summary and the learning curve.
            frames, c = lrn.frames, lrn.counters
            counts = {"steps": c.steps, "updates": c.updates}
            if algo.grad_steps:
                counts["grad_steps"] = c.grad_steps
            return session.end(
                frames, row=functools.partial(row, lrn, source, frames), save=lrn.save,
                title=algo.title.format(env=env.info.env_id),
                extra=None if algo.extra is None else algo.extra(source), **counts,
            )  # fmt: skip
    finally:
        if session is not None:
            session.close()
        elif run is not None:  # started, then failed before the session: unlock
            run.release()
        if source is not None:
            source.close()


def started(source: Any, env_seed: int) -> Any:
    """``source`` with its envs reset from ``env_seed`` (``source.reset``), closed again if
    that fails: what a local source's ``Algorithm.source`` returns."""
    try:
        source.reset(env_seed)
    except BaseException:
        source.close()
        raise
    return source


def rollout_source(make: Callable[..., Any]) -> Callable[[Any, EnvProbe, Any, int], Any]:
    """``Algorithm.source`` of a local rollout (PPO, PQN): ``make(cfg, env.options,
    env.obs_space, lrn)`` (a bad env layout: ConfigError), its envs reset from ``env_seed``."""

    def source(cfg: Any, env: EnvProbe, lrn: Any, env_seed: int) -> Any:
        return started(make(cfg, env.options, env.obs_space, lrn), env_seed)

    return source
