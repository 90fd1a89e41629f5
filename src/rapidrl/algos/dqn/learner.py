"""The DQN-family learner: everything the local loop (:mod:`rapidrl.algos.dqn.train`) and the Ray
loop (:mod:`rapidrl.algos.dqn.ray_loop`) share besides where the transitions come from.

:class:`DQNLearner` holds the online and target Q-networks, Adam, the replay (frames stored once,
n-step returns at sample time, optionally prioritized), the explorer's generator, the counters,
the row/checkpoint cadences, the episode tracker and the run clock. The loops only feed it:
``learner.observe(n)`` after ``n`` new agent steps runs the updates due at the replay ratio (one
update of ``batch_size x steps_per_update`` transitions per ``steps_per_update`` agent steps, after
the prefill) and syncs the target net by agent steps; :meth:`DQNLearner.act` is the epsilon-greedy
policy; :meth:`DQNLearner.metrics_row` and :meth:`DQNLearner.save` write rows and checkpoints;
:meth:`DQNLearner.start` + :meth:`DQNLearner.attach_replay` restore all of it from the newest
checkpoint.
"""

from __future__ import annotations

import copy
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rapidrl.algos.dqn.config import DQNConfig
from rapidrl.algos.dqn.losses import categorical_loss, categorical_target, td_loss, td_target
from rapidrl.buffers import PrioritizedReplayBuffer, ReplayBuffer
from rapidrl.hardware import require_memory
from rapidrl.nets.exploration import epsilon_greedy
from rapidrl.nets.q import QNetwork
from rapidrl.nets.torso import resolve_precision
from rapidrl.train import Checkpointer, EpisodeTracker, RunClock, RunDir
from rapidrl.train.checkpoint import DEFAULT_IGNORE_FIELDS, replay_refill_notice
from rapidrl.train.loop import num_threads
from rapidrl.train.schedules import linear_schedule
from rapidrl.train.session import Every

__all__ = [
    "METRIC_COLUMNS",
    "RESUME_IGNORE_FIELDS",
    "Counters",
    "DQNLearner",
    "make_q_network",
    "net_kwargs",
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
# Pieces: the network, the probe env
# --------------------------------------------------------------------------------------------
def net_kwargs(
    cfg: DQNConfig, obs_shape: tuple[int, ...], n_actions: int, device: torch.device | str = "cpu"
) -> dict[str, Any]:
    """``QNetwork`` keyword arguments for a network that runs on ``device`` (which decides
    ``precision="auto"``)."""
    image = len(tuple(obs_shape)) == 3
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
        "torso_kind": cfg.torso,
        "torso_channels": tuple(cfg.torso_channels),
        "torso_dim": cfg.torso_dim,
        "obs_norm": cfg.obs_norm and image,  # frames only: off Atari the flag does nothing
        "compute_dtype": resolve_precision(cfg.precision, device),
    }


def make_q_network(
    cfg: DQNConfig, obs_shape: tuple[int, ...], n_actions: int, device: torch.device | str = "cpu"
) -> QNetwork:
    """The Q-network a config describes (torso by observation shape; head by the flags), for
    ``device`` (not moved there: call ``.to(device)``)."""
    return QNetwork(**net_kwargs(cfg, obs_shape, n_actions, device))


# --------------------------------------------------------------------------------------------
# Counters
# --------------------------------------------------------------------------------------------
@dataclass
class Counters:
    """Everything the schedules depend on, and the metric sums since the last row (saved in
    every checkpoint, as the dict :meth:`state_dict` gives)."""

    steps: int = 0  # agent steps, all envs
    updates: int = 0
    pending: int = 0  # agent steps since the last update
    synced: int = 0  # target syncs done (steps // target_sync_steps)
    loss_sum: float = 0.0  # since the last metrics row:
    q_sum: float = 0.0
    row_updates: int = 0
    update_seconds: float = 0.0
    lag_sum: float = 0.0  # policy lag (learner updates - acting weights version)
    lag_count: int = 0

    def state_dict(self, log_blocks: int, ckpt_blocks: int) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "updates": self.updates,
            "pending": self.pending,
            "synced": self.synced,
            "logged": log_blocks,  # metrics rows by frames done (frames // log_every_frames)
            "ckpt_block": ckpt_blocks,  # frame-based checkpoints done
            "acc": [self.loss_sum, self.q_sum, self.row_updates, self.update_seconds],
            "lag": [self.lag_sum, self.lag_count],
        }

    def load_state_dict(self, state: dict[str, Any]) -> tuple[int, int]:
        """Restore; return the ``(log, checkpoint)`` cadences' frame blocks."""
        self.steps, self.updates = int(state["steps"]), int(state["updates"])
        self.pending, self.synced = int(state["pending"]), int(state["synced"])
        self.loss_sum, self.q_sum, self.row_updates, self.update_seconds = state["acc"]
        self.lag_sum, self.lag_count = state["lag"]
        return int(state["logged"]), int(state["ckpt_block"])

    def reset_sums(self) -> None:
        self.loss_sum = self.q_sum = self.update_seconds = self.lag_sum = 0.0
        self.row_updates = self.lag_count = 0


# --------------------------------------------------------------------------------------------
# The learner
# --------------------------------------------------------------------------------------------
class DQNLearner:
    """The DQN family's learner-side state and steps (see the module docstring).

    Build it after ``seed_everything(cfg.seed)`` (the networks' initialization draws from torch's
    global generator); then :meth:`start` with the run directory (restores weights, optimizer,
    counters, tracker and clock when resuming) and :meth:`attach_replay` once the number of env
    streams is known (restores the replay and every RNG).
    """

    def __init__(
        self,
        cfg: DQNConfig,
        obs_shape: tuple[int, ...],
        obs_dtype: Any,
        n_actions: int,
        device: torch.device,
    ):
        self.cfg, self.device = cfg, torch.device(device)
        self.obs_shape, self.obs_dtype, self.n_actions = tuple(obs_shape), obs_dtype, n_actions
        # Before the run directory exists: a replay that cannot fit stops the start, not the run.
        require_memory(
            ReplayBuffer.nbytes_for(
                cfg.buffer_size, self.obs_shape, num_envs=cfg.num_envs, **self._store_layout()
            ),
            f"the replay (--buffer-size {cfg.buffer_size} of {self.obs_shape} observations)",
            "lower --buffer-size",
        )
        self.q = make_q_network(cfg, obs_shape, n_actions, self.device).to(self.device)
        self.target = copy.deepcopy(self.q)
        self.target.requires_grad_(False)
        self.opt = torch.optim.Adam(
            self.q.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=cfg.fused_adam
        )
        self.act_rng = np.random.default_rng([cfg.seed, 1])
        self.counters = Counters()
        self.frame_skip = 1  # emulator frames per agent step, set by start()
        self.log_every = Every(cfg.log_every_seconds, cfg.log_every_frames)
        self.ckpt_every = Every(cfg.checkpoint_every_seconds, cfg.checkpoint_every_frames)
        self.tracker = EpisodeTracker(None, window=cfg.score_window)
        self.clock = RunClock()
        self.checkpointer: Checkpointer | None = None
        self.rb: ReplayBuffer | None = None
        self.on_update: Callable[[int], None] | None = None
        """Called with the update count after every update (weight publishing)."""
        self._restored: Any = None  # the checkpoint being resumed, until attach_replay
        self._loss_fn = _try_compile(self._loss) if cfg.compile else self._loss
        self._on_cuda = self.device.type == "cuda"
        self._stats = torch.zeros(2, dtype=torch.float64, device=self.device)
        self._host: _HostBatches | None = None

    # --- run state ------------------------------------------------------------------------
    def start(
        self, run: RunDir, *, stop_score: float | None, resuming: bool, frame_skip: int
    ) -> None:
        """Attach the run's checkpoints; when ``resuming``, restore the weights, Adam, counters,
        cadences, tracker and clock from the newest one (the replay and the RNGs follow in
        :meth:`attach_replay`)."""
        self.checkpointer = Checkpointer(
            run.checkpoints,
            algo="dqn",
            config=self.cfg,
            keep=self.cfg.keep_checkpoints,
            ignore_fields=RESUME_IGNORE_FIELDS,
        )
        self.frame_skip = frame_skip
        if resuming:
            state = self.checkpointer.load_latest()
            state.restore(
                q=self.q, target=self.target, optim=self.opt, tracker=self.tracker,
                clock=self.clock,
            )  # fmt: skip
            log_blocks, ckpt_blocks = self.counters.load_state_dict(state.state["counters"])
            self.log_every.load_state_dict({"blocks": log_blocks})
            self.ckpt_every.load_state_dict({"blocks": ckpt_blocks})
            self._restored = state
            print(f"resumed {run.path} at {self.frames:,} frames", file=sys.stderr)
        self.tracker.stop_at_score = stop_score

    @property
    def frames(self) -> int:
        """Emulator frames so far: agent steps x the frame skip given to :meth:`start`."""
        return self.counters.steps * self.frame_skip

    def _store_layout(self) -> dict[str, Any]:
        """How the replay stores observations: the memory check and the buffer use the same."""
        return {"stacked": len(self.obs_shape) == 3, "obs_dtype": self.obs_dtype}

    def attach_replay(self, streams: int) -> ReplayBuffer:
        """Make the replay for ``streams`` env streams (one per env the transitions come from);
        when resuming, load the saved replay (if it fits: a replay saved with another number of
        streams is dropped with a warning and refills) and restore every RNG."""
        cfg = self.cfg
        buffer_cls = PrioritizedReplayBuffer if cfg.prioritized else ReplayBuffer
        self.rb = buffer_cls(
            cfg.buffer_size,
            self.obs_shape,
            num_envs=streams,
            **self._store_layout(),
            gamma=cfg.gamma,
            n_step=cfg.n_step,
            seed=[cfg.seed, 2],
            **({"alpha": cfg.per_alpha, "normalize": cfg.per_weights} if cfg.prioritized else {}),
        )
        self._host = _HostBatches(
            self.rb,
            cfg.update_batch,
            pinned=self._on_cuda and cfg.pin_memory,
            slots=2 if self._on_cuda else 1,
        )
        state, self._restored = self._restored, None
        if state is not None:
            arrays = state.load_arrays()
            if not arrays:
                print(replay_refill_notice(cfg.learning_starts, cfg.buffer_size), file=sys.stderr)
            else:
                try:
                    self.rb.load_state_dict(arrays)
                    self.rb.truncate_streams()  # the envs restart: the stored episodes end here
                except ValueError as exc:  # another number of streams
                    warnings.warn(
                        f"the saved replay does not fit this run's {streams} env streams "
                        f"({exc}); starting with an empty replay",
                        stacklevel=2,
                    )
            state.restore_rng({"act": self.act_rng, "replay": self.rb.rng})
        return self.rb

    def save(self, frames: int) -> None:
        """An atomic checkpoint at ``frames`` (with the replay when ``save_replay``)."""
        assert self.checkpointer is not None and self.rb is not None, "start/attach_replay first"
        self._flush_stats()
        counters = self.counters.state_dict(self.log_every.blocks, self.ckpt_every.blocks)
        self.checkpointer.save(
            frames,
            {
                "q": self.q,
                "target": self.target,
                "optim": self.opt,
                "tracker": self.tracker,
                "clock": self.clock,
                "counters": counters,
            },
            arrays=self.rb.state_dict() if self.cfg.save_replay else None,
            np_rng={"act": self.act_rng, "replay": self.rb.rng},
        )

    # --- acting ---------------------------------------------------------------------------
    def epsilon(self) -> float:
        """The exploration rate at the current step count (linear decay)."""
        cfg = self.cfg
        return linear_schedule(
            cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_decay_steps, self.counters.steps
        )

    def act(self, obs: np.ndarray, epsilon: float) -> np.ndarray:
        """Epsilon-greedy actions ``[B]`` for observations ``[B, ...]`` (noisy nets: new noise)."""

        def greedy() -> np.ndarray:
            if self.cfg.noisy:
                self.q.reset_noise()
            # A small batch gains nothing from more threads on CPU, and contended threads stall.
            with num_threads(1), torch.no_grad():
                return self.q(torch.from_numpy(obs).to(self.device)).argmax(1).cpu().numpy()

        return epsilon_greedy(self.act_rng, epsilon, self.n_actions, len(obs), greedy)

    # --- learning -------------------------------------------------------------------------
    def observe(self, new_steps: int) -> None:
        """Count ``new_steps`` more agent steps (already added to the replay): run the updates
        now due (none before the prefill), then sync the target net if a sync is due."""
        self.learn(new_steps)
        self.count(new_steps)

    def learn(self, new_steps: int) -> None:
        """The updates due after ``new_steps`` more agent steps (none before the prefill); the
        steps are not counted (:meth:`count`): the local loop learns while its envs step."""
        cfg, c, rb = self.cfg, self.counters, self.rb
        if len(rb) < cfg.learning_starts or rb.num_sampleable == 0:
            return
        c.pending += new_steps
        while c.pending >= cfg.steps_per_update:
            self.update()
            c.pending -= cfg.steps_per_update
            if self.on_update is not None:
                self.on_update(c.updates)

    def count(self, new_steps: int) -> None:
        """Count ``new_steps`` agent steps; sync the target net by agent steps."""
        c = self.counters
        c.steps += new_steps
        if c.steps // self.cfg.target_sync_steps > c.synced:
            self.target.load_state_dict(self.q.state_dict())
            c.synced = c.steps // self.cfg.target_sync_steps

    def add_lag(self, lag: float) -> None:
        """One acting batch's policy lag (updates since its weights) for the metrics row."""
        self.counters.lag_sum += lag
        self.counters.lag_count += 1

    def beta(self) -> float:
        """The PER importance-sampling exponent at the current step count."""
        return linear_schedule(
            self.cfg.per_beta0, 1.0, self.cfg.per_beta_steps, self.counters.steps
        )

    def replay_window(self) -> int | None:
        """Transitions the sampler draws from at the current step count (None: the whole
        replay): --buffer-size-early until --buffer-grow-step, then one more per agent step."""
        cfg = self.cfg
        if not cfg.buffer_size_early:
            return None
        grown = max(0, self.counters.steps - cfg.buffer_grow_step)
        return min(cfg.buffer_size, cfg.buffer_size_early + grown)

    def _loss(self, obs, actions, rewards, discounts, next_obs, weights):
        cfg, q, target = self.cfg, self.q, self.target
        with torch.no_grad():
            next_online = q(next_obs) if cfg.double else None
            if cfg.distributional:
                _, next_logp = target.forward_dist(next_obs)
                target_probs = categorical_target(
                    next_logp, rewards, discounts, q.support, next_online
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

    def update(self) -> None:
        """One gradient step on ``batch_size x steps_per_update`` sampled transitions (PER:
        weighted, priorities written back)."""
        cfg, rb, c, device = self.cfg, self.rb, self.counters, self.device
        t0 = time.perf_counter()
        nb = self._on_cuda and cfg.non_blocking
        out = self._host.next()
        if cfg.prioritized:
            batch = rb.sample(cfg.update_batch, out=out, beta=self.beta())
        else:
            batch = rb.sample(cfg.update_batch, out=out, window=self.replay_window())
        obs = torch.from_numpy(batch["obs"]).to(device, non_blocking=nb)
        next_obs = torch.from_numpy(batch["next_obs"]).to(device, non_blocking=nb)
        self._host.record()
        actions = torch.from_numpy(batch["actions"]).to(device, non_blocking=nb)
        rewards = torch.from_numpy(batch["rewards"]).to(device, non_blocking=nb)
        discounts = torch.from_numpy(batch["discounts"]).to(device, non_blocking=nb)
        weights = None
        if cfg.prioritized:
            weights = torch.from_numpy(batch["weights"]).to(device, non_blocking=nb)
        if self.q.obs_rms is not None:  # the statistics of the frames the net learns from
            self.q.obs_rms.update(obs)
        if cfg.noisy:
            self.q.reset_noise()
            self.target.reset_noise()
        loss, priority, q_mean = self._loss_fn(obs, actions, rewards, discounts, next_obs, weights)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.q.parameters(), cfg.max_grad_norm)
        self.opt.step()
        if cfg.prioritized:
            rb.update_priorities(batch["indices"], priority.cpu().numpy())
        c.updates += 1
        if self._on_cuda:  # accumulate on the device: no sync per update
            self._stats.add_(torch.stack((loss.detach(), q_mean)).double())
        else:
            c.loss_sum += loss.item()
            c.q_sum += q_mean.item()
        c.row_updates += 1
        c.update_seconds += time.perf_counter() - t0

    def _flush_stats(self) -> None:
        """Move the loss/Q sums kept on a CUDA device into the counters."""
        if self._on_cuda:
            loss_sum, q_sum = self._stats.tolist()
            self.counters.loss_sum += loss_sum
            self.counters.q_sum += q_sum
            self._stats.zero_()

    # --- metrics --------------------------------------------------------------------------
    def metrics_row(self, frames: int, epsilon: float) -> dict[str, Any]:
        """One metrics row at ``frames`` (means since the previous row); resets the sums."""
        self._flush_stats()
        c, n = self.counters, self.counters.row_updates
        row = {
            "seconds": self.clock.seconds,
            "fps": self.clock.fps(frames),
            **self.tracker.metrics(),
            "loss": c.loss_sum / n if n else math.nan,
            "q_mean": c.q_sum / n if n else math.nan,
            "epsilon": epsilon,
            "policy_lag": c.lag_sum / c.lag_count if c.lag_count else 0.0,
            "steps": c.steps,
            "updates": c.updates,
            "buffer": len(self.rb),
            "update_ms": 1000 * c.update_seconds / n if n else math.nan,
        }
        if self.cfg.prioritized:
            row["beta"] = self.beta()
        if self.cfg.buffer_size_early:
            row["replay_window"] = self.replay_window()
        c.reset_sums()
        return row


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
