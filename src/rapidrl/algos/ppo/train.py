"""The PPO / PPO-LSTM trainer: ``train(cfg) -> summary``; reads top to bottom like CleanRL's
``ppo_atari.py`` and ``ppo_atari_lstm.py`` in one loop.

Each update: (1) set the annealed learning rate; (2) collect a rollout of ``num_steps x
num_envs`` agent steps through the vector API; (3) bootstrap values and GAE
(:func:`rapidrl.algos.ppo.gae`); (4) ``epochs`` passes of minibatch PPO steps
(:func:`update_policy`); (5) log, checkpoint, check the stop conditions (solved, max_frames,
max_minutes, Ctrl-C).

Rollout layout and truncation
-----------------------------
Time-major buffers ``[T, N]``. ``obs[t, i]`` is what env ``i`` showed before its ``t``-th action of
the rollout, ``starts[t, i]`` whether that observation opened an episode (the env's
``terminated | truncated`` of the step before; at ``t = 0`` carried over from the previous
rollout). With the same-step autoreset of the vector API, the observation returned by a step that
ended an episode is already the next episode's first one, so where ``truncated`` (a time limit)
the trainer evaluates ``V(infos["final_obs"])`` right away and GAE bootstraps from it; where
``terminated`` nothing is bootstrapped. For the LSTM that value is ``net.value(final_obs, store,
env_ids)``: the ended episode's state, read before the next ``act`` resets it.

Recurrent training
------------------
The LSTM state of every env at the start of the rollout is stored. Minibatches are groups of
whole env sequences (``num_envs / minibatches`` envs), replayed from their stored states with
``RecurrentActorCritic.evaluate``; ``sequence_mode="packed"`` splits them at episode starts and
runs one LSTM call per length bucket instead of one per step (``rapidrl.nets.recurrent``).

Asynchronous vector envs (``env_batch_size < num_envs``)
--------------------------------------------------------
``recv`` then returns the first ready ``B`` envs, not all of them, so a rollout is assembled per
env. Every env has a write position ``lengths[i]``. At the start of a rollout all envs are idle:
the trainer acts on all ``N`` and sends. Then, for each ``recv``: the returned envs' rewards and
flags go into their own positions, the positions advance, and the trainer acts on the returned
observations and sends right away -- while the rollout's budget of ``num_steps x num_envs``
actions lasts. After that, returned envs are held until every action sent has come back (a
*drain*: ``N / B`` more recvs), so at the update every env is idle again, and every stored step
was chosen by the current policy (no policy lag, no importance correction needed). The rollout
holds exactly ``num_steps x num_envs`` steps, but per env between about ``num_steps - k`` and
``num_steps + k``: envs that step faster contribute more. GAE runs per env up to its own length
(its last step bootstraps from the value of the observation it holds); the buffers have room for
``num_steps x num_envs / B`` steps per env (the most one env can get) and the padding is masked
out of the loss. A synchronous vector env is the special case ``B = N``: every env gets exactly
``num_steps`` steps, no padding -- the classic PPO rollout.

Ray
---
With ``ray`` set, ``train`` runs :mod:`rapidrl.algos.ppo.ray_loop` instead: the rollout of each
update comes from Ray workers (synchronous, latest weights), then the same GAE and
:func:`train_on_rollout`; same run directory and checkpoints. Feed-forward only.

Resume (``--resume RUN_DIR``) -- what is exact and what is not
--------------------------------------------------------------
Checkpoints are taken between updates. Exact: the network, the Adam state, the counters, the
episode window and best mean, the training clock, the metric accumulators and every RNG (Python,
NumPy, torch, the action-sampling and minibatch generators). Not exact: the envs, whose emulator
state is not saved: on resume they restart from seeds derived from the step counter (fresh
episodes, LSTM states zero). So a stopped run's checkpoint equals the uninterrupted run's at the
same frame bit for bit (CPU, same thread count), resuming the same checkpoint twice gives the same
run, and after the checkpoint the resumed run plays other episodes than the uninterrupted one
would have. With ``anneal_lr`` the schedule follows ``lr_anneal_frames`` (default ``max_frames``):
resuming with a larger ``max_frames`` stretches it unless ``lr_anneal_frames`` is set.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from rapidrl.algos.ppo.config import PRESETS, PPOConfig
from rapidrl.algos.ppo.gae import gae
from rapidrl.algos.ppo.losses import ppo_loss
from rapidrl.algos.ppo.memory_envs import MemoryEnvFactory, is_memory_env
from rapidrl.config import ConfigError
from rapidrl.nets.actor_critic import ActorCritic, orthogonal_init
from rapidrl.nets.recurrent import RecurrentActorCritic
from rapidrl.nets.torso import make_torso, resolve_precision, use_channels_last, use_precision
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
    Every,
    RunSession,
    atari_env_options,
    cpu_count,
    parse_with_resume,
    resolve_device,
    resolve_stop_score,
    restart_env_seed,
    run_from_cli,
)

__all__ = [
    "LSTM_PRESETS",
    "Learner",
    "LogEvent",
    "RolloutBatch",
    "anneal_lr",
    "env_options",
    "eval_policy",
    "main_ppo",
    "main_ppo_lstm",
    "make_policy",
    "parse_ppo_args",
    "rollout_advantages",
    "start_learner",
    "train",
    "train_on_rollout",
    "update_policy",
]

# Fields that may change on resume without changing what the checkpoint means.
RESUME_IGNORE_FIELDS = (
    *DEFAULT_IGNORE_FIELDS,
    "max_minutes",
    "backend",
    "num_workers",
    "env_batch_size",
    "act_threads",
    "sequence_mode",  # the three modes compute the same function
    "fused_adam",  # the same Adam state either way
    "tensorboard",
    "score_window",
    # Ray: another cluster or worker layout does not change what the learner's state means.
    "ray",
    "workers",
    "envs_per_worker",
    "ray_cpus_per_worker",
)

LOSS_KEYS = ("policy_loss", "value_loss", "entropy", "approx_kl", "old_approx_kl", "clipfrac")
METRIC_COLUMNS = (
    "length_mean_100",
    "return_best_mean_100",
    *LOSS_KEYS,
    "explained_variance",
    "lr",
    "steps",
    "updates",
    "grad_steps",
    "rollout_s",
    "update_s",
)

# ppo-lstm: every preset with the LSTM on (`rapidrl train ppo-lstm --preset fast` = fast + LSTM).
LSTM_PRESETS = {name: dataclasses.replace(cfg, recurrent=True) for name, cfg in PRESETS.items()}


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
    actor_pids: list[int] = dataclasses.field(default_factory=list)
    """Ray workers (``ray``): their pids now; empty for the local loop."""


def env_options(cfg: PPOConfig, is_atari: bool) -> dict[str, Any]:
    """The ``make_env`` options of this config (the Atari switches apply to Atari ids only)."""
    return atari_env_options(
        is_atari,
        episodic_life=cfg.episodic_life,
        clip_rewards=cfg.clip_rewards,
        noop_max=cfg.noop_max,
        sticky_actions=cfg.sticky_actions,
        screen_size=cfg.obs_size,
    )


def make_policy(
    cfg: PPOConfig,
    obs_shape: tuple[int, ...],
    num_actions: int,
    device: torch.device | str = "cpu",
) -> nn.Module:
    """The actor-critic a config describes: ``ActorCritic`` or ``RecurrentActorCritic``, for
    ``device`` (which decides ``precision="auto"``; not moved there: call ``.to(device)``)."""
    return use_precision(
        _make_policy(cfg, obs_shape, num_actions), resolve_precision(cfg.precision, device)
    )


def _make_policy(cfg: PPOConfig, obs_shape: tuple[int, ...], num_actions: int) -> nn.Module:
    if cfg.recurrent:
        net = RecurrentActorCritic(
            tuple(obs_shape),
            int(num_actions),
            hidden_size=cfg.lstm_hidden,
            sequence_mode=cfg.sequence_mode,
            torso=make_torso(tuple(obs_shape), kind=cfg.torso),
        )
        orthogonal_init(net.torso)  # CleanRL's layer_init, as in the feed-forward net
        if cfg.channels_last and len(obs_shape) == 3:
            use_channels_last(net.torso)
        return net
    return ActorCritic(
        tuple(obs_shape),
        int(num_actions),
        shared_torso=cfg.shared_torso,
        channels_last=cfg.channels_last,
        torso_kind=cfg.torso,
    )


def _seed_of(*keys: int) -> int:
    return int(np.random.SeedSequence(list(keys)).generate_state(1)[0])


@contextlib.contextmanager
def _threads(n: int):
    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n != before:
            torch.set_num_threads(before)


class RolloutBatch(NamedTuple):
    """One rollout, time-major ``[T, N]`` (``T`` = the longest env sequence of the rollout)."""

    obs: torch.Tensor  # [T, N, *obs_shape]
    actions: torch.Tensor  # [T, N] int64
    logprobs: torch.Tensor  # [T, N]
    values: torch.Tensor  # [T, N]
    advantages: torch.Tensor  # [T, N]
    returns: torch.Tensor  # [T, N]
    starts: torch.Tensor  # [T, N] bool: obs[t] opens an episode
    valid: torch.Tensor  # [T, N] bool: t < lengths[n] (False only with async envs)
    lengths: torch.Tensor  # [N] int64, on the CPU
    init_state: tuple[torch.Tensor, torch.Tensor] | None  # LSTM (h, c) [L, N, H] at t = 0


# --------------------------------------------------------------------------------------------
# Advantages of a rollout whose envs may have different lengths
# --------------------------------------------------------------------------------------------
def rollout_advantages(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    trunc_values: torch.Tensor,
    lengths: torch.Tensor,
    boot_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GAE over ``[T, N]`` buffers where env ``n`` holds ``lengths[n] <= T`` steps.

    ``next_values[t]`` = ``V(s_{t+1})`` of the same episode: ``values[t + 1]``; at an env's last
    step ``boot_values[n]`` (the value of the observation it holds after the rollout); where
    ``truncated``, ``trunc_values`` (``V(final_obs)``). An env's last step ends its lambda-trace
    (marked as a cut for :func:`rapidrl.algos.ppo.gae`, which then bootstraps from
    ``next_values``). Returns ``(advantages, returns, valid)``; entries past an env's length are
    padding (``valid`` False) and hold no meaningful value.
    """
    t_len, n_env = values.shape
    env = torch.arange(n_env, device=values.device)
    last = lengths.to(values.device) - 1
    next_values = torch.zeros_like(values)
    next_values[:-1] = values[1:]
    next_values[last, env] = boot_values.to(values.dtype)
    next_values = torch.where(truncated, trunc_values, next_values)
    valid = torch.arange(t_len, device=values.device)[:, None] < lengths.to(values.device)[None]
    cut = truncated | ~valid
    cut[last, env] = True
    advantages, returns = gae(rewards, values, next_values, terminated, cut, gamma, lam)
    return advantages, returns, valid


# --------------------------------------------------------------------------------------------
# The update phase: epochs x minibatches of PPO steps on one rollout
# --------------------------------------------------------------------------------------------
_PREPARE_MAX_ELEMENTS = 2**27  # 512 MB as float32: e.g. 4,750 Atari frame stacks


def update_policy(
    net: nn.Module,
    opt: torch.optim.Optimizer,
    batch: RolloutBatch,
    cfg: PPOConfig,
    generator: torch.Generator,
) -> dict[str, float]:
    """Run ``cfg.epochs`` passes of ``cfg.minibatches`` PPO steps; return the mean of each loss
    term over the steps taken and ``grad_steps``.

    Feed-forward: minibatches of shuffled single steps. Recurrent: minibatches of whole env
    sequences (``num_envs / minibatches`` envs, shuffled each epoch) replayed from the stored
    initial state in ``net.sequence_mode``. ``generator`` (CPU) draws the shuffles.
    """
    sums = dict.fromkeys(LOSS_KEYS, 0.0)
    steps = 0
    device = batch.values.device
    valid = batch.valid
    all_valid = bool(valid.all())

    def step(losses: dict[str, torch.Tensor]) -> None:
        nonlocal steps
        opt.zero_grad(set_to_none=True)
        losses["loss"].backward()
        if cfg.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
        opt.step()
        for k in LOSS_KEYS:
            sums[k] += float(losses[k].detach())
        steps += 1
        if cfg.kl_adaptive_lr is not None:
            adapt_lr(opt, cfg, float(losses["approx_kl"]))

    def loss_of(logprob, entropy, values, old_logprob, old_values, adv, ret):
        return ppo_loss(
            logprob,
            old_logprob,
            adv,
            values,
            old_values,
            ret,
            entropy,
            clip_coef=cfg.clip,
            vf_coef=cfg.vf_coef,
            ent_coef=cfg.ent_coef,
            clip_vloss=cfg.clip_vloss,
            norm_adv=cfg.norm_adv,
        )

    if not cfg.recurrent:
        if all_valid:
            flat = [x.reshape(-1, *x.shape[2:]) for x in batch[:6]]
        else:
            flat = [x[valid] for x in batch[:6]]
        obs, actions, logprobs, values, adv, ret = flat
        n = obs.shape[0]
        # Convert the frames once for all epochs (channels-last, scaled, in the CNN's dtype)
        # rather than once per minibatch (the channels-last copy and the cast were a tenth of a
        # minibatch's time in a profile). Bounded, as the copy is 2-4x the uint8 rollout.
        if hasattr(net, "prepare") and obs.numel() <= _PREPARE_MAX_ELEMENTS:
            obs = net.prepare(obs)
    for _epoch in range(cfg.epochs):
        kl_sum, kl_n = 0.0, 0
        if cfg.recurrent:
            envs_perm = torch.randperm(batch.obs.shape[1], generator=generator)
            for envs in envs_perm.tensor_split(cfg.minibatches):
                t_len = int(batch.lengths[envs].max())
                e = envs.to(device)
                out = net.evaluate(
                    batch.obs[:t_len, e],
                    batch.starts[:t_len, e],
                    (batch.init_state[0][:, e], batch.init_state[1][:, e]),
                    batch.actions[:t_len, e],
                )
                if all_valid:
                    pick = torch.Tensor.flatten
                else:
                    mask = valid[:t_len, e]

                    def pick(x, mask=mask):
                        return x[mask]

                losses = loss_of(
                    pick(out.logprob),
                    pick(out.entropy),
                    pick(out.values),
                    pick(batch.logprobs[:t_len, e]),
                    pick(batch.values[:t_len, e]),
                    pick(batch.advantages[:t_len, e]),
                    pick(batch.returns[:t_len, e]),
                )
                step(losses)
                kl_sum, kl_n = kl_sum + float(losses["approx_kl"]), kl_n + 1
        else:
            perm = torch.randperm(n, generator=generator).to(device)
            for idx in perm.tensor_split(cfg.minibatches):
                out = net.evaluate(obs[idx], actions[idx])
                losses = loss_of(
                    out.logprob,
                    out.entropy,
                    out.values,
                    logprobs[idx],
                    values[idx],
                    adv[idx],
                    ret[idx],
                )
                step(losses)
                kl_sum, kl_n = kl_sum + float(losses["approx_kl"]), kl_n + 1
        if cfg.target_kl is not None and kl_sum / max(kl_n, 1) > cfg.target_kl:
            break
    out = {k: v / max(steps, 1) for k, v in sums.items()}
    out["grad_steps"] = steps
    return out


def train_on_rollout(
    net: nn.Module,
    opt: torch.optim.Optimizer,
    batch: RolloutBatch,
    cfg: PPOConfig,
    generator: torch.Generator,
    c: dict[str, Any],
    *,
    rollout_s: float,
    t_start: float,
) -> None:
    """Step 4 of an update, shared by the local and the Ray loop: the PPO epochs
    (:func:`update_policy`), the explained variance, and the counters and metric sums in ``c``
    (``update_s`` is measured from ``t_start``, the end of the rollout)."""
    stats = update_policy(net, opt, batch, cfg, generator)
    ev = explained_variance(batch.values[batch.valid], batch.returns[batch.valid])
    update_s = time.perf_counter() - t_start
    c["updates"] += 1
    c["grad_steps"] += stats["grad_steps"]
    acc = c["acc"]
    for k in LOSS_KEYS:
        acc[k] += stats[k]
    acc["explained_variance"] += 0.0 if math.isnan(ev) else ev
    acc["ev_n"] += 0 if math.isnan(ev) else 1
    acc["n"] += 1
    acc["rollout_s"] += rollout_s
    acc["update_s"] += update_s


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """``1 - Var(R - V) / Var(R)``: 1 = the critic predicts the returns, <= 0 = no better than a
    constant (NaN when the returns do not vary)."""
    var = returns.var()
    if returns.numel() < 2 or float(var) == 0.0:
        return math.nan
    return float(1.0 - (returns - values).var() / var)


# --------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------


def learner_checkpoint(
    c, *, net, opt, tracker, clock, log_every, ckpt_every, act_gen, mb_gen
) -> dict[str, Any]:
    """What a PPO checkpoint holds (local and Ray loops alike): weights, optimizer, tracker,
    clock, counters with the cadence states, and the acting/minibatch generators."""
    counters = copy.deepcopy(c)
    counters["log_every"] = log_every.state_dict()
    counters["ckpt_every"] = ckpt_every.state_dict()
    return {
        "net": net,
        "optim": opt,
        "tracker": tracker,
        "clock": clock,
        "counters": counters,
        "generators": {"act": act_gen.get_state(), "minibatch": mb_gen.get_state()},
    }


def restore_learner(
    state, c, *, net, opt, tracker, clock, log_every, ckpt_every, act_gen, mb_gen
) -> None:
    """The inverse of :func:`learner_checkpoint`, in place (``c``: the loop's counters)."""
    state.restore(net=net, optim=opt, tracker=tracker, clock=clock)
    c.update(copy.deepcopy(state.state["counters"]))
    log_every.load_state_dict(c.pop("log_every"))
    ckpt_every.load_state_dict(c.pop("ckpt_every"))
    act_gen.set_state(state.state["generators"]["act"])
    mb_gen.set_state(state.state["generators"]["minibatch"])
    state.restore_rng()


@dataclass
class Learner:
    """The learner-side run state one PPO loop (local or Ray) keeps beside its net and optimizer."""

    c: dict[str, Any]  # counters: everything the schedules and the metric rows depend on
    log_every: Every
    ckpt_every: Every
    tracker: EpisodeTracker
    clock: RunClock
    save: Callable[[int], None]  # save(frames): an atomic checkpoint of all of it


def start_learner(
    cfg: PPOConfig, run, *, net, opt, act_gen, mb_gen, stop_score, resuming: bool, frame_skip: int
) -> Learner:
    """Fresh counters, cadences, tracker and clock, restored from the newest checkpoint when
    ``resuming`` (the local and the Ray loop alike)."""
    c: dict[str, Any] = {
        "steps": 0,  # agent steps, all envs
        "updates": 0,  # rollouts collected and trained on
        "grad_steps": 0,
        "acc": _zero_acc(),  # sums since the last metrics row
    }
    log_every = Every(cfg.log_every_seconds, cfg.log_every_frames)
    ckpt_every = Every(cfg.checkpoint_every_seconds, cfg.checkpoint_every_frames)
    tracker = EpisodeTracker(stop_score, window=cfg.score_window)
    clock = RunClock()
    ckpt = Checkpointer(
        run.checkpoints,
        algo="ppo",
        config=cfg,
        keep=cfg.keep_checkpoints,
        ignore_fields=RESUME_IGNORE_FIELDS,
    )
    parts = dict(  # what a checkpoint holds besides the counters (see learner_checkpoint)
        net=net,
        opt=opt,
        tracker=tracker,
        clock=clock,
        log_every=log_every,
        ckpt_every=ckpt_every,
        act_gen=act_gen,
        mb_gen=mb_gen,
    )
    if resuming:
        state = ckpt.load_latest()  # on the CPU: generator states must stay there
        restore_learner(state, c, **parts)
        print(f"resumed {run.path} at {c['steps'] * frame_skip:,} frames", file=sys.stderr)
    tracker.stop_at_score = stop_score

    def save(frames: int) -> None:
        ckpt.save(frames, learner_checkpoint(c, **parts))

    return Learner(c, log_every, ckpt_every, tracker, clock, save)


def train(cfg: PPOConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train, write the run directory, return the summary (what ``summary.json`` holds)."""
    if cfg.ray is not None:  # rollouts from Ray workers: rapidrl.algos.ppo.ray_loop
        from rapidrl.algos.ppo.ray_loop import train_ray

        return train_ray(cfg, on_log=on_log)
    from rapidrl.envs import make_env, resolve_env
    from rapidrl.vector import make_vec

    cfg.validate()
    info = resolve_env(cfg.env)
    options = env_options(cfg, info.is_atari)
    frame_skip = options.get("frame_skip", 4) if info.is_atari else 1
    stop_score = resolve_stop_score(cfg.stop_at_score, info)
    name = "ppo-lstm" if cfg.recurrent else "ppo"
    resuming = cfg.resume is not None
    # Nothing goes on disk until the config, the env and the env layout are accepted: a start
    # that fails them must leave no (empty) run dir behind. A wrong --run-dir/--resume fails here.
    RunDir.check(cfg.resume or cfg.run_dir, resume=resuming)
    device = resolve_device(cfg.device)
    threads_before = torch.get_num_threads()
    learn_threads = cfg.torch_threads or cpu_count()
    torch.set_num_threads(learn_threads)

    # Seeding: torch/numpy/python globals, then one generator per consumer.
    seed_everything(cfg.seed)
    act_gen = torch.Generator(device=device).manual_seed(_seed_of(cfg.seed, 1))
    mb_gen = torch.Generator().manual_seed(_seed_of(cfg.seed, 2))

    # Spaces from one probe env.
    probe = make_env(cfg.env, **options)
    obs_space, act_space = probe.observation_space, probe.action_space
    probe.close()
    if not hasattr(act_space, "n"):
        raise ConfigError(f"PPO here needs a discrete action space; {cfg.env} has {act_space}")
    obs_shape, n_actions = tuple(obs_space.shape), int(act_space.n)

    # Network and optimizer.
    net = make_policy(cfg, obs_shape, n_actions, device).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=cfg.fused_adam)

    # Envs. A memory env (rapidrl/CartPoleNoVel-v1) is registered by importing this package, so
    # process workers get a factory that registers it there first.
    backend = cfg.backend
    if backend == "auto" and cfg.num_envs == 1:
        backend = "serial"
    env_arg = MemoryEnvFactory(cfg.env, options) if is_memory_env(cfg.env) else cfg.env
    envs = session = None
    try:
        try:
            envs = make_vec(
                env_arg,
                cfg.num_envs,
                backend,
                num_workers=cfg.num_workers,
                batch_size=cfg.env_batch_size,
                env_options=options if isinstance(env_arg, str) else None,
            )
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"cannot build the vector env: {exc}") from exc
        N, T, B = cfg.num_envs, cfg.num_steps, envs.batch_size
        if N % B:
            raise ConfigError(
                f"the {backend} vector env returns batches of {B} envs, which do not divide "
                f"--num-envs {N}; set --env-batch-size to a divisor of {N}"
            )

        # Everything is accepted: now the run dir, then the counters, cadences, tracker, clock
        # and checkpoints (restored on resume; config.json rewritten once the checkpoint has
        # accepted cfg).
        run = RunDir.create(
            cfg.resume or cfg.run_dir, algo=name, env_id=info.env_id, resume=resuming
        )
        lrn = start_learner(
            cfg, run, net=net, opt=opt, act_gen=act_gen, mb_gen=mb_gen, stop_score=stop_score,
            resuming=resuming, frame_skip=frame_skip,
        )  # fmt: skip
        run.save_config(cfg)
        c, tracker, clock, save = lrn.c, lrn.tracker, lrn.clock, lrn.save
        log_every, ckpt_every = lrn.log_every, lrn.ckpt_every
        session = RunSession(
            run,
            cfg,
            algo="ppo",
            env_id=info.env_id,
            device=device,
            tracker=tracker,
            clock=clock,
            stop_score=stop_score,
            recurrent=cfg.recurrent,
        )
        synchronous = B == N
        act_threads = cfg.act_threads or 1
        next_obs, _ = envs.reset(seed=restart_env_seed(cfg.seed, c["steps"]))
        next_start = np.ones(N, dtype=bool)  # every env begins an episode
        store = net.initial_state(N, device) if cfg.recurrent else None

        # Rollout buffers, time-major. An env gets at most one step per recv: T * N / B steps.
        t_max = T if synchronous else T * N // B
        obs_dtype = torch.from_numpy(np.empty(0, dtype=obs_space.dtype)).dtype
        obs_buf = torch.zeros((t_max, N, *obs_shape), dtype=obs_dtype, device=device)
        actions_buf = torch.zeros((t_max, N), dtype=torch.long, device=device)
        logp_buf = torch.zeros((t_max, N), device=device)
        values_buf = torch.zeros((t_max, N), device=device)
        rewards_buf = torch.zeros((t_max, N), device=device)
        term_buf = torch.zeros((t_max, N), dtype=torch.bool, device=device)
        trunc_buf = torch.zeros((t_max, N), dtype=torch.bool, device=device)
        starts_buf = torch.zeros((t_max, N), dtype=torch.bool, device=device)
        trunc_values = torch.zeros((t_max, N), device=device)  # V(final_obs) where truncated
        lengths = np.zeros(N, dtype=np.int64)  # steps of each env in this rollout so far

        def act_and_send(ids: np.ndarray) -> None:
            """Act on the held observations of envs ``ids``, store, send the actions."""
            nonlocal store
            pos = torch.as_tensor(lengths[ids], device=device)
            ids_t = torch.as_tensor(ids, device=device)
            obs = torch.as_tensor(next_obs[ids], device=device)
            start = torch.as_tensor(next_start[ids], device=device)
            with torch.no_grad():  # on act_threads: called inside the rollout's _threads
                if cfg.recurrent:
                    out = net.act(obs, store, ids_t, start, generator=act_gen)
                    store = out.state
                else:
                    out = net.act(obs, generator=act_gen)
            obs_buf[pos, ids_t] = obs
            starts_buf[pos, ids_t] = start
            actions_buf[pos, ids_t] = out.action
            logp_buf[pos, ids_t] = out.logprob
            values_buf[pos, ids_t] = out.value
            envs.send(out.action.cpu().numpy(), ids)

        session.open(
            columns=METRIC_COLUMNS, frames=c["steps"] * frame_skip, desc=f"{name} {info.env_id}"
        )

        with StopOnInterrupt() as stop:
            while not session.should_stop(stop, c["steps"] * frame_skip):
                # 1. Learning rate: annealed linearly to 0 over lr_anneal_frames (or KL-adaptive).
                anneal_lr(opt, cfg, c["steps"] * frame_skip)

                # 2. Rollout: num_steps x num_envs agent steps (see the module docstring for
                #    how an asynchronous vector env's batches are assembled).
                t0 = time.perf_counter()
                init_state = store  # the LSTM state before step 0 (act() is out of place)
                lengths[:] = 0
                # The whole rollout on act_threads: with more, tensor copies here (obs into the
                # buffer) fork OpenMP regions whose spinning threads take the core an env worker
                # needs (profiled: each command write to a worker then cost ~1 ms).
                with _threads(act_threads):
                    act_and_send(np.arange(N))
                    sent, received = N, 0
                    while received < cfg.rollout_steps:
                        obs, rewards, terminated, truncated, infos, ids = envs.recv()
                        pos = torch.as_tensor(lengths[ids], device=device)
                        ids_t = torch.as_tensor(ids, device=device)
                        rewards_buf[pos, ids_t] = torch.as_tensor(rewards, device=device).float()
                        term_buf[pos, ids_t] = torch.as_tensor(terminated, device=device)
                        trunc_buf[pos, ids_t] = torch.as_tensor(truncated, device=device)
                        # A time limit: bootstrap from V(final_obs) -- for the LSTM from the ended
                        # episode's state, before act() below resets it for the new episode.
                        cut = truncated & ~terminated
                        if cut.any():
                            cut_t = torch.as_tensor(cut, device=device)
                            final = torch.as_tensor(infos["final_obs"][cut], device=device)
                            with torch.no_grad():
                                if cfg.recurrent:
                                    v = net.value(final, store, ids_t[cut_t])
                                else:
                                    v = net.value(final)
                            trunc_values[pos[cut_t], ids_t[cut_t]] = v
                        lengths[ids] += 1
                        next_obs[ids] = obs
                        next_start[ids] = terminated | truncated
                        received += len(ids)
                        c["steps"] += len(ids)
                        frames = c["steps"] * frame_skip
                        tracker.update(infos, frames, clock.seconds)
                        session.bar.update(frames, tracker, upd=c["updates"])
                        if sent < cfg.rollout_steps:  # else hold the env until the update is done
                            act_and_send(ids)
                            sent += len(ids)
                rollout_s = time.perf_counter() - t0

                # 3. Advantages: GAE per env up to its own length, bootstrapped from the value
                #    of the observation each env holds now.
                t1 = time.perf_counter()
                t_len = int(lengths.max())
                with torch.no_grad():
                    held = torch.as_tensor(next_obs, device=device)
                    boot = net.value(held, store) if cfg.recurrent else net.value(held)
                values = values_buf[:t_len]
                lengths_t = torch.tensor(lengths)  # a copy: `lengths` is reused
                advantages, returns, valid = rollout_advantages(
                    rewards_buf[:t_len],
                    values,
                    term_buf[:t_len],
                    trunc_buf[:t_len],
                    trunc_values[:t_len],
                    lengths_t.to(device),
                    boot,
                    cfg.gamma,
                    cfg.gae_lambda,
                )
                batch = RolloutBatch(
                    obs_buf[:t_len],
                    actions_buf[:t_len],
                    logp_buf[:t_len],
                    values,
                    advantages,
                    returns,
                    starts_buf[:t_len],
                    valid,
                    lengths_t,
                    init_state,
                )

                # 4. PPO epochs.
                train_on_rollout(net, opt, batch, cfg, mb_gen, c, rollout_s=rollout_s, t_start=t1)

                # 5. Metrics row and checkpoint, by seconds and/or frames.
                frames = c["steps"] * frame_skip
                if log_every.due(frames):
                    log_every.mark(frames)
                    row = _metrics_row(c, tracker, clock, frames, lr_now(opt))
                    session.log_row(frames, row)
                    if on_log is not None and on_log(LogEvent(frames, row, run.path)):
                        session.callback_stop = True
                session.bar.update(frames, tracker, upd=c["updates"])
                if ckpt_every.due(frames):
                    ckpt_every.mark(frames)
                    save(frames)

        # The end: a last checkpoint and row, the summary and the learning curve.
        frames = c["steps"] * frame_skip
        save(frames)
        if frames != session.last_row_frames:
            session.log_row(frames, _metrics_row(c, tracker, clock, frames, lr_now(opt)))
        return session.finish(
            frames,
            steps=c["steps"],
            updates=c["updates"],
            grad_steps=c["grad_steps"],
            title=f"{name.upper()} {info.env_id}",
        )
    finally:
        if session is not None:
            session.close()
        if envs is not None:
            envs.close()
        torch.set_num_threads(threads_before)


def adapt_lr(opt: torch.optim.Optimizer, cfg: PPOConfig, approx_kl: float) -> float:
    """The KL-adaptive rate after one minibatch step (``cfg.kl_adaptive_lr`` = the target KL):
    divided by 1.5 when ``approx_kl`` exceeded twice the target, multiplied by 1.5 when it was
    below half of it, clamped to ``[lr_min, lr_max]``. Set in the optimizer; returned."""
    target = cfg.kl_adaptive_lr
    lr = lr_now(opt)
    if target is None:
        return lr
    if approx_kl > 2.0 * target:
        lr = max(lr / 1.5, cfg.lr_min)
    elif approx_kl < 0.5 * target:
        lr = min(lr * 1.5, cfg.lr_max)
    for group in opt.param_groups:
        group["lr"] = lr
    return lr


def anneal_lr(opt: torch.optim.Optimizer, cfg: PPOConfig, frames: int) -> float:
    """Set and return the learning rate at ``frames``: ``cfg.lr``, with ``anneal_lr`` annealed
    linearly to 0 over ``lr_anneal_frames`` (default ``max_frames``). With ``kl_adaptive_lr``
    the rate is the optimizer's own (see :func:`adapt_lr`): returned unchanged."""
    if cfg.kl_adaptive_lr is not None:
        return lr_now(opt)
    lr = cfg.lr
    if cfg.anneal_lr:
        lr = cfg.lr * max(0.0, 1.0 - frames / (cfg.lr_anneal_frames or cfg.max_frames))
    for group in opt.param_groups:
        group["lr"] = lr
    return lr


def lr_now(opt: torch.optim.Optimizer) -> float:
    return float(opt.param_groups[0]["lr"])


def _zero_acc() -> dict[str, float]:
    acc = dict.fromkeys(LOSS_KEYS, 0.0)
    acc.update(explained_variance=0.0, ev_n=0, n=0, rollout_s=0.0, update_s=0.0)
    return acc


def _metrics_row(c, tracker, clock, frames, lr) -> dict[str, Any]:
    acc = c["acc"]
    n = acc["n"]
    row = {
        "seconds": clock.seconds,
        "fps": clock.fps(frames),
        **tracker.metrics(),
        **{k: acc[k] / n if n else math.nan for k in LOSS_KEYS},
        "explained_variance": acc["explained_variance"] / acc["ev_n"] if acc["ev_n"] else math.nan,
        "lr": lr,
        "steps": c["steps"],
        "updates": c["updates"],
        "grad_steps": c["grad_steps"],
        "rollout_s": acc["rollout_s"] / n if n else math.nan,
        "update_s": acc["update_s"] / n if n else math.nan,
    }
    c["acc"] = _zero_acc()
    return row


# --------------------------------------------------------------------------------------------
# Evaluation: the PPO policy loader of ``rapidrl eval``
# --------------------------------------------------------------------------------------------
class RecurrentPolicy:
    """Greedy PPO-LSTM policy for one stream of observations: keeps the LSTM state between
    calls. ``reset()`` starts a new episode (zero state)."""

    def __init__(self, net: RecurrentActorCritic, device: str):
        self.net, self.device = net, device
        self.state = None
        self.new_episode = True

    def reset(self) -> None:
        self.state = None
        self.new_episode = True

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        obs_t = torch.as_tensor(np.asarray(obs), device=self.device)
        n = obs_t.shape[0]
        if self.state is None or self.state[0].shape[1] != n:
            self.state = self.net.initial_state(n, self.device)
        start = torch.full((n,), self.new_episode, dtype=torch.bool, device=self.device)
        with torch.no_grad():
            out = self.net.act(obs_t, self.state, None, start, deterministic=True)
        self.state, self.new_episode = out.state, False
        return out.action.cpu().numpy()


def eval_policy(config: dict[str, Any], ckpt, device: str = "cpu"):
    """``rapidrl eval`` loader: the greedy (argmax) policy of a PPO or PPO-LSTM checkpoint.

    Returns ``(act, env_id, env_options)`` where ``act(obs [B, ...]) -> actions [B]``. For the
    LSTM ``act`` is a :class:`RecurrentPolicy` that carries its state from call to call; call
    ``act.reset()`` at each new episode.
    """
    from rapidrl.envs import make_env, resolve_env

    cfg = config_from_dict(PPOConfig, config)
    info = resolve_env(cfg.env)
    options = env_options(cfg, info.is_atari)
    probe = make_env(cfg.env, **options)
    obs_shape, n_actions = tuple(probe.observation_space.shape), int(probe.action_space.n)
    probe.close()
    net = make_policy(cfg, obs_shape, n_actions, device).to(device)
    ckpt.restore(net=net)  # a clear CheckpointError when the weights do not fit
    net.eval()
    if cfg.recurrent:
        return RecurrentPolicy(net, device), cfg.env, options

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits, _ = net(torch.as_tensor(np.asarray(obs), device=device))
        return logits.argmax(-1).cpu().numpy()

    return act, cfg.env, options


# --------------------------------------------------------------------------------------------
# Command line: rapidrl train ppo / rapidrl train ppo-lstm
# --------------------------------------------------------------------------------------------
def parse_ppo_args(
    argv: Sequence[str], prog: str, default_preset: str, presets: dict[str, PPOConfig] = PRESETS
) -> PPOConfig:
    """``--preset NAME`` + field flags -> ``PPOConfig``; ``--resume RUN_DIR`` takes the run's own
    config as the defaults."""
    return parse_with_resume(
        PPOConfig, presets, argv, prog=prog, default_preset=default_preset, algo="ppo"
    )


def _main(argv: Sequence[str], prog: str, default_preset: str, presets) -> int:
    from rapidrl.distributed import RolloutWorkerError, WorkerFailedError

    cfg = parse_ppo_args(argv, prog, default_preset, presets)
    return run_from_cli(train, cfg, prog, (RolloutWorkerError, WorkerFailedError))


def main_ppo(argv: Sequence[str]) -> int:
    """``rapidrl train ppo [--preset fast|ppo|ppo-lstm|cartpole] [--FIELD VALUE ...]``
    (default: fast)."""
    return _main(argv, "rapidrl train ppo", "fast", PRESETS)


def main_ppo_lstm(argv: Sequence[str]) -> int:
    """``rapidrl train ppo-lstm [--preset NAME] [--FIELD VALUE ...]``: PPO with the LSTM on in
    every preset (default: ppo-lstm)."""
    return _main(argv, "rapidrl train ppo-lstm", "ppo-lstm", LSTM_PRESETS)
