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

import copy
import inspect
import math
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from rapidrl.algos.dqn.config import PRESETS, DQNConfig
from rapidrl.algos.dqn.losses import categorical_loss, categorical_target, td_loss, td_target
from rapidrl.buffers import PrioritizedReplayBuffer, ReplayBuffer
from rapidrl.config import ConfigError, parse_config
from rapidrl.nets.q import QNetwork
from rapidrl.nets.torso import resolve_precision
from rapidrl.train import (
    Checkpointer,
    EpisodeTracker,
    RunClock,
    RunDir,
    StopOnInterrupt,
    config_from_dict,
    seed_everything,
)
from rapidrl.train.checkpoint import DEFAULT_IGNORE_FIELDS
from rapidrl.train.loop import (
    RunSession,
    atari_env_options,
    cpu_count,
    flag_value,
    load_run_config,
    resolve_device,
    resolve_stop_score,
    restart_env_seed,
    run_from_cli,
)
from rapidrl.train.schedules import linear_schedule

__all__ = [
    "LogEvent",
    "UpdateStep",
    "env_options",
    "eval_policy",
    "main_dqn",
    "main_rainbow",
    "make_q_network",
    "make_update_step",
    "parse_dqn_args",
    "train",
]

# Fields that may change on resume without changing what the checkpoint means.
RESUME_IGNORE_FIELDS = (
    *DEFAULT_IGNORE_FIELDS,
    "max_minutes",
    "save_replay",
    "compile",
    "backend",
    "num_workers",
    "actor_processes",
    "actor_ring_slots",
    "actor_timeout_s",
    "weight_sync_every",
    "pin_memory",
    "non_blocking",
    "tensorboard",
    "score_window",
    # Ray: another cluster or worker layout does not change what the learner's state means.
    "ray",
    "workers",
    "envs_per_worker",
    "ray_batch_steps",
    "ray_publish_every",
    "ray_cpus_per_worker",
)

METRIC_COLUMNS = (
    "length_mean_100",
    "return_best_mean_100",
    "loss",
    "q_mean",
    "epsilon",
    "beta",
    "policy_lag",
    "steps",
    "updates",
    "buffer",
    "update_ms",
)


# --------------------------------------------------------------------------------------------
# Small pieces
# --------------------------------------------------------------------------------------------
@dataclass
class LogEvent:
    """What ``train(..., on_log=fn)`` hands ``fn`` after every metrics row; ``fn`` returning True
    stops the run like Ctrl-C (checkpoint, summary)."""

    frames: int
    row: dict[str, Any]
    run_dir: Path
    actor_pids: list[int | None]
    """Actor processes (``actor_processes``) or Ray workers (``ray``): their pids now."""


def env_options(cfg: DQNConfig, is_atari: bool) -> dict[str, Any]:
    """The ``make_env`` options of this config (the Atari switches apply to Atari ids only)."""
    return atari_env_options(
        is_atari,
        episodic_life=cfg.episodic_life,
        clip_rewards=cfg.clip_rewards,
        noop_max=cfg.noop_max,
        sticky_actions=cfg.sticky_actions,
    )


def net_kwargs(
    cfg: DQNConfig, obs_shape: tuple[int, ...], n_actions: int, device: torch.device | str = "cpu"
) -> dict[str, Any]:
    """``QNetwork`` keyword arguments for a network that runs on ``device`` (which decides
    ``precision="auto"``)."""
    return {
        "obs_shape": tuple(obs_shape),
        "n_actions": int(n_actions),
        "dueling": cfg.dueling,
        "noisy": cfg.noisy,
        "distributional": cfg.distributional,
        "num_atoms": cfg.num_atoms,
        "v_min": cfg.v_min,
        "v_max": cfg.v_max,
        "head_hidden": cfg.head_hidden,
        "channels_last": cfg.channels_last,
        "sigma0": cfg.noisy_sigma0,
        "compute_dtype": resolve_precision(cfg.precision, device),
    }


def make_q_network(
    cfg: DQNConfig, obs_shape: tuple[int, ...], n_actions: int, device: torch.device | str = "cpu"
) -> QNetwork:
    """The Q-network a config describes (torso by observation shape; head by the flags), for
    ``device`` (not moved there: call ``.to(device)``)."""
    return QNetwork(**net_kwargs(cfg, obs_shape, n_actions, device))


class UpdateStep(NamedTuple):
    """What :func:`make_update_step` returns."""

    update: Callable[[], None]
    flush_stats: Callable[[], None]
    beta_at: Callable[[int], float]


def make_update_step(cfg: DQNConfig, q, target, opt, rb, device, c: dict) -> UpdateStep:
    """The learner's update step: ``update()`` samples ``cfg.update_batch`` transitions from
    ``rb`` and takes one gradient step on ``q`` (``target`` for the bootstrap; priorities written
    back with PER), counting ``c["updates"]`` and the metric sums ``c["acc"]``.
    ``flush_stats()`` moves sums kept on a CUDA device into ``c["acc"]`` (before a metrics row
    or a checkpoint); ``beta_at(steps)`` is the PER beta schedule. The local and the Ray loop
    (:mod:`rapidrl.algos.dqn.ray_loop`) share it."""
    batch_n = cfg.update_batch
    support = q.support if cfg.distributional else None

    def compute_loss(obs, actions, rewards, discounts, next_obs, weights):
        with torch.no_grad():
            next_online = q(next_obs) if cfg.double else None
            if cfg.distributional:
                _, next_logp = target.forward_dist(next_obs)
                target_probs = categorical_target(
                    next_logp, rewards, discounts, support, next_online
                )
            else:
                y = td_target(rewards, discounts, target(next_obs), next_online)
        if cfg.distributional:
            q_all, logp = q.forward_dist(obs)
            logp_taken = logp[torch.arange(len(actions), device=logp.device), actions]
            loss, priority = categorical_loss(logp_taken, target_probs, weights)
        else:
            q_all = q(obs)
            q_taken = q_all.gather(1, actions[:, None]).squeeze(1)
            loss, priority = td_loss(q_taken, y, weights, kind=cfg.loss)
        q_mean = q_all.detach().gather(1, actions[:, None]).mean()
        return loss, priority.abs(), q_mean

    loss_fn = compute_loss
    if cfg.compile:
        loss_fn = _try_compile(compute_loss)

    on_cuda = device.type == "cuda"
    host = _HostBatches(rb, batch_n, pinned=on_cuda and cfg.pin_memory, slots=2 if on_cuda else 1)
    nb = on_cuda and cfg.non_blocking
    stats = torch.zeros(2, dtype=torch.float64, device=device)

    def beta_at(steps: int) -> float:
        return linear_schedule(cfg.per_beta0, 1.0, cfg.per_beta_steps, steps)

    def update() -> None:
        t0 = time.perf_counter()
        out = host.next()
        if cfg.prioritized:
            batch = rb.sample(batch_n, out=out, beta=beta_at(c["steps"]))
        else:
            batch = rb.sample(batch_n, out=out)
        obs = torch.from_numpy(batch["obs"]).to(device, non_blocking=nb)
        next_obs = torch.from_numpy(batch["next_obs"]).to(device, non_blocking=nb)
        host.record()
        actions = torch.from_numpy(batch["actions"]).to(device, non_blocking=nb)
        rewards = torch.from_numpy(batch["rewards"]).to(device, non_blocking=nb)
        discounts = torch.from_numpy(batch["discounts"]).to(device, non_blocking=nb)
        weights = None
        if cfg.prioritized:
            weights = torch.from_numpy(batch["weights"]).to(device, non_blocking=nb)
        if cfg.noisy:
            q.reset_noise()
            target.reset_noise()
        loss, priority, q_mean = loss_fn(obs, actions, rewards, discounts, next_obs, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(q.parameters(), cfg.max_grad_norm)
        opt.step()
        if cfg.prioritized:
            rb.update_priorities(batch["indices"], priority.cpu().numpy())
        c["updates"] += 1
        acc = c["acc"]
        if on_cuda:  # accumulate on the device: no sync per update
            stats.add_(torch.stack((loss.detach(), q_mean)).double())
        else:
            acc[0] += loss.item()
            acc[1] += q_mean.item()
        acc[2] += 1
        acc[3] += time.perf_counter() - t0

    def flush_stats() -> None:
        if on_cuda:
            loss_sum, q_sum = stats.tolist()
            c["acc"][0] += loss_sum
            c["acc"][1] += q_sum
            stats.zero_()

    return UpdateStep(update, flush_stats, beta_at)


def probe_env(cfg: DQNConfig):
    """``(env info, make_env options, frame skip, observation space, number of actions)`` from
    one probe env, with a clear error for a non-discrete action space (both DQN loops)."""
    from rapidrl.envs import make_env, resolve_env

    info = resolve_env(cfg.env)
    options = env_options(cfg, info.is_atari)
    frame_skip = options.get("frame_skip", 4) if info.is_atari else 1
    probe = make_env(cfg.env, **options)
    obs_space, act_space = probe.observation_space, probe.action_space
    probe.close()
    if not hasattr(act_space, "n"):
        raise ConfigError(f"DQN needs a discrete action space; {cfg.env} has {act_space}")
    return info, options, frame_skip, obs_space, int(act_space.n)


# --------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------
def train(cfg: DQNConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train, write the run directory, return the summary (what ``summary.json`` holds)."""
    if cfg.ray is not None:  # Ape-X style on Ray workers: rapidrl.algos.dqn.ray_loop
        from rapidrl.algos.dqn.ray_loop import train_ray

        return train_ray(cfg, on_log=on_log)
    from rapidrl.vector import make_vec

    cfg.validate()
    resuming = cfg.resume is not None
    # Nothing goes on disk until the config, the env and the env layout are accepted: a start
    # that fails them must leave no (empty) run dir behind. A wrong --run-dir/--resume fails here.
    RunDir.check(cfg.resume or cfg.run_dir, resume=resuming)
    info, options, frame_skip, obs_space, n_actions = probe_env(cfg)
    obs_shape = tuple(obs_space.shape)
    stop_score = resolve_stop_score(cfg.stop_at_score, info)
    device = resolve_device(cfg.device)

    # Seeding: torch/numpy/python globals, then one generator per consumer.
    seed_everything(cfg.seed)
    act_rng = np.random.default_rng([cfg.seed, 1])

    # Networks and optimizer.
    q = make_q_network(cfg, obs_shape, n_actions, device).to(device)
    target = copy.deepcopy(q)
    target.requires_grad_(False)
    opt = torch.optim.Adam(q.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=cfg.fused_adam)

    # Replay: frames stored once for image stacks; n-step returns at sample time.
    buffer_cls = PrioritizedReplayBuffer if cfg.prioritized else ReplayBuffer
    buffer_kwargs = {"alpha": cfg.per_alpha} if cfg.prioritized else {}
    rb = buffer_cls(
        cfg.buffer_size,
        obs_shape,
        num_envs=cfg.num_envs,
        stacked=len(obs_shape) == 3,
        obs_dtype=obs_space.dtype,
        gamma=cfg.gamma,
        n_step=cfg.n_step,
        seed=[cfg.seed, 2],
        **buffer_kwargs,
    )

    # Counters: everything the loop's schedules depend on (saved in every checkpoint).
    c = {
        "steps": 0,  # agent steps, all envs
        "updates": 0,
        "pending": 0,  # agent steps since the last update
        "synced": 0,  # target syncs done (steps // target_sync_steps)
        "logged": 0,  # rows logged by frames (frames // log_every_frames)
        "ckpt_block": 0,  # frame-based checkpoints done
        "acc": [0.0, 0.0, 0.0, 0.0],  # loss sum, q sum, updates, update seconds since last row
        "lag": [0.0, 0.0],  # policy lag sum, count since last row
    }
    tracker = EpisodeTracker(stop_score, window=cfg.score_window)
    clock = RunClock()

    # Update step (one gradient step on batch_size x k sampled transitions), shared with the
    # Ray loop.
    k = cfg.steps_per_update
    update, flush_stats, beta_at = make_update_step(cfg, q, target, opt, rb, device, c)

    def learn(new_steps: int) -> None:
        """Run the updates due after ``new_steps`` more agent steps (once the prefill is done)."""
        if len(rb) < cfg.learning_starts or rb.num_sampleable == 0:
            return
        c["pending"] += new_steps
        while c["pending"] >= k:
            update()
            c["pending"] -= k
            if pool is not None and c["updates"] % cfg.weight_sync_every == 0:
                pool.publish(q, c["updates"])

    def act(obs: np.ndarray, eps: float) -> np.ndarray:
        n = len(obs)
        explore = act_rng.random(n) < eps
        random_actions = act_rng.integers(n_actions, size=n)
        if explore.all():
            return random_actions
        if cfg.noisy:
            q.reset_noise()
        # A small batch gains nothing from more threads on CPU, and contended threads stall.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.no_grad():
                greedy = q(torch.from_numpy(obs).to(device)).argmax(1).cpu().numpy()
        finally:
            torch.set_num_threads(threads)
        return np.where(explore, random_actions, greedy)

    # Envs: in this process (vector env) or in actor processes.
    envs = pool = session = None
    backend = cfg.backend
    if backend == "auto" and cfg.num_envs // max(1, cfg.actor_processes) == 1:
        backend = "serial"
    threads_before = torch.get_num_threads()
    torch.set_num_threads(cfg.torch_threads or max(1, cpu_count() - cfg.actor_processes))
    try:
        if cfg.actor_processes == 0:  # built first: a bad env layout is a config error
            try:
                envs = make_vec(
                    cfg.env,
                    cfg.num_envs,
                    backend,
                    num_workers=cfg.num_workers,
                    env_options=options,
                )
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"cannot build the vector env: {exc}") from exc

        # Everything is accepted: now the run dir and its checkpoints (restored on resume;
        # config.json rewritten once the checkpoint has accepted cfg).
        run = RunDir.create(
            cfg.resume or cfg.run_dir, algo="dqn", env_id=info.env_id, resume=resuming
        )
        ckpt = Checkpointer(
            run.checkpoints,
            algo="dqn",
            config=cfg,
            keep=cfg.keep_checkpoints,
            ignore_fields=RESUME_IGNORE_FIELDS,
            every_seconds=cfg.checkpoint_every_seconds,
        )
        if resuming:
            state = ckpt.load_latest()
            state.restore(q=q, target=target, optim=opt, tracker=tracker, clock=clock)
            c.update(state.state["counters"])
            arrays = state.load_arrays()
            if arrays:
                rb.load_state_dict(arrays)
                rb.truncate_streams()  # the envs restart below: the stored episodes end here
            state.restore_rng({"act": act_rng, "replay": rb.rng})
            print(f"resumed {run.path} at {c['steps'] * frame_skip:,} frames", file=sys.stderr)
        run.save_config(cfg)
        tracker.stop_at_score = stop_score
        env_seed = restart_env_seed(cfg.seed, c["steps"])
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
        if cfg.actor_processes == 0:
            obs, _ = envs.reset(seed=env_seed)  # [N, ...]: every env waits for an action
            # Per-env state so asynchronous backends (recv returns the first-ready subset) work:
            # the obs each env last returned and the action it was last sent.
            env_ids = np.arange(cfg.num_envs)
            last_actions = np.zeros(cfg.num_envs, np.int64)
        else:
            from rapidrl.algos.dqn.actor import ActorPool

            per_update = math.ceil(k / cfg.num_envs)
            pool = ActorPool(
                cfg.actor_processes,
                env=cfg.env,
                env_options=options,
                num_envs=cfg.num_envs,
                backend=backend,
                num_workers=cfg.num_workers,
                obs_shape=obs_shape,
                obs_dtype=obs_space.dtype,
                q=q,
                net_kwargs={**net_kwargs(cfg, obs_shape, n_actions), "channels_last": False},
                slots=cfg.actor_ring_slots or max(2, 2 * per_update),
                env_seed=env_seed,
                rng_seed=cfg.seed,
                start_steps=c["steps"],
                epsilon=(cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_decay_steps),
                noisy=cfg.noisy,
                version=c["updates"],
                timeout=cfg.actor_timeout_s,
            )

        session.open(
            columns=METRIC_COLUMNS, frames=c["steps"] * frame_skip, desc=f"dqn {info.env_id}"
        )
        last_log_time = time.monotonic()
        eps = linear_schedule(
            cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_decay_steps, c["steps"]
        )

        with StopOnInterrupt() as stop:
            while not session.should_stop(stop, c["steps"] * frame_skip):
                if pool is None:
                    # 1. Act on the current observations and hand the actions to the envs.
                    eps = linear_schedule(
                        cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_decay_steps, c["steps"]
                    )
                    full = len(env_ids) == cfg.num_envs  # synchronous: all envs, in order
                    actions = act(obs if full else obs[env_ids], eps)
                    last_actions[env_ids] = actions
                    envs.send(actions, env_ids)
                    # 2. Learn while the envs step (in their worker processes, if any).
                    learn(envs.batch_size)
                    # 3. Collect the step (the first-ready envs on an async backend). Where an
                    #    episode ended, next_obs already holds the next episode's first
                    #    observation; the transition's next_obs is final_obs.
                    next_obs, rewards, terminated, truncated, infos, env_ids = envs.recv()
                    real_next = next_obs
                    done = terminated | truncated
                    if done.any():
                        real_next = next_obs.copy()
                        real_next[done] = infos["final_obs"][done]
                    full = len(env_ids) == cfg.num_envs
                    rb.add(
                        obs if full else obs[env_ids],
                        last_actions if full else last_actions[env_ids],
                        rewards,
                        terminated,
                        truncated,
                        real_next,
                        env_ids=None if full else env_ids,
                    )
                    if full:
                        obs = next_obs
                    else:
                        obs[env_ids] = next_obs
                    n_new = len(env_ids)
                else:
                    # 1. Take one vector step of an actor from its shared-memory slot.
                    step = pool.next()
                    rb.add(
                        step.obs,
                        step.actions,
                        step.rewards,
                        step.terminated,
                        step.truncated,
                        step.next_obs,
                        env_ids=step.env_ids,
                    )
                    infos, eps = dict(step.infos), step.epsilon
                    c["lag"][0] += c["updates"] - step.version
                    c["lag"][1] += 1
                    pool.release(step)
                    n_new = len(step.env_ids)
                    # 2. Learn: the updates due for these steps (the actors keep playing).
                    learn(n_new)

                c["steps"] += n_new
                frames = c["steps"] * frame_skip
                tracker.update(infos, frames, clock.seconds)

                # Target network: synced by agent steps.
                if c["steps"] // cfg.target_sync_steps > c["synced"]:
                    target.load_state_dict(q.state_dict())
                    c["synced"] = c["steps"] // cfg.target_sync_steps

                # Metrics row: every log_every_seconds and/or every log_every_frames.
                now = time.monotonic()
                by_frames = cfg.log_every_frames and frames // cfg.log_every_frames > c["logged"]
                by_time = cfg.log_every_seconds and now - last_log_time >= cfg.log_every_seconds
                if by_frames or by_time:
                    if cfg.log_every_frames:
                        c["logged"] = frames // cfg.log_every_frames
                    last_log_time = now
                    flush_stats()
                    row = _metrics_row(c, tracker, clock, frames, eps, len(rb))
                    if cfg.prioritized:
                        row["beta"] = beta_at(c["steps"])
                    session.log_row(frames, row)
                    if on_log is not None and on_log(
                        LogEvent(frames, row, run.path, pool.pids if pool else [])
                    ):
                        session.callback_stop = True
                session.bar.update(frames, tracker, eps=eps, upd=c["updates"])

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
            session.log_row(frames, _metrics_row(c, tracker, clock, frames, eps, len(rb)))
        return session.finish(
            frames, steps=c["steps"], updates=c["updates"], title=f"DQN {info.env_id}"
        )
    finally:
        if session is not None:
            session.close()
        if envs is not None:
            envs.close()
        if pool is not None:
            pool.close()
        torch.set_num_threads(threads_before)


def _metrics_row(c, tracker, clock, frames, eps, buffer_len) -> dict[str, Any]:
    loss_sum, q_sum, n, secs = c["acc"]
    lag_sum, lag_n = c["lag"]
    row = {
        "seconds": clock.seconds,
        "fps": clock.fps(frames),
        **tracker.metrics(),
        "loss": loss_sum / n if n else math.nan,
        "q_mean": q_sum / n if n else math.nan,
        "epsilon": eps,
        "policy_lag": lag_sum / lag_n if lag_n else 0.0,
        "steps": c["steps"],
        "updates": c["updates"],
        "buffer": buffer_len,
        "update_ms": 1000 * secs / n if n else math.nan,
    }
    c["acc"] = [0.0, 0.0, 0.0, 0.0]
    c["lag"] = [0.0, 0.0]
    return row


def _save(ckpt, cfg, frames, q, target, opt, tracker, clock, c, act_rng, rb) -> None:
    ckpt.save(
        frames,
        {
            "q": q,
            "target": target,
            "optim": opt,
            "tracker": tracker,
            "clock": clock,
            "counters": copy.deepcopy(c),
        },
        arrays=rb.state_dict() if cfg.save_replay else None,
        np_rng={"act": act_rng, "replay": rb.rng},
    )


class _HostBatches:
    """Preallocated host arrays the replay samples into (``out=``): pinned and double-buffered on
    CUDA, where an event guards a buffer until its non-blocking copy has finished."""

    def __init__(self, rb: ReplayBuffer, n: int, *, pinned: bool, slots: int):
        shape = (n, *rb.obs_shape)
        dtype = torch.from_numpy(np.empty(0, rb.obs_dtype)).dtype
        self._bufs = []
        for _ in range(slots):
            t = [torch.empty(shape, dtype=dtype, pin_memory=pinned) for _ in range(2)]
            self._bufs.append({"obs": t[0].numpy(), "next_obs": t[1].numpy(), "_t": t})
        self._events: list[Any] = [None] * slots
        self._i = 0

    def next(self) -> dict[str, np.ndarray]:
        self._i = (self._i + 1) % len(self._bufs)
        ev = self._events[self._i]
        if ev is not None:
            ev.synchronize()
        b = self._bufs[self._i]
        return {"obs": b["obs"], "next_obs": b["next_obs"]}

    def record(self) -> None:
        if torch.cuda.is_available() and len(self._bufs) > 1:
            ev = torch.cuda.Event()
            ev.record()
            self._events[self._i] = ev


def _try_compile(fn):
    try:
        compiled = torch.compile(fn)
    except Exception as exc:
        warnings.warn(f"torch.compile unavailable ({exc}); running eager", stacklevel=2)
        return fn
    state = {"fn": compiled}

    def run(*args):
        try:
            return state["fn"](*args)
        except Exception as exc:
            if state["fn"] is fn:
                raise
            warnings.warn(f"torch.compile failed ({exc}); running eager", stacklevel=2)
            state["fn"] = fn
            return fn(*args)

    return run


# --------------------------------------------------------------------------------------------
# Evaluation: the DQN policy loader of ``rapidrl eval``
# --------------------------------------------------------------------------------------------
def eval_policy(config: dict[str, Any], ckpt, device: str = "cpu"):
    """``rapidrl eval`` loader: the greedy policy of a DQN checkpoint.

    Returns ``(act, env_id, env_options)`` where ``act(obs [B, ...]) -> actions [B]``.
    """
    from rapidrl.envs import make_env, resolve_env

    cfg = config_from_dict(DQNConfig, config)
    info = resolve_env(cfg.env)
    options = env_options(cfg, info.is_atari)
    probe = make_env(cfg.env, **options)
    obs_shape, n_actions = tuple(probe.observation_space.shape), int(probe.action_space.n)
    probe.close()
    q = make_q_network(cfg, obs_shape, n_actions, device).to(device)
    ckpt.restore(q=q)  # a clear CheckpointError when the weights do not fit
    q.eval()  # noisy layers use their means

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return q(torch.as_tensor(obs, device=device)).argmax(1).cpu().numpy()

    return act, cfg.env, options


# --------------------------------------------------------------------------------------------
# Command line: rapidrl train dqn / rapidrl train rainbow
# --------------------------------------------------------------------------------------------
def parse_dqn_args(argv: Sequence[str], prog: str, default_preset: str) -> DQNConfig:
    """``--preset NAME`` + field flags -> ``DQNConfig``. With ``--resume RUN_DIR`` the run's own
    config.json gives the defaults (flags still override; the checkpoint check rejects changes
    that would alter what the checkpoint means)."""
    argv = list(argv)
    doc = inspect.cleandoc(DQNConfig.__doc__ or "")
    resume = flag_value(argv, "--resume")
    if resume and resume != "None":
        if flag_value(argv, "--preset") is not None:
            raise ConfigError("--resume continues a run with its own config; drop --preset")
        saved = load_run_config(DQNConfig, resume, "dqn")
        saved = DQNConfig(**{**saved.__dict__, "resume": resume, "run_dir": None})
        return parse_config(
            DQNConfig,
            {"resumed": saved},
            argv,
            prog=prog,
            default_preset="resumed",
            description=doc,
        )
    return parse_config(
        DQNConfig, PRESETS, argv, prog=prog, default_preset=default_preset, description=doc
    )


def _main(argv: Sequence[str], prog: str, default_preset: str) -> int:
    from rapidrl.algos.dqn.actor import ActorError
    from rapidrl.distributed import RolloutWorkerError, WorkerFailedError

    cfg = parse_dqn_args(argv, prog, default_preset)
    return run_from_cli(train, cfg, prog, (ActorError, RolloutWorkerError, WorkerFailedError))


def main_dqn(argv: Sequence[str]) -> int:
    """``rapidrl train dqn [--preset fast|dqn|rainbow] [--FIELD VALUE ...]`` (default: fast)."""
    return _main(argv, "rapidrl train dqn", "fast")


def main_rainbow(argv: Sequence[str]) -> int:
    """``rapidrl train rainbow [--FIELD VALUE ...]``: the rainbow preset."""
    return _main(argv, "rapidrl train rainbow", "rainbow")
