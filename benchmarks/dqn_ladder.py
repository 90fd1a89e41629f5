"""``python benchmarks/dqn_ladder.py``: the reference speed-up ladder of DQN training, measured in one run.

Each rung is *real training* with the rapidrl trainer (``rapidrl.algos.dqn.train``): the replay
is prefilled with ``--learning-starts`` transitions, updates run, and after ``--warmup`` seconds of
updates the training frames/s are measured over ``--seconds``. The learning hyperparameters are
the reference's (``--preset dqn``: replay ratio 32 transitions per agent step, Adam 1e-4, ...);
each rung changes only *how* the work is done, and ratios are to the baseline measured in the
same run. ``thr`` is the learner's torch threads: all cores in-process, one core fewer per actor
process. Measure on a quiet machine: contended OpenMP threads stall (other load makes the
2-thread in-process rungs look far worse than they are; ``--torch-threads 1`` is fair there):

1. ``baseline``: 1 env, 1 process, one update of 32 after every agent step.
2. ``k=2..6``: k agent steps, then one update of 32 x k (same replay ratio).
3. ``+actor``: k = ``--k``, acting in a separate process (shared-memory ring, weight sync).
4. ``+vector``: plus ``--num-envs`` envs in the actor via ``make_vec`` (``--backend``).
5. ``+non-blocking`` (CUDA only): pinned host batches, non-blocking copies (off in rungs 1-4).
6. ``+layout``: channels-last convolutions and fused Adam (the same math, faster kernels).
7. ``+bf16``: the conv torso under bf16 autocast (weights, Adam, heads, loss stay float32); only
   where the learner's device multiplies bf16 natively (a CPU with AMX, a bf16 GPU).
8. ``in-process``: rung 7 with acting moved back into the learner process (the envs stay in
   the vector env's worker processes): on few cores an actor process takes CPU the learner needs.

``fast`` (optional, ``--rungs`` includes it by default): the ``fast`` preset, for reference; its
replay ratio is 8, not 32, so its frames/s are not comparable with the ladder's. Frames are
emulator frames (4 per agent step on Atari); ``steps/s`` are agent steps (Lapan's
"observations per second").
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rapidrl.config import ConfigError, parse_or_report

__all__ = ["BenchDQNConfig", "Rung", "ladder", "main", "measure_rung"]

PROG = "python benchmarks/dqn_ladder.py"


@dataclass(frozen=True)
class BenchDQNConfig:
    """Measure DQN training frames/s along the reference speed-up ladder (one run, ratios to its
    own baseline)."""

    env: str = "pong"
    """Env id or alias."""
    seconds: float = 30.0
    """Seconds measured per rung (after the prefill and the warm-up)."""
    warmup: float = 5.0
    """Seconds of training (updates running) before each rung's measurement starts."""
    learning_starts: int = 2_000
    """Replay prefill per rung (the reference's 10k only lengthens the bench)."""
    ks: str = "1,2,3,4,5,6"
    """Comma-separated steps-per-update values of the k ladder."""
    k: int = 4
    """Steps per update of the actor and vector rungs (the reference settles on 4)."""
    num_envs: int = 4
    """Envs of the vector rung."""
    backend: str = "auto"
    """Vector backend of the vector rung (auto: autotuned layout, else hybrid)."""
    rungs: str = "baseline,k,actor,vector,nonblocking,layout,bf16,inprocess,fast"
    """Comma-separated subset of rungs: baseline, k, actor, vector, nonblocking, layout, bf16,
    inprocess, fast."""
    torch_threads: int = 0
    """Learner threads (0: the trainer's default)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Learner device."""
    seed: int = 1
    """Seed of every rung."""
    json: str | None = None
    """Write the records and the table to this JSON file."""
    png: str | None = None
    """Write a bar chart of frames/s per rung to this PNG file."""

    def k_list(self) -> list[int]:
        try:
            out = [int(x) for x in self.ks.replace(" ", "").split(",") if x]
        except ValueError:
            raise ConfigError(
                f"--ks must be comma-separated ints like 1,2,4, got {self.ks!r}"
            ) from None
        if not out or min(out) < 1:
            raise ConfigError(f"--ks needs ints >= 1, got {self.ks!r}")
        return out

    def rung_set(self) -> set[str]:
        names = {x.strip() for x in self.rungs.split(",") if x.strip()}
        known = {
            "baseline", "k", "actor", "vector", "nonblocking", "layout", "bf16", "inprocess", "fast"
        }  # fmt: skip
        if not names or names - known:
            raise ConfigError(
                f"--rungs: unknown {sorted(names - known)}; choose from {sorted(known)}"
            )
        return names

    def validate(self) -> None:
        self.k_list()
        self.rung_set()
        if self.seconds <= 0 or self.warmup < 0:
            raise ConfigError("--seconds must be > 0 and --warmup >= 0")
        if self.k < 1 or self.num_envs < 1 or self.learning_starts < 1:
            raise ConfigError("--k, --num-envs and --learning-starts must be >= 1")


@dataclass(frozen=True)
class Rung:
    name: str
    description: str
    cfg: Any  # DQNConfig
    comparable: bool = True


def ladder(b: BenchDQNConfig, cuda: bool) -> list[Rung]:
    """The rungs to measure, in order."""
    from rapidrl.algos.dqn.config import PRESETS
    from rapidrl.nets.torso import native_bf16

    common = dict(
        env=b.env,
        learning_starts=b.learning_starts,
        seed=b.seed,
        stop_at_score=None,
        max_frames=10**12,
        checkpoint_every_seconds=1e9,
        log_every_seconds=0.5,
        tensorboard=False,
        no_progress=True,
        torch_threads=b.torch_threads,
        device=b.device,
        pin_memory=False,
        non_blocking=False,
    )
    ref = dataclasses.replace(PRESETS["dqn"], **common)
    want = b.rung_set()
    rungs: list[Rung] = []
    if "baseline" in want:
        rungs.append(Rung("baseline", "1 env, 1 process, batch 32 every step", ref))
    if "k" in want:
        for k in b.k_list():
            if k == 1 and "baseline" in want:
                continue
            rungs.append(
                Rung(
                    f"k={k}",
                    f"{k} steps, then one batch of {32 * k}",
                    dataclasses.replace(ref, steps_per_update=k),
                )
            )
    actor = dataclasses.replace(ref, steps_per_update=b.k, actor_processes=1)
    if "actor" in want:
        rungs.append(Rung("+actor", f"k={b.k} + separate actor process", actor))
    vector = dataclasses.replace(actor, num_envs=b.num_envs, backend=b.backend)
    if "vector" in want:
        rungs.append(
            Rung("+vector", f"+ {b.num_envs} envs in the actor ({b.backend} vector env)", vector)
        )
    last = vector
    if cuda:
        last = dataclasses.replace(vector, pin_memory=True, non_blocking=True)
        if "nonblocking" in want:
            rungs.append(Rung("+non-blocking", "+ pinned batches, non-blocking copies", last))
    last = dataclasses.replace(last, channels_last=True, fused_adam=True)
    if "layout" in want:
        rungs.append(Rung("+layout", "+ channels-last convs, fused Adam", last))
    device = "cuda" if cuda else "cpu"
    if native_bf16(device):
        last = dataclasses.replace(last, precision="bf16")
        if "bf16" in want:
            rungs.append(Rung("+bf16", f"+ conv torso in bf16 ({device} has native bf16)", last))
    elif "bf16" in want:
        print(f"  skipping +bf16: this {device} has no native bf16 (no AMX / no bf16 GPU)")
    if "inprocess" in want:
        rungs.append(
            Rung(
                "in-process",
                "the rung above, acting in the learner process (envs in workers)",
                dataclasses.replace(last, actor_processes=0),
            )
        )
    if "fast" in want:
        fast = dataclasses.replace(
            PRESETS["fast"], **{**common, "pin_memory": True, "non_blocking": True}
        )
        rungs.append(Rung("fast", "the fast preset (replay ratio 8: not comparable)", fast, False))
    return rungs


def measure_rung(rung: Rung, seconds: float, warmup: float, log=print) -> dict[str, Any]:
    """Train with ``rung.cfg`` until ``warmup + seconds`` after the first update; frames/s over
    the last ``seconds``."""
    from rapidrl.algos.dqn.train import train
    from rapidrl.train.loop import cpu_count

    rows: list[dict[str, float]] = []
    state: dict[str, float | None] = {"t_first": None, "t0": None}

    def on_log(ev) -> bool:
        r = ev.row
        rows.append(
            {
                "seconds": r["seconds"],
                "frames": ev.frames,
                "steps": r["steps"],
                "updates": r["updates"],
                "update_ms": r["update_ms"],
                "policy_lag": r["policy_lag"],
            }
        )
        if r["updates"] > 0 and state["t_first"] is None:
            state["t_first"] = r["seconds"]
        if state["t_first"] is not None and state["t0"] is None:
            if r["seconds"] >= state["t_first"] + warmup:
                state["t0"] = r["seconds"]
        return state["t0"] is not None and r["seconds"] >= state["t0"] + seconds

    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rapidrl-bench-dqn-") as d:
        cfg = dataclasses.replace(rung.cfg, run_dir=os.path.join(d, "run"))
        train(cfg, on_log=on_log)
    window = [r for r in rows if state["t0"] is not None and r["seconds"] >= state["t0"]]
    if len(window) < 2:
        raise RuntimeError(f"rung {rung.name}: no measurement window (training too short?)")
    a, b = window[0], window[-1]
    dt = b["seconds"] - a["seconds"]
    ums = [r["update_ms"] for r in window[1:] if r["update_ms"] == r["update_ms"]]
    rec = {
        "rung": rung.name,
        "description": rung.description,
        "comparable": rung.comparable,
        "steps_per_update": rung.cfg.steps_per_update,
        "batch": rung.cfg.update_batch,
        "num_envs": rung.cfg.num_envs,
        "actor_processes": rung.cfg.actor_processes,
        "learner_threads": rung.cfg.torch_threads or max(1, cpu_count() - rung.cfg.actor_processes),
        "frames_per_s": (b["frames"] - a["frames"]) / dt,
        "steps_per_s": (b["steps"] - a["steps"]) / dt,
        "updates_per_s": (b["updates"] - a["updates"]) / dt,
        "update_ms": sum(ums) / len(ums) if ums else None,
        "policy_lag": sum(r["policy_lag"] for r in window[1:]) / max(1, len(window) - 1),
        "measured_s": dt,
        "total_s": time.monotonic() - t_start,
    }
    log(
        f"  {rung.name:<14} {rec['frames_per_s']:8.1f} frames/s {rec['steps_per_s']:7.1f} "
        f"steps/s  ({rec['total_s']:.0f} s)"
    )
    return rec


def format_table(records: list[dict[str, Any]]) -> str:
    base = next((r for r in records if r["rung"] == "baseline"), None)
    head = (
        f"{'rung':<14} {'k':>2} {'batch':>5} {'envs':>4} {'act':>3} {'thr':>3} {'frames/s':>9} "
        f"{'steps/s':>8} {'x base':>7} {'upd ms':>7} {'lag':>5}  what"
    )
    lines = [head, "-" * len(head)]
    for r in records:
        ratio = f"{r['frames_per_s'] / base['frames_per_s']:6.2f}x" if base else "    - "
        if not r["comparable"]:
            ratio = "  (n/a)"
        ums = "-" if r["update_ms"] is None else f"{r['update_ms']:.1f}"
        lines.append(
            f"{r['rung']:<14} {r['steps_per_update']:>2} {r['batch']:>5} {r['num_envs']:>4} "
            f"{r['actor_processes']:>3} {r['learner_threads']:>3} {r['frames_per_s']:9.1f} "
            f"{r['steps_per_s']:8.1f} "
            f"{ratio:>7} {ums:>7} {r['policy_lag']:5.1f}  {r['description']}"
        )
    return "\n".join(lines)


def plot(records: list[dict[str, Any]], path: str, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6, 1.1 * len(records)), 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    names = [r["rung"] for r in records]
    fps = [r["frames_per_s"] for r in records]
    colors = ["tab:blue" if r["comparable"] else "tab:gray" for r in records]
    bars = ax.bar(names, fps, color=colors)
    base = next((r["frames_per_s"] for r in records if r["rung"] == "baseline"), None)
    for bar, r in zip(bars, records):
        label = f"{r['frames_per_s']:.0f}"
        if base and r["comparable"]:
            label += f"\n{r['frames_per_s'] / base:.2f}x"
        ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                    va="bottom", fontsize=8)  # fmt: skip
    ax.set_ylabel("training frames/s")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.set_ylim(0, max(fps) * 1.25 if fps else 1)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: Sequence[str] | None = None) -> int:
    """``python benchmarks/dqn_ladder.py [--seconds 30] [--json F] [--png F] ...``; 2 on bad
    input (the message, no traceback)."""
    b = parse_or_report(BenchDQNConfig, sys.argv[1:] if argv is None else argv, PROG, __doc__)
    if b is None:
        return 2
    import torch

    cuda = (b.device == "cuda") or (b.device == "auto" and torch.cuda.is_available())
    rungs = ladder(b, cuda)
    est = len(rungs) * (b.seconds + b.warmup + 15)
    print(f"{len(rungs)} rungs x ~{b.seconds + b.warmup + 15:.0f} s ≈ {est / 60:.1f} min")
    records = []
    for rung in rungs:
        try:
            records.append(measure_rung(rung, b.seconds, b.warmup))
        except Exception as exc:  # one rung that cannot run here is reported, not fatal
            print(f"  {rung.name:<14} FAILED: {type(exc).__name__}: {exc}")
    if not records:
        print("no rung could be measured", file=sys.stderr)
        return 1
    table = format_table(records)
    print()
    print(table)
    info = {
        "env": b.env,
        "device": "cuda" if cuda else "cpu",
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "config": dataclasses.asdict(b),
    }
    if b.json:
        with open(b.json, "w", encoding="utf-8") as f:
            json.dump({"info": info, "records": records, "table": table}, f, indent=2)
        print(f"wrote {b.json}")
    if b.png:
        plot(records, b.png, f"DQN training speed, {b.env} ({info['device']})")
        print(f"wrote {b.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
