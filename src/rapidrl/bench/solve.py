"""``rapidrl bench solve``: wall time and frames to solve a game, over several seeds.

Runs ``rapidrl train ALGO --preset PRESET --env ENV --seed S`` for each seed, one after the other
(each alone on the machine: a second run beside it would halve its speed), each in its own
process with a wall-clock limit, and writes into ``--out-dir``:

- ``seed-S/``: each run's own directory (``summary.json``, ``metrics.csv``, checkpoints, ...),
  ``seed-S.log`` its output and ``seed-S.json`` its record once it finished;
- ``solve.json``: per seed solved / minutes / frames to solve, frames/s, the best mean, the time
  split between rollout and update where the trainer logs it; the median and the spread; the
  command line; the CPU (:mod:`rapidrl.hardware`);
- ``solve.md``: the same as a table, ready for a README;
- ``solve.png``: every seed's ``return_mean_100`` against wall-clock minutes and against frames.

A seed that does not solve within ``--max-minutes`` counts as not solved (its time is reported
as "> budget"; one stopped before its budget, by hand or by ``--max-frames``, as "not solved
(REASON at MINUTES)"); the median is then over all seeds with unsolved ones as +inf (a median of
"> budget" says so). Extra arguments after ``--`` go to the trainer as they are, e.g.
``rapidrl bench solve --algo pqn --preset fast --seeds 1,2,3 -- --obs-size 64``.

Run again with the same ``--out-dir`` (e.g. after a stop, or with more seeds), a seed that an
earlier bench finished with the same recipe (the trainer command but for its run dir and
budget) is kept, not re-run; one that ran another recipe or did not finish is refused before
anything runs. A kept seed that solved after this bench's budget counts as not solved.

A seed whose trainer was stopped from outside (Ctrl-C, or a signal to the trainer alone: it
checkpoints, writes an "interrupted" summary and exits 0) stops the bench there, as Ctrl-C does,
instead of going on to the next seed; its record says ``interrupted`` and the same command
resumes it from its checkpoint (the run's clock survives resume, so its minutes to solve count
training time only).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from rapidrl.algos import DEFAULT_PRESETS
from rapidrl.bench.runner import (
    read_curve,
    read_summary,
    run_state,
    run_training,
    split_extra,
    stopped_from_outside,
    trainer_argv,
)
from rapidrl.config import ConfigError
from rapidrl.hardware import describe, hardware_record
from rapidrl.train.lock import RunLock

__all__ = [
    "BenchSolveConfig",
    "format_table",
    "kept_seed",
    "main",
    "run_seed",
    "seed_record",
    "summarize",
]


@dataclass(frozen=True)
class BenchSolveConfig:
    """Train an algorithm/preset on a game for several seeds, one at a time, to its stop score
    or a time budget; write the table (median and spread of minutes and frames to solve,
    frames/s, CPU) and one plot of all curves against wall time and frames."""

    algo: Literal["ppo", "ppo-lstm", "dqn", "rainbow", "pqn"] = "ppo"
    """The trainer: rapidrl train ALGO."""
    preset: str | None = None
    """Its preset (--preset); None: the trainer's default (``rapidrl.algos.DEFAULT_PRESETS``:
    lean for ppo)."""
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


def train_command(b: BenchSolveConfig, seed: int, run_dir: Path, extra: Sequence[str]) -> list[str]:
    """The trainer's command line for one seed (run with this Python)."""
    cmd = trainer_argv(b.algo, "--preset", b.preset or DEFAULT_PRESETS[b.algo])
    cmd += ["--env", b.env, "--seed", str(seed), "--run-dir", str(run_dir)]
    cmd += ["--max-minutes", str(b.max_minutes), "--no-progress"]
    if b.max_frames is not None:
        cmd += ["--max-frames", str(b.max_frames)]
    return cmd + list(extra)


def _same_recipe(cmd: Sequence[str]) -> list[str]:
    """A trainer command without what may differ between two runs of the same recipe: the
    interpreter, the run dir and the time budget."""
    out, skip = [], False
    for arg in list(cmd)[1:]:
        if skip:
            skip = False
        elif arg in ("--run-dir", "--max-minutes"):
            skip = True
        else:
            out.append(arg)
    return out


def kept_seed(
    b: BenchSolveConfig, seed: int, extra: Sequence[str], out_dir: Path
) -> dict[str, Any] | None:
    """The record of ``seed`` when an earlier bench finished it with the same recipe (a stopped
    bench goes on where it left off); None when it is to run: not started, or stopped from
    outside with the same recipe (it resumes). Anything else in its place is refused: a bench
    never mixes a new run with an old one."""
    run_dir, saved = out_dir / f"seed-{seed}", out_dir / f"seed-{seed}.json"
    if not run_dir.exists() or not any(run_dir.iterdir()):
        return None
    try:
        earlier = json.loads(saved.read_text())
        old = earlier["command"]
    except (OSError, ValueError, KeyError, TypeError):
        earlier, old = {}, None
    why = None
    if old is None and (out_dir / f"seed-{seed}.log").exists():
        why = f"did not finish (no {saved.name}; its log: seed-{seed}.log)"
    elif old is None:
        why = f"has no {saved.name} (not a bench solve run)"
    elif _same_recipe(old) != _same_recipe(train_command(b, seed, run_dir, extra)):
        why = f"ran another recipe ({' '.join(_same_recipe(old)[3:])})"
    elif earlier.get("interrupted") and run_state(run_dir) != "done":
        return None  # stopped from outside: run_seed goes on from its checkpoint
    elif run_state(run_dir) != "done":
        why = "did not finish (the bench was stopped during it)"
    if why:
        raise ConfigError(
            f"{run_dir} {why}: remove it to run seed {seed} again, or choose another --out-dir "
            "(a bench never mixes a new run with an old one)"
        )
    record = seed_record(seed, run_dir, old, None)
    budget = 60.0 * b.max_minutes
    if record.get("solved") and (record.get("seconds_to_solve") or 0) > budget:
        # It ran under a longer budget and solved after this one: not solved within it.
        record.update(solved=False, stop_reason=f"solved after {b.max_minutes:g} min")
    return {**record, "kept": True}


def run_seed(
    b: BenchSolveConfig, seed: int, extra: Sequence[str] = (), out_dir: Path | None = None
) -> dict[str, Any]:
    """Train one seed in a child process (time limit: budget + grace) and return its record:
    the summary's numbers, or ``failed`` with the reason and the log's tail (``interrupted``
    too when its trainer was stopped from outside). A seed an earlier bench finished with the
    same recipe is kept (:func:`kept_seed`); one stopped from outside resumes."""
    out_dir = Path(out_dir or b.out_dir)
    kept = kept_seed(b, seed, extra, out_dir)
    if kept is not None:
        return kept
    run_dir = out_dir / f"seed-{seed}"
    cmd = train_command(b, seed, run_dir, extra)  # the recipe, recorded whether fresh or resumed
    log_path = out_dir / f"seed-{seed}.log"
    if run_state(run_dir) == "resume":  # the run's own config.json gives everything else
        budget = ["--max-minutes", str(b.max_minutes), "--no-progress"]
        if b.max_frames is not None:
            budget += ["--max-frames", str(b.max_frames)]
        launch = trainer_argv(b.algo, "--resume", str(run_dir), *budget)
    else:
        if run_dir.exists():
            shutil.rmtree(run_dir)  # stopped from outside before its first checkpoint
        launch = cmd
        log_path.unlink(missing_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    limit = 60.0 * (b.max_minutes + b.grace_minutes) + 120.0  # + start-up
    try:
        rc, wall = run_training(launch, log_path, limit)
    except KeyboardInterrupt:  # Ctrl-C: the trainer had a minute to checkpoint
        if stopped_from_outside(run_dir):
            _save_interrupted(seed_record(seed, run_dir, cmd, None), out_dir)
        raise
    record = seed_record(seed, run_dir, cmd, wall)
    if rc == 0 and stopped_from_outside(run_dir):
        return _save_interrupted(record, out_dir)
    if rc != 0 or "failed" in record:
        tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
        why = "killed after the time limit" if rc is None else f"exit code {rc}"
        record.update(failed=why if rc != 0 else record["failed"], log_tail=tail)
        return record
    (out_dir / f"seed-{seed}.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    return record


def _save_interrupted(record: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Record a seed whose trainer was stopped from outside (it checkpointed and exited 0): not
    a failure of the recipe; the saved record lets the same command resume it."""
    why = "interrupted: checkpoint kept, the same command goes on from it"
    record = {**record, "failed": why, "interrupted": True}
    path = out_dir / f"seed-{record['seed']}.json"
    path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    return record


def seed_record(seed: int, run_dir: Path, cmd: Sequence[str], wall: float | None) -> dict[str, Any]:
    """What one finished seed measured, read from its run dir (``failed`` without a summary)."""
    record: dict[str, Any] = {"seed": seed, "run_dir": str(run_dir), "command": list(cmd)}
    record["wall_seconds"] = wall
    summary = read_summary(run_dir)
    if summary is None:
        return {**record, "failed": "no summary.json"}
    record.update(
        solved=bool(summary.get("solved")),
        seconds_to_solve=summary.get("seconds_to_solve"),
        frames_to_solve=summary.get("frames_to_solve"),
        frames=summary.get("frames"),
        seconds=summary.get("seconds"),
        best_return_mean_100=summary.get("best_return_mean_100"),
        frames_per_second=summary.get("frames_per_second"),
        stop_reason=summary.get("stop_reason"),
        **_time_split(run_dir / "metrics.csv"),
    )
    return record


def _time_split(metrics_csv: Path) -> dict[str, float]:
    """Mean seconds per update in the rollout and in the update phase (PPO/PQN columns)."""
    from rapidrl.train import read_metrics

    if not metrics_csv.exists():
        return {}
    _, rows = read_metrics(str(metrics_csv))
    out = {}
    for key in ("rollout_s", "update_s"):
        vals = [float(r[key]) for r in rows if r.get(key) not in (None, "", "nan")]
        vals = [v for v in vals if math.isfinite(v)]
        if vals:
            out[f"mean_{key}"] = sum(vals) / len(vals)
    return out


def _median_and_range(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(records: list[dict[str, Any]], budget_minutes: float) -> dict[str, Any]:
    """Median and spread over the seeds; unsolved seeds count as +inf minutes/frames."""
    done = [r for r in records if "failed" not in r]
    inf = math.inf
    minutes = [
        (r["seconds_to_solve"] / 60.0) if r.get("solved") and r.get("seconds_to_solve") else inf
        for r in done
    ]
    frames = [
        float(r["frames_to_solve"]) if r.get("solved") and r.get("frames_to_solve") else inf
        for r in done
    ]
    fps = [float(r["frames_per_second"]) for r in done if r.get("frames_per_second")]
    return {
        "seeds": len(records),
        "solved": sum(bool(r.get("solved")) for r in done),
        "failed": len(records) - len(done),
        "minutes_to_solve": _median_and_range(minutes),
        "frames_to_solve": _median_and_range(frames),
        "frames_per_second": _median_and_range(fps),
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
    return f"not solved ({r.get('stop_reason') or 'stopped'} at {(r.get('seconds') or 0) / 60:.1f})"


def _fmt_frames(x: float, unsolved: str = "-") -> str:
    return unsolved if math.isinf(x) else f"{x / 1e6:.2f}M"


def format_table(result: dict[str, Any]) -> str:
    """``solve.md``: one row per seed, then the median (min-max), the command and the CPU."""
    b, budget = result["config"], result["config"]["max_minutes"]
    lines = [
        f"{b['algo']} --preset {b['preset']} on {b['env']}, {result['cpu']}",
        "",
        "| seed | solved | minutes to solve | frames to solve | best mean-100 | frames/s | "
        "rollout s / update s per update |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["runs"]:
        if "failed" in r:
            lines.append(f"| {r['seed']} | failed: {r['failed']} | | | | | |")
            continue
        m = r["seconds_to_solve"] / 60 if r.get("solved") else math.inf
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
            f"{r.get('frames_per_second') or 0:,.0f} | {split} |"
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
            "| | | |"
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
    fig.savefig(png, dpi=90)
    plt.close(fig)


def bench_solve(b: BenchSolveConfig, extra: Sequence[str] = (), argv: Sequence[str] = ()) -> dict:
    """Run every seed, write solve.json / solve.md / solve.png, return the result."""
    if b.preset is None:
        b = dataclasses.replace(b, preset=DEFAULT_PRESETS[b.algo])
    b.validate()
    # One bench writes an out dir at a time (each trainer locks its own run dir too).
    with RunLock(b.out_dir, "bench directory"):
        return _bench_solve(b, extra, argv)


def _bench_solve(b: BenchSolveConfig, extra: Sequence[str] = (), argv: Sequence[str] = ()) -> dict:
    out = Path(b.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cpu = describe()
    print(f"bench solve: {b.algo} --preset {b.preset} on {b.env}, seeds {b.seeds}; {cpu}")
    # Every seed's dir is checked before any runs: a refusal never comes hours into a bench.
    kept = {seed: kept_seed(b, seed, extra, out) for seed in b.seed_list()}
    records = []
    for seed in b.seed_list():
        if kept[seed] is None:
            again = (
                " (resuming from its checkpoint)"
                if run_state(out / f"seed-{seed}") == "resume"
                else ""
            )
            print(f"  seed {seed}: up to {b.max_minutes:g} min{again} ...", flush=True)
        r = kept[seed] or run_seed(b, seed, extra, out)
        records.append(r)
        if r.get("interrupted"):  # stopped from outside: so is the bench, as with Ctrl-C
            print(f"  seed {seed}: stopped ({r['failed']}); the bench stops here", flush=True)
            break
        if "failed" in r:
            print(f"  seed {seed}: FAILED ({r['failed']}); log {out / f'seed-{seed}.log'}")
        else:
            when = (
                f"solved in {r['seconds_to_solve'] / 60:.1f} min, {r['frames_to_solve']:,} frames"
                if r["solved"]
                else f"not solved ({r['stop_reason']}, best mean-100 {r['best_return_mean_100']})"
            )
            note = " (kept: finished by an earlier bench)" if r.get("kept") else ""
            print(f"  seed {seed}: {when}; {r['frames_per_second'] or 0:,.0f} frames/s{note}")
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
