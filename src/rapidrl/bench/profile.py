"""``rapidrl bench profile``: where one update's time goes, on this machine.

Builds a trainer exactly as ``rapidrl train ALGO`` does (its :class:`rapidrl.train.runner.
Algorithm`: learner, local source, iteration), runs ``--warmup`` iterations, then ``--updates``
measured ones, and prints per update (medians):

- wall time by phase, each phase's own time (a call inside another is counted once, in the
  inner one): the rollout (acting inference ``net.act``/``net.value``; handing actions to the
  envs, ``send`` / ``step``; waiting for them, ``recv``; the rest, bookkeeping), the
  advantages or targets (GAE / Q(lambda), bootstrap values included), the update (forward
  ``evaluate``, ``backward``, optimizer ``step``, the rest: minibatch indexing, gradient
  clipping, the normalizers' statistics);
- CPU seconds of this process and of its env worker processes (emulation and preprocessing run
  there with a process backend), and how busy each core was;
- frames per second.

DQN and Rainbow (``--algo dqn|rainbow``) learn while they act, so their "update" here is a block
of ``--dqn-block`` vector steps and the updates due in it. The replay is first filled to the
preset's ``learning_starts`` (not measured), so the blocks are the steady state of training.
Their phases: acting (``act``, the online net's forward inside it), the env send / wait, the
replay's ``add``, and the updates: replay ``sample`` (index draw and frame gather), the online
and target nets' forward passes, ``backward``, optimizer ``step``, PER's priority write-back,
and the rest (loss, the C51 projection, host-to-device copies); the target sync is in
``count``. SAC (``--algo sac``) alike, after its random prefill: acting (the actor's forward),
the envs, the replay, and per update the actor's, the critics' and the target critics'
forward passes, ``backward`` and the optimizer (the soft target update is in the rest).

No run directory is written. The numbers are this machine's at this moment: run it alone.
``--json F`` keeps the record.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import psutil
import torch

from rapidrl.algos import DEFAULT_PRESETS
from rapidrl.config import ConfigError, parse_config
from rapidrl.hardware import describe, hardware_record

__all__ = ["BenchProfileConfig", "PhaseTimer", "main", "profile"]


@dataclass(frozen=True)
class BenchProfileConfig:
    """Time the phases of a trainer's updates (rollout, advantages, update) and the CPU use of
    every process; arguments after ``--`` go to the trainer (``--preset``, any field)."""

    algo: Literal["ppo", "ppo-lstm", "pqn", "dqn", "rainbow", "sac"] = "ppo"
    """The trainer: rapidrl train ALGO (its local loop)."""
    dqn_block: int = 128
    """dqn/rainbow/sac: vector steps per measured block (with DQN fast's 8 envs and an update
    every 8 agent steps: 128 updates of 64; SAC's 1 env: 128 critic steps)."""
    warmup: int = 1
    """Iterations run before measuring (first-call costs: allocation, oneDNN kernel choice)."""
    updates: int = 4
    """Iterations measured; the table gives their medians."""
    json: str | None = None
    """Also write the record (every iteration's phases, CPU, the config) to this file."""

    def validate(self) -> None:
        if self.warmup < 0 or self.updates < 1:
            raise ConfigError(
                f"--warmup must be >= 0 and --updates >= 1, got {self.warmup}, {self.updates}"
            )
        if self.dqn_block < 1:
            raise ConfigError(f"--dqn-block must be >= 1 vector step, got {self.dqn_block}")


class PhaseTimer:
    """Wall time of wrapped calls by phase, each phase's own time: a wrapped call inside
    another is subtracted from the outer one (``rollout`` then means the rollout's own
    bookkeeping, ``rollout/act`` the inference inside it)."""

    def __init__(self) -> None:
        self.own: dict[str, float] = defaultdict(float)
        self._stack: list[list[Any]] = []  # [name, start, children's time]
        self._undo: list[Callable[[], None]] = []

    def wrap(self, obj: Any, attr: str, phase: str) -> None:
        """Time ``obj.attr(...)`` calls as ``phase`` (nothing if ``obj`` has no ``attr``)."""
        fn = getattr(obj, attr, None)
        if fn is None:
            return
        had = attr in getattr(obj, "__dict__", {})

        def timed(*args: Any, **kwargs: Any) -> Any:
            parent = self._stack[-1][0] if self._stack else None
            if parent is None or "/" in phase:
                name = phase
            elif parent.rsplit("/", 1)[-1] == phase:  # a phase calling itself is one phase
                name = parent
            else:
                name = f"{parent}/{phase}"
            frame = [name, time.perf_counter(), 0.0]
            self._stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                self._stack.pop()
                took = time.perf_counter() - frame[1]
                self.own[name] += took - frame[2]
                if self._stack:
                    self._stack[-1][2] += took

        setattr(obj, attr, timed)
        self._undo.append((lambda: setattr(obj, attr, fn)) if had else (lambda: delattr(obj, attr)))

    def take(self) -> dict[str, float]:
        out, self.own = dict(self.own), defaultdict(float)
        return out

    def restore(self) -> None:
        while self._undo:
            self._undo.pop()()


class _Bar:
    def update(self, *args: Any, **kwargs: Any) -> None:
        pass


class _Session:
    """What an iteration asks of the run loop's session: a progress bar (none here)."""

    bar = _Bar()


def _cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def _processes() -> tuple[psutil.Process, list[psutil.Process]]:
    me = psutil.Process()
    return me, me.children(recursive=True)


def profile(b: BenchProfileConfig, trainer_argv: Sequence[str]) -> dict[str, Any]:
    """Build the trainer, run and measure it (see the module docstring); return the record."""
    from rapidrl.train.loop import (
        keep_freed_memory,
        num_threads,
        probe_env,
        resolve_device,
        restart_env_seed,
    )
    from rapidrl.train.seeding import seed_everything

    dqn = b.algo in ("dqn", "rainbow", "sac")  # replay learners: blocks after the prefill
    if b.algo == "sac":
        from rapidrl.algos.sac.train import algorithm, parse_sac_args

        cfg = parse_sac_args(trainer_argv, prog="rapidrl bench profile -- (sac)")
    elif dqn:
        from rapidrl.algos.dqn.train import algorithm, parse_dqn_args

        cfg = parse_dqn_args(
            trainer_argv, f"rapidrl bench profile -- ({b.algo})", DEFAULT_PRESETS[b.algo]
        )
    elif b.algo == "pqn":
        from rapidrl.algos.pqn.train import algorithm, parse_pqn_args

        cfg = parse_pqn_args(trainer_argv, prog="rapidrl bench profile -- (pqn)")
    else:
        from rapidrl.algos.ppo.train import LSTM_PRESETS, algorithm, parse_ppo_args
        from rapidrl.algos.ppo.train import PRESETS as PPO_PRESETS

        lstm = b.algo == "ppo-lstm"
        cfg = parse_ppo_args(
            trainer_argv,
            f"rapidrl bench profile -- ({b.algo})",
            DEFAULT_PRESETS[b.algo],
            LSTM_PRESETS if lstm else PPO_PRESETS,
        )
    if getattr(cfg, "ray", None) is not None:  # SAC has no Ray loop
        raise ConfigError("bench profile measures the local loop: drop --ray")
    cfg.validate()
    algo = algorithm(cfg)
    device = resolve_device(cfg.device)
    keep_freed_memory()  # as the trainers do
    timer = PhaseTimer()
    iterations = []
    prefill_s = None
    with num_threads(cfg.torch_threads or os.cpu_count() or 1):
        seed_everything(cfg.seed)
        env = probe_env(cfg, algo.label, continuous=algo.continuous, discrete=algo.discrete)
        lrn = algo.learner(cfg, env, device)
        lrn.frame_skip = env.frame_skip  # what start() sets from the run's env (no run dir here)
        source = algo.source(cfg, env, lrn, restart_env_seed(cfg.seed, 0))
        backward = torch.Tensor.backward
        try:
            if algo.start is not None:
                algo.start(lrn, source)  # DQN: its replay
            threads = cfg.torch_threads or os.cpu_count() or 1
            if algo.loop_threads is not None:
                threads = algo.loop_threads(cfg, source)
            torch.set_num_threads(threads)  # the run loop's, as rapidrl train runs it
            session = _Session()
            block = 1
            if dqn:
                block = b.dqn_block
                t0 = time.perf_counter()
                while len(lrn.rb) < cfg.learning_starts:  # the replay's prefill: not measured
                    algo.iterate(lrn, source, session)
                prefill_s = time.perf_counter() - t0
            net = getattr(lrn, "net", None)
            envs = getattr(source, "envs", None)  # DQN's actor processes: none here
            rb = getattr(lrn, "rb", None)
            for obj, attr, phase in (
                (source, "collect", "rollout"),
                (source, "batch", "advantages"),
                (source, "targets", "advantages"),
                (lrn, "train_on_rollout", "update"),
                (net, "act", "act"),
                (net, "value", "act"),
                (lrn, "act", "act"),
                (lrn, "max_q", "act"),
                (envs, "send", "env send"),
                (envs, "step", "env step"),
                (envs, "recv", "env wait"),
                (net, "evaluate", "forward"),
                (lrn.opt, "step", "optimizer"),
                # DQN / Rainbow (absent elsewhere: nothing wrapped)
                (lrn, "update", "update"),
                (lrn, "count", "count"),
                (rb, "add", "replay add"),
                (rb, "sample", "replay sample"),
                (rb, "update_priorities", "PER priorities"),
                (getattr(lrn, "q", None), "forward", "forward online"),
                (getattr(lrn, "q", None), "forward_dist", "forward online"),
                (getattr(lrn, "target", None), "forward", "forward target"),
                (getattr(lrn, "target", None), "forward_dist", "forward target"),
                # SAC (its nets are lrn.net: the actor, the critics, the target critics)
                (getattr(net, "actor", None), "forward", "forward actor"),
                (getattr(net, "critic", None), "forward", "forward critics"),
                (getattr(net, "critic_target", None), "forward", "forward target"),
            ):
                if obj is not None:
                    timer.wrap(obj, attr, phase)
            torch.Tensor.backward = _timed_backward(timer, backward)
            for i in range(b.warmup + b.updates):
                me, workers = _processes()
                cpu0 = (_cpu_seconds(me), sum(_safe_cpu(p) for p in workers))
                cores0 = psutil.cpu_times(percpu=True)
                frames0, t0 = lrn.frames, time.perf_counter()
                updates0 = lrn.counters.updates
                for _ in range(block):
                    algo.iterate(lrn, source, session)
                wall = time.perf_counter() - t0
                phases = timer.take()
                me, workers = _processes()
                cpu1 = (_cpu_seconds(me), sum(_safe_cpu(p) for p in workers))
                cores1 = psutil.cpu_times(percpu=True)
                if i < b.warmup:
                    continue
                iterations.append(
                    {
                        "wall_s": wall,
                        "frames": lrn.frames - frames0,
                        "updates": lrn.counters.updates - updates0,
                        "phases": phases,
                        "cpu_main_s": cpu1[0] - cpu0[0],
                        "cpu_workers_s": cpu1[1] - cpu0[1],
                        "core_busy": [_busy(a, z) for a, z in zip(cores0, cores1)],
                    }
                )
        finally:
            torch.Tensor.backward = backward
            timer.restore()
            source.close()
    return {
        "config": asdict(b),
        "trainer": {k: v for k, v in vars(cfg).items() if not k.startswith("_")},
        "trainer_argv": list(trainer_argv),
        "cpu": describe(),
        "hardware": hardware_record(),
        "iterations": iterations,
        "prefill_s": prefill_s,
        "summary": summarize(iterations),
    }


def _timed_backward(timer: PhaseTimer, backward: Callable) -> Callable:
    holder = type("_Backward", (), {"backward": staticmethod(backward)})
    timer.wrap(holder, "backward", "backward")
    return lambda self, *a, **k: holder.backward(self, *a, **k)


def _safe_cpu(proc: psutil.Process) -> float:
    try:
        return _cpu_seconds(proc)
    except psutil.Error:  # ended between the listing and the read
        return 0.0


def _busy(a: Any, z: Any) -> float:
    """How busy one core was between two ``psutil.cpu_times`` readings (guest time is already
    in user time on Linux)."""

    def total(t: Any) -> float:
        return sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)

    def idle(t: Any) -> float:
        return t.idle + getattr(t, "iowait", 0.0)

    spent = total(z) - total(a)
    return 1.0 - (idle(z) - idle(a)) / spent if spent > 0 else float("nan")


def summarize(iterations: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the measured iterations: wall, frames/s, each phase, CPU, core busy."""
    if not iterations:
        return {}
    med = statistics.median
    names = sorted({k for it in iterations for k in it["phases"]})
    phases = {k: med(it["phases"].get(k, 0.0) for it in iterations) for k in names}
    cores = len(iterations[0]["core_busy"])
    wall = med(it["wall_s"] for it in iterations)
    return {
        "wall_s": wall,
        "frames": med(it["frames"] for it in iterations),
        "updates": med(it.get("updates", 1) for it in iterations),
        "frames_per_second": med(it["frames"] / it["wall_s"] for it in iterations),
        "phases_s": phases,
        # Per update, then the median: the medians of the parts need not add up to the median
        # of the whole, and their difference could come out negative.
        "unaccounted_s": med(it["wall_s"] - sum(it["phases"].values()) for it in iterations),
        "cpu_main_s": med(it["cpu_main_s"] for it in iterations),
        "cpu_workers_s": med(it["cpu_workers_s"] for it in iterations),
        "core_busy": [med(it["core_busy"][c] for it in iterations) for c in range(cores)],
    }


def format_table(result: dict[str, Any]) -> str:
    s = result["summary"]
    wall = s["wall_s"]
    unit = "block" if result["config"]["algo"] in ("dqn", "rainbow", "sac") else "update"
    lines = [
        f"bench profile: {result['config']['algo']} {' '.join(result['trainer_argv'])}",
        f"{result['cpu']}; medians of {len(result['iterations'])} {unit}s",
        f"{s['frames']:,.0f} frames a {unit} in {wall:.3f} s: "
        f"{s['frames_per_second']:,.0f} frames/s",
        "",
        *(
            [
                f"{s['updates']:,.0f} updates a block: {wall / max(s['updates'], 1) * 1e3:.1f} ms "
                f"of wall time each (acting and envs included); replay prefilled in "
                f"{result['prefill_s']:.1f} s",
                "",
            ]
            if unit == "block"
            else []
        ),
        f"| phase (own time) | s a {unit} | share |",
        "| --- | --- | --- |",
    ]
    for name, sec in sorted(s["phases_s"].items()):
        lines.append(f"| {name} | {sec:.3f} | {sec / wall:.0%} |")
    lines.append(
        f"| (between phases) | {s['unaccounted_s']:.3f} | {s['unaccounted_s'] / wall:.0%} |"
    )
    lines += [
        "",
        f"CPU an update: this process {s['cpu_main_s']:.2f} s, env workers "
        f"{s['cpu_workers_s']:.2f} s, of {wall * len(s['core_busy']):.2f} core-seconds; cores busy "
        + ", ".join(f"{b:.0%}" for b in s["core_busy"]),
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``rapidrl bench profile [--algo ppo] [--updates 4] [-- TRAINER ARGS]``"""
    from rapidrl.train.launch import split_extra

    argv = list(sys.argv[1:] if argv is None else argv)
    own, extra = split_extra(argv)
    b = parse_config(BenchProfileConfig, {}, own, prog="rapidrl bench profile")
    b.validate()
    result = profile(b, extra)
    print(format_table(result))
    if b.json:
        with open(b.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
        print(f"wrote {b.json}")
    return 0
