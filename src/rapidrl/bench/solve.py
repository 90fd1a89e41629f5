"""``rapidrl bench solve``: wall time and frames to solve a game, over several seeds.

A one-game suite with a stop score: :mod:`rapidrl.bench.atari`'s runner trains ``rapidrl train
ALGO --preset PRESET --env ENV --seed S --stop-at-score auto --max-minutes M`` for each seed, one
after the other (each alone on the machine: a second run beside it would halve its speed), each
in its own process with a wall-clock limit, into ``OUT/ENV/ALGO-PRESET/seed-S/`` (its usual run
directory, ``seed-S.log`` its output and ``seed-S.cmd.json`` its recipe beside it). Then it
writes into ``--out-dir``:

- ``solve.json``: per seed solved / minutes / frames to solve, frames/s, the best mean, the time
  split between rollout and update where the trainer logs it; the median and the spread; the
  command line; the CPU (:mod:`rapidrl.hardware`);
- ``solve.md``: the same as a table, ready for a README;
- ``solve.png``: every seed's ``return_mean_100`` against wall-clock minutes and against frames;
- and the suite's own ``suite.json`` / ``suite.md``.

A seed that does not solve within ``--max-minutes`` counts as not solved (its time is reported
as "> budget"; one stopped before its budget, by hand or by ``--max-frames``, as "not solved
(REASON at MINUTES)"); the median is then over all seeds with unsolved ones as +inf (a median of
"> budget" says so). Extra arguments after ``--`` go to the trainer as they are, e.g.
``rapidrl bench solve --algo pqn --preset fast --seeds 1,2,3 -- --obs-size 64``.

Run again with the same ``--out-dir`` (after a stop, or with more seeds), it goes on as a suite
does: a seed finished with the same recipe (the trainer command but for its run dir and time
budget) is kept; one stopped mid-run resumes from its checkpoint (the run's clock survives
resume, so its minutes to solve count training time only); a run dir of another recipe is
refused before anything runs. A kept seed that solved after this bench's budget counts as not
solved. A seed whose trainer was stopped from outside (Ctrl-C, or a signal to the trainer
alone) stops the bench there, as Ctrl-C does; the same command resumes it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from rapidrl.algos import default_preset
from rapidrl.bench.atari import BenchAtariConfig, check_recipes, run_locally, write_results
from rapidrl.config import ConfigError
from rapidrl.hardware import describe, hardware_record
from rapidrl.train.launch import read_curve, split_extra
from rapidrl.train.lock import RunLock
from rapidrl.train.plots import save_png

__all__ = [
    "BenchSolveConfig",
    "bench_solve",
    "format_table",
    "main",
    "summarize",
    "within_budget",
]


@dataclass(frozen=True)
class BenchSolveConfig:
    """Train an algorithm/preset on a game for several seeds, one at a time, to its stop score
    or a time budget; write the table (median and spread of minutes and frames to solve,
    frames/s, CPU) and one plot of all curves against wall time and frames."""

    algo: Literal["ppo", "ppo-lstm", "dqn", "rainbow", "pqn", "sac"] = "ppo"
    """The trainer: rapidrl train ALGO."""
    preset: str | None = None
    """Its preset (--preset); None: the one ``rapidrl train ALGO --env ENV`` takes (ppo: lean,
    mujoco on an env with continuous actions)."""
    env: str = "pong"
    """Env id or alias."""
    seeds: str = "1,2,3"
    """Comma-separated seeds, run one after the other."""
    max_minutes: float = 45.0
    """Wall-clock budget of each run (the trainer's --max-minutes); a run that has not solved by
    then counts as not solved."""
    max_frames: int | None = None
    """Frame budget of each run (the trainer's --max-frames); None: the preset's."""
    out_dir: str = "bench_out/solve"
    """Where the runs, solve.json, solve.md and solve.png go."""
    grace_minutes: float = 5.0
    """A run still alive this long after its budget (a hang: the trainer stops itself at the
    budget) is killed and reported as failed."""

    def validate(self) -> None:
        seeds = self.seed_list()
        if not seeds:
            raise ConfigError("--seeds needs at least one seed, e.g. --seeds 1,2,3")
        if len(set(seeds)) != len(seeds):
            raise ConfigError(f"--seeds has a seed twice: {self.seeds}")
        if self.max_minutes <= 0:
            raise ConfigError(f"--max-minutes must be > 0, got {self.max_minutes}")
        if self.max_frames is not None and self.max_frames < 1:
            raise ConfigError(f"--max-frames must be >= 1 or None, got {self.max_frames}")
        if self.grace_minutes <= 0:
            raise ConfigError(f"--grace-minutes must be > 0, got {self.grace_minutes}")

    def seed_list(self) -> list[int]:
        try:
            return [int(s) for s in self.seeds.split(",") if s.strip()]
        except ValueError as exc:
            raise ConfigError(
                f"--seeds must be comma-separated integers, e.g. 1,2,3; got {self.seeds!r}"
            ) from exc

    def suite(self) -> BenchAtariConfig:
        """The one-game suite this bench runs: every seed to the stop score or the budget."""
        return BenchAtariConfig(
            games=self.env, algos=f"{self.algo}:{self.preset or default_preset(self.algo, self.env)}",
            seeds=self.seeds, max_frames=self.max_frames, max_minutes=self.max_minutes,
            stop_at_score="auto", out_dir=self.out_dir, grace_minutes=self.grace_minutes,
        )  # fmt: skip


def within_budget(record: dict[str, Any], budget_minutes: float) -> dict[str, Any]:
    """A seed's record as this bench counts it: one that solved after ``budget_minutes`` (kept
    from a bench with a longer budget) did not solve within it."""
    late = record.get("solved") and (record.get("minutes_to_solve") or 0.0) > budget_minutes
    if not late:
        return record
    return {**record, "solved": False, "stop_reason": f"solved after {budget_minutes:g} min"}


def _median_and_range(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(records: list[dict[str, Any]], budget_minutes: float) -> dict[str, Any]:
    """Median and spread over the seeds; unsolved seeds count as +inf minutes/frames."""
    done = [r for r in records if "failed" not in r]
    inf = math.inf
    minutes = [
        float(r["minutes_to_solve"]) if r.get("solved") and r.get("minutes_to_solve") else inf
        for r in done
    ]
    frames = [
        float(r["frames_to_solve"]) if r.get("solved") and r.get("frames_to_solve") else inf
        for r in done
    ]
    fps = [float(r["frames_per_second"]) for r in done if r.get("frames_per_second")]
    evals = [float(r["eval_mean"]) for r in done if r.get("eval_mean") is not None]
    return {
        "seeds": len(records),
        "solved": sum(bool(r.get("solved")) for r in done),
        "failed": len(records) - len(done),
        "minutes_to_solve": _median_and_range(minutes),
        "frames_to_solve": _median_and_range(frames),
        "frames_per_second": _median_and_range(fps),
        "eval_mean": _median_and_range(evals),  # --eval-episodes: the final policy, greedy
        "budget_minutes": budget_minutes,
    }


def _fmt_minutes(x: float, budget: float) -> str:
    return f"> {budget:g}" if math.isinf(x) else f"{x:.1f}"


def _ran_out_of_time(r: dict[str, Any]) -> bool:
    """An unsolved seed that used the whole time budget (so "> budget" is true of it)."""
    reason = str(r.get("stop_reason") or "")
    return reason == "max_minutes" or reason.startswith("solved after")


def _unsolved_minutes(r: dict[str, Any], budget: float) -> str:
    """ "> budget" for a seed that ran out of time; otherwise why it stopped and when (a run
    stopped by hand or by --max-frames has not shown that it needs more than the budget)."""
    if _ran_out_of_time(r):
        return f"> {budget:g}"
    return f"not solved ({r.get('stop_reason') or 'stopped'} at {r.get('minutes') or 0:.1f})"


def _fmt_frames(x: float, unsolved: str = "-") -> str:
    return unsolved if math.isinf(x) else f"{x / 1e6:.2f}M"


def format_table(result: dict[str, Any]) -> str:
    """``solve.md``: one row per seed, then the median (min-max), the command and the CPU."""
    b, budget = result["config"], result["config"]["max_minutes"]
    # A final-eval column only where a run has one (--eval-episodes), so other tables stay.
    evals = any(r.get("eval_mean") is not None for r in result["runs"] if "failed" not in r)
    lines = [
        f"{b['algo']} --preset {b['preset']} on {b['env']}, {result['cpu']}",
        "",
        "| seed | solved | minutes to solve | frames to solve | best mean-100 | frames/s | "
        "rollout s / update s per update |" + (" final eval (greedy) |" if evals else ""),
        "| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if evals else ""),
    ]

    def eval_cell(value: float | None) -> str:
        if not evals:
            return ""
        return " - |" if value is None else f" {value:.1f} |"

    for r in result["runs"]:
        if "failed" in r:
            lines.append(f"| {r['seed']} | failed: {r['failed']} | | | | | |" + eval_cell(None))
            continue
        m = r["minutes_to_solve"] if r.get("solved") else math.inf
        f = float(r["frames_to_solve"]) if r.get("solved") else math.inf
        split = (
            f"{r['mean_rollout_s']:.2f} / {r['mean_update_s']:.2f}"
            if "mean_rollout_s" in r and "mean_update_s" in r
            else "-"
        )
        best = r.get("best_return_mean_100")
        lines.append(
            f"| {r['seed']} | {'yes' if r.get('solved') else 'no'} | "
            f"{_fmt_minutes(m, budget) if r.get('solved') else _unsolved_minutes(r, budget)} | "
            f"{_fmt_frames(f)} | {best if best is None else f'{best:.1f}'} | "
            f"{r.get('frames_per_second') or 0:,.0f} | {split} |" + eval_cell(r.get("eval_mean"))
        )
    s = result["summary"]
    mt, ft = s["minutes_to_solve"], s["frames_to_solve"]
    if mt:
        # "> budget" for the unsolved only when each of them ran the whole budget.
        unsolved = [r for r in result["runs"] if "failed" not in r and not r.get("solved")]
        over = budget if all(_ran_out_of_time(r) for r in unsolved) else None

        def fmt(x: float) -> str:
            return _fmt_minutes(x, over) if over is not None or not math.isinf(x) else "not solved"

        lines.append(
            f"| **median** | {s['solved']}/{s['seeds']} | **{fmt(mt['median'])}** "
            f"({fmt(mt['min'])} to {fmt(mt['max'])}) | "
            f"{_fmt_frames(ft['median'])} ({_fmt_frames(ft['min'], 'not solved')} to "
            f"{_fmt_frames(ft['max'], 'not solved')}) "
            "| | | |" + eval_cell((s.get("eval_mean") or {}).get("median"))
        )
    lines += ["", "`" + " ".join(result["argv"]) + "`"]
    return "\n".join(lines) + "\n"


def plot_runs(records: list[dict[str, Any]], png: Path, title: str, stop: float | None) -> None:
    """Every seed's ``return_mean_100`` against minutes (left) and frames (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_f) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for r in records:
        pts = read_curve(Path(r["run_dir"]))
        if not pts:
            continue
        mins, frames, ret = zip(*pts)
        ax_t.plot(mins, ret, label=f"seed {r['seed']}")
        ax_f.plot(frames, ret, label=f"seed {r['seed']}")
    for ax, xlabel in ((ax_t, "minutes"), (ax_f, "frames")):
        if stop is not None:
            ax.axhline(stop, color="grey", ls="--", lw=1)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    ax_t.set_ylabel("return_mean_100")
    if ax_f.get_legend_handles_labels()[0]:
        ax_f.legend(loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    try:
        save_png(fig, png, dpi=90)
    finally:
        plt.close(fig)


def bench_solve(b: BenchSolveConfig, extra: Sequence[str] = (), argv: Sequence[str] = ()) -> dict:
    """Run every seed (a one-game suite), write solve.json / solve.md / solve.png, return the
    result."""
    if b.preset is None:
        b = dataclasses.replace(b, preset=default_preset(b.algo, b.env))
    b.validate()
    suite = b.suite()
    try:
        suite.validate()
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("--games", "--env")) from None
    # One bench writes an out dir at a time (each trainer locks its own run dir too).
    with RunLock(b.out_dir, "bench directory"):
        return _bench_solve(b, suite, extra, argv)


def _bench_solve(
    b: BenchSolveConfig, suite: BenchAtariConfig, extra: Sequence[str], argv: Sequence[str]
) -> dict:
    out = Path(b.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cpu = describe()
    print(f"bench solve: {b.algo} --preset {b.preset} on {b.env}, seeds {b.seeds}; {cpu}")
    check_recipes(suite, extra)  # every seed's dir before any runs: never a refusal hours in

    def done(r: dict[str, Any]) -> None:
        r = within_budget(r, b.max_minutes)
        if r.get("interrupted"):
            print(f"  seed {r['seed']}: stopped ({r['failed']}); the bench stops here", flush=True)
        elif "failed" in r:
            print(f"  seed {r['seed']}: FAILED ({r['failed']}); log {Path(r['run_dir']).parent}"
                  f"/seed-{r['seed']}.log", flush=True)  # fmt: skip
        else:
            when = (
                f"solved in {r['minutes_to_solve']:.1f} min, {r['frames_to_solve']:,} frames"
                if r["solved"]
                else f"not solved ({r['stop_reason']}, best mean-100 {r['best_return_mean_100']})"
            )
            note = " (kept: finished by an earlier bench)" if r.get("kept") else ""
            print(f"  seed {r['seed']}: {when}; {r['frames_per_second'] or 0:,.0f} frames/s{note}",
                  flush=True)  # fmt: skip

    runs = run_locally(suite, extra, done)
    write_results(suite, runs, extra, argv)  # the one-game suite's suite.json and suite.md
    records = [within_budget(r, b.max_minutes) for r in runs]
    result = {
        "config": asdict(b),
        "extra_args": list(extra),
        "argv": ["rapidrl", "bench", "solve", *argv],
        "cpu": cpu,
        "hardware": hardware_record(),
        "runs": records,
        "summary": summarize(records, b.max_minutes),
    }
    (out / "solve.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    table = format_table(result)
    (out / "solve.md").write_text(table)
    print(table)
    try:
        stop = 18.0 if b.env.lower() in ("pong", "ale/pong-v5", "pongnoframeskip-v4") else None
        plot_runs(records, out / "solve.png", f"{b.algo} {b.preset} {b.env}", stop)
    except Exception as exc:  # a plot must never lose the measured table
        print(f"could not plot: {exc}", file=sys.stderr)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """``rapidrl bench solve [--config FILE] [--algo ppo] [--preset lean] [--seeds 1,2,3]
    [-- TRAINER ARGS]``: ``--config`` holds the bench's fields (flags override it)."""
    from rapidrl.config import parse_config

    argv = list(sys.argv[1:] if argv is None else argv)
    own, extra = split_extra(argv)
    b = parse_config(BenchSolveConfig, {}, own, prog="rapidrl bench solve", description=__doc__)
    result = bench_solve(b, extra, argv)
    s = result["summary"]
    return 0 if s["failed"] == 0 else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
