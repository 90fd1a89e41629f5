"""What a learner that trains on rollouts (PPO, PQN) or on a replay of vector observations (SAC)
keeps beside its network and optimizer, and how it is checkpointed and restored, written once.

:class:`RolloutLearner` holds the action-sampling and minibatch generators, the counters
(:class:`RolloutCounters`), the row/checkpoint cadences, the episode tracker and the run clock.
It writes the metrics row (:meth:`RolloutLearner.metrics_row`: the run's columns, the means of
the update's loss terms, the algorithm's own columns). A subclass builds ``net`` and ``opt``, sets
``algo``, ``resume_ignore_fields`` and ``loss_keys``, and adds its update step and its columns
(:meth:`RolloutLearner.algo_columns`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import sys
import time
from typing import Any

import torch

from rapidrl.train.checkpoint import Checkpointer
from rapidrl.train.metrics import EpisodeTracker, RunClock
from rapidrl.train.run import RunDir
from rapidrl.train.seeding import seed_of
from rapidrl.train.session import Every

__all__ = ["RolloutCounters", "RolloutLearner"]


@dataclasses.dataclass
class RolloutCounters:
    """What the schedules depend on, and the metric sums since the last row (saved in every
    checkpoint as the dict :meth:`state_dict` gives)."""

    steps: int = 0  # agent steps, all envs
    updates: int = 0  # rollouts collected and trained on (SAC: critic steps)
    grad_steps: int = 0
    pending: int = 0  # agent steps not yet trained on (SAC's replay ratio; 0 for rollouts)
    acc: dict[str, float] = dataclasses.field(default_factory=dict)  # sums since the last row

    def state_dict(self) -> dict[str, Any]:
        state = {"steps": self.steps, "updates": self.updates, "grad_steps": self.grad_steps}
        if self.pending:  # only where a replay learner has some: rollouts keep the old form
            state["pending"] = self.pending
        state["acc"] = copy.deepcopy(self.acc)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps, self.updates = int(state["steps"]), int(state["updates"])
        self.grad_steps = int(state["grad_steps"])
        self.pending = int(state.get("pending", 0))  # absent: 0
        self.acc = copy.deepcopy(state["acc"])


class RolloutLearner:
    """Run state of a rollout learner (see the module docstring). Build it after
    ``seed_everything(cfg.seed)`` (the network's initialization draws from torch's global
    generator), then call :meth:`start` once with the run directory: fresh counters, or
    everything restored from the newest checkpoint."""

    algo: str
    """The algorithm name its checkpoints carry."""
    resume_ignore_fields: tuple[str, ...]
    """Config fields that may change on resume without changing what a checkpoint means."""
    loss_keys: tuple[str, ...]
    """The update's loss terms: summed over the updates, their means are columns of a row."""
    extra_sums: dict[str, float] = {}
    """More sums a row takes the mean of (in ``counters.acc`` after the loss terms)."""
    net: torch.nn.Module
    opt: torch.optim.Optimizer

    def __init__(self, cfg: Any, device: torch.device):
        self.cfg, self.device = cfg, torch.device(device)
        # One generator per consumer: acting draws on the acting device, shuffles on the CPU.
        self.act_gen = torch.Generator(device=self.device).manual_seed(seed_of(cfg.seed, 1))
        self.mb_gen = torch.Generator().manual_seed(seed_of(cfg.seed, 2))
        self.counters = RolloutCounters(acc=self.zero_acc())
        self.frame_skip = 1  # emulator frames per agent step, set by start()
        self.log_every = Every(cfg.log_every_seconds, cfg.log_every_frames)
        self.ckpt_every = Every(cfg.checkpoint_every_seconds, cfg.checkpoint_every_frames)
        self.tracker = EpisodeTracker(None, window=cfg.score_window)
        self.clock = RunClock()
        self.checkpointer: Checkpointer | None = None

    @classmethod
    def for_env(cls, cfg: Any, env: Any, device: Any) -> Any:
        """The learner for the probe ``env``'s observation shape and actions (a subclass takes
        ``(cfg, obs_shape, n_actions, device)``): what ``Algorithm.learner`` builds."""
        return cls(cfg, env.obs_shape, env.n_actions, device)

    def start(
        self, run: RunDir, *, stop_score: float | None, resuming: bool, frame_skip: int = 1
    ) -> None:
        """Attach the run's checkpoints; when ``resuming``, restore everything from the newest
        one (weights, optimizer, counters, cadences, tracker, clock, every RNG and generator)."""
        self.checkpointer = Checkpointer(
            run.checkpoints,
            algo=self.algo,
            config=self.cfg,
            keep=self.cfg.keep_checkpoints,
            ignore_fields=self.resume_ignore_fields,
        )
        self.frame_skip = frame_skip
        if resuming:
            state = self.checkpointer.load_latest()  # on the CPU: generator states stay there
            state.restore(net=self.net, optim=self.opt, tracker=self.tracker, clock=self.clock)
            counters = state.state["counters"]
            self.log_every.load_state_dict(counters["log_every"])
            self.ckpt_every.load_state_dict(counters["ckpt_every"])
            self.counters.load_state_dict(counters)
            self.act_gen.set_state(state.state["generators"]["act"])
            self.mb_gen.set_state(state.state["generators"]["minibatch"])
            state.restore_rng()
            self.on_restore(state)
            print(f"resumed {run.path} at {self.frames:,} frames", file=sys.stderr)
        self.tracker.stop_at_score = stop_score

    @property
    def frames(self) -> int:
        """Emulator frames so far: agent steps x the frame skip given to :meth:`start`."""
        return self.counters.steps * self.frame_skip

    def checkpoint_state(self) -> dict[str, Any]:
        """What a checkpoint holds (the global RNGs are added by the Checkpointer): weights,
        optimizer, tracker, clock, counters with the cadence states, the generators."""
        counters = self.counters.state_dict()
        counters["log_every"] = self.log_every.state_dict()
        counters["ckpt_every"] = self.ckpt_every.state_dict()
        return {
            "net": self.net,
            "optim": self.opt,
            "tracker": self.tracker,
            "clock": self.clock,
            "counters": counters,
            "generators": {"act": self.act_gen.get_state(), "minibatch": self.mb_gen.get_state()},
        }

    def steps_done(self, session: Any, n: int, infos: dict, **bar: Any) -> None:
        """``n`` more agent steps were received (their ``infos``): count them, record the
        episodes that ended, move ``session``'s progress bar (``bar``: extra fields shown)."""
        self.counters.steps += n
        self.tracker.update(infos, self.frames, self.clock.seconds)
        session.bar.update(self.frames, self.tracker, upd=self.counters.updates, **bar)

    def collect(self, rollout: Any, session: Any) -> tuple[float, float]:
        """One rollout from a local source (``rollout.collect(on_steps)``), its steps counted
        and its episodes recorded as they come (:meth:`steps_done`): ``(rollout_s, end)``, the
        seconds it took and the time it ended (the update's seconds count from there)."""
        t0 = time.perf_counter()
        rollout.collect(functools.partial(self.steps_done, session))
        end = time.perf_counter()
        return end - t0, end

    def episodes_done(self, n: int, returns: Any, lengths: Any) -> None:
        """``n`` more agent steps came from elsewhere (Ray workers) with the ``returns`` and
        ``lengths`` of the episodes that ended in them: count the steps, record the episodes."""
        self.counters.steps += n
        self.tracker.add_episodes(returns, lengths, self.frames, self.clock.seconds)

    def account(self, stats: dict[str, float], *, rollout_s: float, update_s: float) -> None:
        """Count one trained rollout: updates, ``grad_steps``, and the metric sums of the keys
        ``stats`` shares with ``acc`` (the update's means), rollout and update seconds."""
        c, acc = self.counters, self.counters.acc
        c.updates += 1
        c.grad_steps += stats["grad_steps"]
        for k, v in stats.items():
            if k in acc and k != "grad_steps":
                acc[k] += v
        acc["n"] += 1
        acc["rollout_s"] += rollout_s
        acc["update_s"] += update_s

    def zero_acc(self) -> dict[str, float]:
        """The metric sums of a new row: the loss terms, ``extra_sums``, the updates ``n``, and
        the rollout and update seconds."""
        sums = {**dict.fromkeys(self.loss_keys, 0.0), **self.extra_sums}
        return {**sums, "n": 0, "rollout_s": 0.0, "update_s": 0.0}

    def metrics_row(self, frames: int) -> dict[str, Any]:
        """One metrics row at ``frames`` (means since the previous row); resets the sums."""
        c, acc = self.counters, self.counters.acc
        n = acc["n"]
        row = {
            "seconds": self.clock.seconds,
            "fps": self.clock.fps(frames),
            **self.tracker.metrics(),
            **{k: acc[k] / n if n else math.nan for k in self.loss_keys},
            **self.algo_columns(frames),
            "steps": c.steps,
            "updates": c.updates,
            "grad_steps": c.grad_steps,
            "rollout_s": acc["rollout_s"] / n if n else math.nan,
            "update_s": acc["update_s"] / n if n else math.nan,
        }
        c.acc = self.zero_acc()
        return row

    def algo_columns(self, frames: int) -> dict[str, Any]:
        """The algorithm's own columns of the row at ``frames``, after the loss terms' means
        (read before :meth:`metrics_row` resets the sums)."""
        raise NotImplementedError

    def checkpoint_extras(self) -> dict[str, Any]:
        """More of a checkpoint than :meth:`checkpoint_state`, as ``Checkpointer.save`` keywords
        (a replay's ``arrays``, NumPy generators ``np_rng``); none by default."""
        return {}

    def on_restore(self, state: Any) -> None:
        """Restore what :meth:`checkpoint_state` and :meth:`checkpoint_extras` added, from the
        checkpoint ``state`` being resumed (after everything else); nothing by default."""

    def save(self, frames: int) -> None:
        """An atomic checkpoint at ``frames``."""
        assert self.checkpointer is not None, "start() first"
        self.checkpointer.save(frames, self.checkpoint_state(), **self.checkpoint_extras())
