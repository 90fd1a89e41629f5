"""What a learner that trains on rollouts (PPO, PQN) keeps beside its network and optimizer, and
how it is checkpointed and restored, written once.

:class:`RolloutLearner` holds the action-sampling and minibatch generators, the counters (a dict:
``steps``, ``updates``, ``grad_steps`` and the metric sums ``acc`` since the last row), the
row/checkpoint cadences, the episode tracker and the run clock. A subclass builds ``net`` and
``opt``, sets ``algo`` and ``resume_ignore_fields``, and adds its update step and metrics row.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import torch

from rapidrl.train.checkpoint import Checkpointer
from rapidrl.train.loop import Every
from rapidrl.train.metrics import EpisodeTracker, RunClock
from rapidrl.train.run import RunDir
from rapidrl.train.seeding import seed_of

__all__ = ["RolloutLearner"]


class RolloutLearner:
    """Run state of a rollout learner (see the module docstring). Build it after
    ``seed_everything(cfg.seed)``, then call :meth:`start` once with the run directory: fresh
    counters, or everything restored from the newest checkpoint."""

    algo: str
    """The algorithm name its checkpoints carry."""
    resume_ignore_fields: tuple[str, ...]
    """Config fields that may change on resume without changing what a checkpoint means."""
    net: torch.nn.Module
    opt: torch.optim.Optimizer

    def __init__(self, cfg: Any, device: torch.device, acc: dict[str, float]):
        self.cfg, self.device = cfg, torch.device(device)
        # One generator per consumer: acting draws on the acting device, shuffles on the CPU.
        self.act_gen = torch.Generator(device=self.device).manual_seed(seed_of(cfg.seed, 1))
        self.mb_gen = torch.Generator().manual_seed(seed_of(cfg.seed, 2))
        self.c: dict[str, Any] = {
            "steps": 0,  # agent steps, all envs
            "updates": 0,  # rollouts collected and trained on
            "grad_steps": 0,
            "acc": acc,  # sums since the last metrics row
        }
        self.log_every = Every(cfg.log_every_seconds, cfg.log_every_frames)
        self.ckpt_every = Every(cfg.checkpoint_every_seconds, cfg.checkpoint_every_frames)
        self.tracker = EpisodeTracker(None, window=cfg.score_window)
        self.clock = RunClock()
        self.checkpointer: Checkpointer | None = None

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
        if resuming:
            state = self.checkpointer.load_latest()  # on the CPU: generator states stay there
            state.restore(net=self.net, optim=self.opt, tracker=self.tracker, clock=self.clock)
            c = copy.deepcopy(state.state["counters"])
            self.log_every.load_state_dict(c.pop("log_every"))
            self.ckpt_every.load_state_dict(c.pop("ckpt_every"))
            self.c.update(c)
            self.act_gen.set_state(state.state["generators"]["act"])
            self.mb_gen.set_state(state.state["generators"]["minibatch"])
            state.restore_rng()
            frames = self.c["steps"] * frame_skip
            print(f"resumed {run.path} at {frames:,} frames", file=sys.stderr)
        self.tracker.stop_at_score = stop_score

    def checkpoint_state(self) -> dict[str, Any]:
        """What a checkpoint holds (the global RNGs are added by the Checkpointer): weights,
        optimizer, tracker, clock, counters with the cadence states, the generators."""
        counters = copy.deepcopy(self.c)
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

    def steps_done(self, session: Any, frame_skip: int, n: int, infos: dict, **bar: Any) -> None:
        """``n`` more agent steps were received (their ``infos``): count them, record the
        episodes that ended, move ``session``'s progress bar (``bar``: extra fields shown)."""
        self.c["steps"] += n
        frames = self.c["steps"] * frame_skip
        self.tracker.update(infos, frames, self.clock.seconds)
        session.bar.update(frames, self.tracker, upd=self.c["updates"], **bar)

    def account(self, stats: dict[str, float], *, rollout_s: float, update_s: float) -> None:
        """Count one trained rollout: updates, ``grad_steps``, and the metric sums of the keys
        ``stats`` shares with ``acc`` (the update's means), rollout and update seconds."""
        c, acc = self.c, self.c["acc"]
        c["updates"] += 1
        c["grad_steps"] += stats["grad_steps"]
        for k, v in stats.items():
            if k in acc and k != "grad_steps":
                acc[k] += v
        acc["n"] += 1
        acc["rollout_s"] += rollout_s
        acc["update_s"] += update_s

    def save(self, frames: int) -> None:
        """An atomic checkpoint at ``frames``."""
        assert self.checkpointer is not None, "start() first"
        self.checkpointer.save(frames, self.checkpoint_state())
