"""The DQN family on Ray, Ape-X style: what ``train(cfg)`` runs when ``cfg.ray`` is set.

Layout. ``workers`` Ray actors (:class:`rapidrl.distributed.RolloutWorker`) each step
``envs_per_worker`` envs with an acting copy of the Q-network and a fixed exploration rate of their
own (Ape-X: ``eps_i = 0.4 ** (1 + 7 i / (workers - 1))``; all 0 when the config turns epsilon off
with ``epsilon_start = epsilon_end = 0``, e.g. noisy nets). This process is the learner: it takes
the workers' batches as they complete (:meth:`RaySampler.next_transitions`), appends them to its
replay (one stream per worker env; a restarted worker's streams are cut, so n-step returns never
join two actor lives) and runs the updates that are due at the replay ratio of the local loop: one
update of ``batch_size x steps_per_update`` transitions per ``steps_per_update`` agent steps
collected (after the prefill of ``learning_starts``). The workers cannot outrun the learner: each
has one request in flight and gets the next one only when the learner takes its batch, so the
ratio holds however many workers there are. The online weights go to the object store every
``ray_publish_every`` updates (one ``ray.put``); a worker loads the newest with its next request.
Every batch carries the weights version that acted: the ``policy_lag`` column is the mean of
learner updates minus that version.

The run is the local loop's: the same run directory (config.json, metrics.csv + TensorBoard,
checkpoints, summary.json, learning curve), target sync by agent steps, metric rows and
checkpoints by seconds and/or frames, stop on solved / max_frames / max_minutes / Ctrl-C / an
``on_log`` callback. Extra columns: ``ray_workers``, ``ray_nodes`` (nodes that delivered data
this session), ``ray_restarts`` (failed workers that Ray rebuilt and that delivered again),
``ray_failures``, ``ray_dropped_batches``; ``summary.json`` gains a ``ray`` section
(``frames_by_node``, ``frames_by_worker``, epsilons, bytes, weight puts, mean policy lag).

Faults. A worker that dies (killed, OOM, node lost) is rebuilt by Ray; the batch it was
collecting is lost, its next batch starts new episodes with the newest weights, and the run goes
on meanwhile with the other workers. A worker that stays away ``restart_timeout`` (120 s) ends
the run with :class:`rapidrl.distributed.WorkerFailedError`; an exception inside a worker (env or
policy bug) with :class:`rapidrl.distributed.RolloutWorkerError`.

Checkpoints and resume: the learner's checkpoint is the local loop's (nets, optimizer, counters,
episode window, clock, RNGs, and with ``save_replay`` the replay). On resume the workers are simply
started again, with the restored weights and env seeds derived from the step counter (fresh
episodes). The Ray fields may change on resume (another cluster, other worker counts); a replay
saved with another number of streams (``workers x envs_per_worker``) is not loaded (warning) and
refills. Not reproducible step for step: which worker's batch arrives first depends on timing.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rapidrl.algos.dqn.config import DQNConfig
from rapidrl.algos.dqn.train import (
    METRIC_COLUMNS,
    RESUME_IGNORE_FIELDS,
    LogEvent,
    _metrics_row,
    _save,
    make_q_network,
    make_update_step,
    probe_env,
)
from rapidrl.buffers import PrioritizedReplayBuffer, ReplayBuffer
from rapidrl.config import ConfigError
from rapidrl.distributed.policy import QPolicy, apex_epsilons
from rapidrl.distributed.sampler import WorkerFailedError
from rapidrl.distributed.training import (
    RAY_COLUMNS,
    RayStats,
    check_ray,
    learner_threads,
    start_sampler,
)
from rapidrl.train import (
    Checkpointer,
    EpisodeTracker,
    RunClock,
    RunDir,
    StopOnInterrupt,
    seed_everything,
)
from rapidrl.train.loop import RunSession, resolve_device, resolve_stop_score, restart_env_seed

__all__ = ["actor_policy", "train_ray"]


def actor_policy(cfg: DQNConfig, obs_shape: tuple[int, ...], n_actions: int) -> QPolicy:
    """The acting policy of a Ray worker: the config's Q-network (channels_last off: it acts on
    small batches), epsilon-greedy. Module-level so that ``functools.partial`` of it pickles."""
    cfg = dataclasses.replace(cfg, channels_last=False)
    return QPolicy(make_q_network(cfg, obs_shape, n_actions), n_actions)


def worker_epsilons(cfg: DQNConfig, num_workers: int) -> np.ndarray:
    """Ape-X epsilons, or zeros when the config switches epsilon off (noisy-net exploration)."""
    if cfg.epsilon_start == 0 and cfg.epsilon_end == 0:
        return np.zeros(num_workers)
    return apex_epsilons(num_workers)


def train_ray(cfg: DQNConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train with Ray workers (see the module docstring); return the summary."""
    cfg.validate()
    if cfg.ray is None:
        raise ConfigError("train_ray needs cfg.ray ('local' or a cluster address)")
    check_ray()
    info, options, frame_skip, obs_space, n_actions = probe_env(cfg)
    obs_shape = tuple(obs_space.shape)
    stop_score = resolve_stop_score(cfg.stop_at_score, info)
    device = resolve_device(cfg.device)

    resuming = cfg.resume is not None
    run = RunDir.create(cfg.resume or cfg.run_dir, algo="dqn", env_id=info.env_id, resume=resuming)
    if not resuming:
        run.save_config(cfg)

    seed_everything(cfg.seed)
    act_rng = np.random.default_rng([cfg.seed, 1])  # unused here; kept for the checkpoint format

    q = make_q_network(cfg, obs_shape, n_actions, device).to(device)
    target = copy.deepcopy(q)
    target.requires_grad_(False)
    opt = torch.optim.Adam(q.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=cfg.fused_adam)
    policy = QPolicy(q, n_actions)  # what is published: q's weights under "q."

    c = {
        "steps": 0,
        "updates": 0,
        "pending": 0,
        "synced": 0,
        "logged": 0,
        "ckpt_block": 0,
        "acc": [0.0, 0.0, 0.0, 0.0],
        "lag": [0.0, 0.0],
    }
    tracker = EpisodeTracker(stop_score, window=cfg.score_window)
    clock = RunClock()
    ckpt = Checkpointer(
        run.checkpoints,
        algo="dqn",
        config=cfg,
        keep=cfg.keep_checkpoints,
        ignore_fields=RESUME_IGNORE_FIELDS,
        every_seconds=cfg.checkpoint_every_seconds,
    )
    state = None
    if resuming:
        state = ckpt.load_latest()
        state.restore(q=q, target=target, optim=opt, tracker=tracker, clock=clock)
        c.update(state.state["counters"])
    tracker.stop_at_score = stop_score

    session = RunSession(
        run,
        cfg,
        algo="dqn",
        env_id=info.env_id,
        device=device,
        tracker=tracker,
        clock=clock,
        stop_score=stop_score,
    )
    sampler = None
    threads_before = torch.get_num_threads()
    try:
        factory = functools.partial(actor_policy, cfg, obs_shape, n_actions)
        sampler = start_sampler(
            cfg,
            cfg.env,
            factory,
            env_options=options,
            seed=restart_env_seed(cfg.seed, c["steps"]),
            publish_every=cfg.ray_publish_every,
        )
        sampler.epsilons = worker_epsilons(cfg, sampler.num_workers)
        streams = sampler.num_workers * sampler.envs_per_worker
        _check_streams(cfg, streams)
        torch.set_num_threads(learner_threads(sampler, cfg.torch_threads, cfg.ray_cpus_per_worker))

        buffer_cls = PrioritizedReplayBuffer if cfg.prioritized else ReplayBuffer
        rb = buffer_cls(
            cfg.buffer_size,
            obs_shape,
            num_envs=streams,
            stacked=len(obs_shape) == 3,
            obs_dtype=obs_space.dtype,
            gamma=cfg.gamma,
            n_step=cfg.n_step,
            seed=[cfg.seed, 2],
            **({"alpha": cfg.per_alpha} if cfg.prioritized else {}),
        )
        if state is not None:
            arrays = state.load_arrays()
            if arrays:
                try:
                    rb.load_state_dict(arrays)
                    rb.truncate_streams()  # the workers restart: the stored episodes end here
                except ValueError as exc:  # another number of streams
                    warnings.warn(
                        f"the saved replay does not fit this run's {streams} streams "
                        f"({exc}); starting with an empty replay",
                        stacklevel=2,
                    )
            state.restore_rng({"act": act_rng, "replay": rb.rng})
            run.save_config(cfg)
            print(f"resumed {run.path} at {c['steps'] * frame_skip:,} frames", file=sys.stderr)

        k = cfg.steps_per_update
        update, flush_stats, beta_at = make_update_step(cfg, q, target, opt, rb, device, c)
        sampler.set_weights(policy, version=c["updates"], force=True)
        stats = RayStats(sampler, cfg.ray)
        eps = float(np.mean(sampler.epsilons))

        def learn(new_steps: int) -> None:
            """The updates due after ``new_steps`` more agent steps (once the prefill is done);
            weights published every ``ray_publish_every`` updates."""
            if len(rb) < cfg.learning_starts or rb.num_sampleable == 0:
                return
            c["pending"] += new_steps
            while c["pending"] >= k:
                update()
                c["pending"] -= k
                sampler.set_weights(policy, version=c["updates"])

        def row_now(frames: int) -> dict[str, Any]:
            flush_stats()
            row = _metrics_row(c, tracker, clock, frames, eps, len(rb))
            if cfg.prioritized:
                row["beta"] = beta_at(c["steps"])
            row.update(stats.columns())
            return row

        session.open(
            columns=(*METRIC_COLUMNS, *RAY_COLUMNS),
            frames=c["steps"] * frame_skip,
            desc=f"dqn {info.env_id} ray x{sampler.num_workers}",
        )
        last_log_time = time.monotonic()

        with StopOnInterrupt() as stop:
            while not session.should_stop(stop, c["steps"] * frame_skip):
                # 1. The batches that completed (each worker has been sent its next request).
                try:
                    batches = sampler.next_transitions(
                        cfg.ray_batch_steps, timeout=cfg.actor_timeout_s
                    )
                except TimeoutError as exc:  # alive but stuck (or starved of CPUs)
                    raise WorkerFailedError(f"{exc} (--actor-timeout-s)") from exc
                for batch in batches:
                    lag = sampler.policy_lag(batch)
                    batch.add_to(rb)
                    n_new = batch.meta.env_steps
                    # 2. Learn: the updates due for these steps.
                    learn(n_new)
                    c["steps"] += n_new
                    frames = c["steps"] * frame_skip
                    for ret, length in zip(
                        batch.meta.episode_returns.tolist(), batch.meta.episode_lengths.tolist()
                    ):
                        tracker.add_episode(ret, length, frames, clock.seconds)
                    c["lag"][0] += lag
                    c["lag"][1] += 1
                    stats.add(batch, lag)

                    # Target network: synced by agent steps.
                    if c["steps"] // cfg.target_sync_steps > c["synced"]:
                        target.load_state_dict(q.state_dict())
                        c["synced"] = c["steps"] // cfg.target_sync_steps

                    # Metrics row: every log_every_seconds and/or every log_every_frames.
                    now = time.monotonic()
                    every = cfg.log_every_frames
                    by_frames = every and frames // every > c["logged"]
                    by_time = cfg.log_every_seconds and now - last_log_time >= cfg.log_every_seconds
                    if by_frames or by_time:
                        if every:
                            c["logged"] = frames // every
                        last_log_time = now
                        row = row_now(frames)
                        session.log_row(frames, row)
                        if on_log is not None and on_log(
                            LogEvent(frames, row, run.path, sampler.pids)
                        ):
                            session.callback_stop = True
                    session.bar.update(frames, tracker, eps=eps, upd=c["updates"], lag=lag)

                    # Checkpoint: every checkpoint_every_seconds and/or checkpoint_every_frames.
                    every = cfg.checkpoint_every_frames
                    if (every and frames // every > c["ckpt_block"]) or ckpt.due(frames):
                        if every:
                            c["ckpt_block"] = frames // every
                        flush_stats()
                        _save(ckpt, cfg, frames, q, target, opt, tracker, clock, c, act_rng, rb)

        # The end: a last checkpoint and row, the summary and the learning curve.
        frames = c["steps"] * frame_skip
        flush_stats()
        _save(ckpt, cfg, frames, q, target, opt, tracker, clock, c, act_rng, rb)
        if frames != session.last_row_frames:
            session.log_row(frames, row_now(frames))
        return session.finish(
            frames,
            steps=c["steps"],
            updates=c["updates"],
            title=f"DQN {info.env_id} (Ray)",
            extra={"ray": {**stats.summary(), "epsilons": sampler.epsilons.tolist()}},
        )
    finally:
        session.close()
        if sampler is not None:
            sampler.shutdown()
        torch.set_num_threads(threads_before)


def _check_streams(cfg: DQNConfig, streams: int) -> None:
    """The local loop's replay checks, for ``streams = workers x envs_per_worker``."""
    slots = math.ceil(cfg.buffer_size / streams)
    if slots < cfg.n_step + 1:
        raise ConfigError(
            f"--buffer-size {cfg.buffer_size} over {streams} Ray envs (--workers x "
            f"--envs-per-worker) leaves {slots} transitions per env, fewer than --n-step "
            f"{cfg.n_step} + 1; raise --buffer-size or use fewer envs"
        )
    if cfg.learning_starts and cfg.learning_starts < streams * cfg.n_step:
        raise ConfigError(
            f"--learning-starts ({cfg.learning_starts}) must be >= the {streams} Ray envs "
            f"(--workers x --envs-per-worker) x --n-step ({streams * cfg.n_step}) so that the "
            "first batch can be sampled"
        )
