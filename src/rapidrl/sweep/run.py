"""``rapidrl sweep SPEC``: a hyperparameter search on Ray Tune, seeds per trial, bad trials stopped
early from their learning curves.

Ray Tune (Ray >= 2.41) does the scheduling, searching and resuming: Optuna's TPE sampler through
Tune's search API (``OptunaSearch``), or a grid (every combination once) for a space of choices
and int ranges with no more combinations than the trial budget; ASHA or the median rule as the
scheduler. A trial runs the spec's envs x seeds one after the other, each an ordinary run
directory under ``OUT/NAME/trials/TRIAL/`` (``rapidrl train``'s files: resumable, plottable,
evaluable). The first run reports every metrics row to Tune (``frames`` and the learning curve
``curve``, the mean-100): the scheduler compares trials there and stops the hopeless ones early.
A trial that gets through runs its other seeds and reports its ``score``: the median over seeds
of the objective (averaged over the envs), with the spread kept. On a cluster (``--ray
ADDRESS``) trials run side by side, ``cpus_per_trial`` CPUs each; on one machine as many as its
CPUs allow. A run whose config and seed an earlier trial already ran to the end is not trained
again: the trial takes that run's score and points at its run dir (the same measurement, not a
new one: a wall-time objective, or an async backend, would measure a little differently each
time).

A stopped sweep (Ctrl-C, a lost machine) goes on with ``--resume``: Tune keeps the finished
trials and starts the unfinished ones again, and each of their runs resumes from its own run
directory's newest checkpoint.

While it runs it prints a line as each trial starts and ends (parameters, score, frames, how it
ended) and a progress line. Output in ``OUT/NAME/``, each file written whole (atomically):
``sweep.md`` and ``sweep.csv`` (trial, parameters, score and spread, frames, minutes, how it ended:
finished, stopped early by the scheduler, cut by the time budget, not started, failed or
interrupted), ``sweep.json``, ``sweep.png`` (score against trial and against each parameter) and
``best.json``: the best trial's config, for ``rapidrl train ALGO --config best.json``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rapidrl.config import ConfigError, config_to_dict
from rapidrl.sweep.lines import ENDS, error_line, fmt, progress_line, trial_end, trial_line
from rapidrl.sweep.spec import EVAL_METRIC, Range, SweepSpec, load_spec, trial_config

__all__ = [
    "ENDS", "RAY_MIN", "SweepConfig", "check_ray_version", "main", "progress_line", "run_sweep",
    "run_trial", "SearchPlan", "search_plan", "summarize", "trial_end", "trial_line", "tune_space",
]  # fmt: skip

_UNSOLVED = 2.0  # frames/minutes_to_score of a run that never reached the score: this x its budget

RAY_MIN = (2, 41)
"""The oldest Ray whose Tune has what this module calls: ``tune.report``, ``tune.get_context`` and
``tune.RunConfig`` (pyproject's ``sweep`` extra pins the same)."""


@dataclass(frozen=True)
class SweepConfig:
    """Run the sweep a spec file describes (rapidrl.sweep.spec), on Ray Tune."""

    spec: str = ""
    """The sweep spec: a YAML, JSON or TOML file (given first: rapidrl sweep SPEC)."""
    out_dir: str = "sweeps"
    """Where the sweep's folder (named by the spec) goes."""
    ray: str = "local"
    """local = start Ray on this machine; else the address of a running cluster (auto,
    HOST:6379, ray://HOST:10001)."""
    resume: bool = False
    """Go on with the sweep already in the out dir: finished trials kept, the others started
    again from their runs' checkpoints."""


def tune_space(spec: SweepSpec) -> dict[str, Any]:
    """The spec's ranges as Tune's search space (int ranges include both ends)."""
    from ray import tune

    make = {
        "choice": lambda v: tune.choice(list(v)),
        "uniform": lambda v: tune.uniform(*v),
        "loguniform": lambda v: tune.loguniform(*v),
        "int": lambda v: tune.randint(v[0], v[1] + 1),
    }
    return {key: make[r.kind](r.values) for key, r in spec.space.items()}


def check_ray_version(version: str) -> None:
    """``ConfigError`` naming the fix unless Ray ``version`` is at least :data:`RAY_MIN`."""
    numbers = []
    for part in version.split(".")[:2]:
        digits = part[: len(part) - len(part.lstrip("0123456789"))]
        numbers.append(int(digits or 0))
    if tuple(numbers) < RAY_MIN:
        need = ".".join(map(str, RAY_MIN))
        raise ConfigError(
            f"rapidrl sweep needs Ray >= {need} (tune.report, tune.get_context, tune.RunConfig); "
            f"this Python has Ray {version}: pip install -U 'ray[tune]>={need}' (a cluster given "
            "with --ray must run the same Ray version as this machine)"
        )


def grid_size(spec: SweepSpec) -> int | None:
    """How many combinations the space has, or None if a range is continuous (uniform,
    loguniform)."""
    size = 1
    for rng in spec.space.values():
        if rng.kind == "choice":
            size *= len(rng.values)
        elif rng.kind == "int":
            size *= rng.values[1] - rng.values[0] + 1
        else:
            return None
    return size


def _grid_values(rng: Range) -> list[Any]:
    if rng.kind == "choice":
        return list(rng.values)
    return list(range(rng.values[0], rng.values[1] + 1))


@dataclass(frozen=True)
class SearchPlan:
    """How Tune searches the space (:func:`search_plan`)."""

    param_space: dict[str, Any]
    search_alg: Any  # None: Tune's own variant generator (the grid)
    num_samples: int
    trials: int
    how: str  # in words, for the sweep's first line


def search_plan(spec: SweepSpec) -> SearchPlan:
    """A space of choices and int ranges with no more combinations than ``budget.trials`` is a
    grid, every combination once: sampling it would repeat some and miss others (TPE's first 10
    proposals are random). Otherwise Optuna's TPE samples ``budget.trials`` (a proposal that
    repeats an earlier trial's finished runs takes their scores: :func:`run_trial`)."""
    from ray import tune

    size = grid_size(spec)
    if size is not None and size <= spec.trials:
        space = {key: tune.grid_search(_grid_values(r)) for key, r in spec.space.items()}
        return SearchPlan(space, None, 1, size, f"a grid, its {size} combinations once each")
    from ray.tune.search.optuna import OptunaSearch

    searcher = OptunaSearch(metric="score", mode=spec.mode, seed=0)
    how = f"{spec.trials} trials by Optuna's TPE"
    return SearchPlan(tune_space(spec), searcher, spec.trials, spec.trials, how)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def _unsolved(spec: SweepSpec, cfg: Any) -> float:
    """The score of a run that has not reached the score (yet): twice its budget."""
    if spec.minutes_to_score is not None:
        return _UNSOLVED * float(cfg.max_minutes)
    return _UNSOLVED * cfg.max_frames


def _run_score(spec: SweepSpec, run_dir: Path, summary: dict[str, Any], cfg: Any) -> float:
    """One run's objective: frames or training minutes to the score (unsolved: twice the
    budget), or the metric's last logged value."""
    if spec.frames_to_score is not None:
        solved = summary.get("frames_to_solve")
        return float(solved) if solved is not None else _unsolved(spec, cfg)
    if spec.minutes_to_score is not None:
        solved = summary.get("seconds_to_solve")
        return float(solved) / 60.0 if solved is not None else _unsolved(spec, cfg)
    if spec.metric in ("return_mean_100", EVAL_METRIC):  # in summary.json (eval: its final eval)
        value = summary.get(spec.metric)
        return float("nan") if value is None else float(value)
    from rapidrl.train.metrics import read_metrics

    _, rows = read_metrics(run_dir / "metrics.csv")
    values = [float(r[spec.metric]) for r in rows if r.get(spec.metric) not in (None, "")]
    return values[-1] if values else float("nan")


def _same_run_elsewhere(trial_dir: Path, name: str, fields: dict[str, Any]) -> Path | None:
    """A finished run of another trial of this sweep with the same config, seed included (a
    sampler may propose a choice it proposed before): its score is the one measured for these
    parameters and seed, and its run dir (checkpoints and all) is there to evaluate."""
    from rapidrl.train.launch import run_state

    want = json.loads(json.dumps(fields))  # as the file holds it (tuples are lists there)
    for other in sorted(trial_dir.parent.glob(f"*/{name}.config.json")):
        if other.parent == trial_dir:
            continue
        try:
            if json.loads(other.read_text()) != want:
                continue
        except (OSError, ValueError):
            continue
        if run_state(other.parent / name) == "done":
            return other.parent / name
    return None


def run_trial(
    spec: SweepSpec, params: dict[str, Any], trial_dir: Path, report: Any
) -> dict[str, Any]:
    """Run one trial (every env x seed, one after the other, each ``rapidrl train`` in a child
    process writing its own run dir in ``trial_dir``) and return its result. ``report(metrics)``
    gets every metrics row of the first run (``frames``, ``curve``) and the final result (Tune's
    ``tune.report``). A run dir holding a finished run is kept; one with a checkpoint resumes (a
    sweep started again). A run with the config and seed of another trial's finished run is not
    trained: its score is that run's, its rows go to the scheduler, and the result names it in
    ``reused`` (the run and trial) and ``reused_dirs`` (its run dir: nothing is copied). A
    trainer that fails raises ``RuntimeError`` with its log's tail."""
    from rapidrl.train.launch import launch_training, run_state, trainer_argv
    from rapidrl.train.metrics import read_metrics
    from rapidrl.train.run import RunDir, atomic_write_text

    runs = [(env, seed) for seed in spec.seeds for env in spec.envs]
    reused: list[str] = []
    reused_dirs: list[str] = []
    scores: dict[int, list[float]] = {}
    frames_total, seconds_total, frames_reused = 0, 0.0, 0
    for i, (env, seed) in enumerate(runs):
        cfg = trial_config(spec, params, env, seed)
        name = f"{_slug(env)}-seed-{seed}"
        run_dir, log = trial_dir / name, trial_dir / f"{name}.log"
        was_reused = False
        if run_state(run_dir) != "done":
            cmd: list[str] | None = None
            if RunDir(run_dir).has_checkpoints():
                cmd = trainer_argv(spec.algo, "--resume", str(run_dir), "--no-progress")
            else:
                fields = {k: v for k, v in config_to_dict(cfg).items()}
                fields.update(
                    no_progress=True, torch_threads=max(1, int(spec.cpus_per_trial)),
                    stop_at_score=spec.to_score,  # None: the whole budget
                )  # fmt: skip
                if fields.get("track") == "wandb" and not fields.get("track_group"):
                    fields["track_group"] = spec.name  # W&B groups a sweep's runs
                if spec.grace_frames is not None:  # rows often enough for the scheduler
                    every = max(1, spec.grace_frames // 4)
                    fields["log_every_frames"] = min(cfg.log_every_frames or every, every)
                twin = _same_run_elsewhere(trial_dir, name, fields)
                if twin is not None:  # its score, frames and rows; nothing copied or trained
                    run_dir, was_reused = twin, True
                    reused.append(f"{name} of trial {twin.parent.name}")
                    reused_dirs.append(str(twin))
                else:
                    config = trial_dir / f"{name}.config.json"
                    atomic_write_text(config, json.dumps(fields, indent=1) + "\n", "a run config")
                    cmd = trainer_argv(
                        spec.algo, "--config", str(config), "--run-dir", str(run_dir)
                    )
            base, seen = frames_total, [0]
            unsolved = _unsolved(spec, cfg) if spec.to_score is not None else 0.0

            def pass_rows(
                base=base,
                seen=seen,
                first=(i == 0),
                csv_path=run_dir / "metrics.csv",
                unsolved=unsolved,
            ) -> None:
                if not first:
                    return
                _, rows = read_metrics(csv_path)
                for row in rows:
                    frames = int(float(row["frames"]))
                    if frames > seen[0]:
                        seen[0] = frames
                        curve = row.get("return_mean_100")
                        if spec.to_score is not None:
                            now = unsolved  # the unsolved run's score so far
                        else:
                            value = row.get(spec.metric)
                            now = float(value) if value else float("nan")
                        report(
                            {
                                "frames": base + frames,
                                "curve": float(curve) if curve else float("nan"),
                                "score": now,  # this run's objective so far (Tune wants it)
                                "finished": False,
                            }
                        )

            if cmd is None:  # reused: its rows go to the scheduler as if it had just run
                pass_rows()
            else:
                rc, _ = launch_training(cmd, log, 10 * 24 * 3600.0, on_poll=pass_rows)
                if rc != 0 or not (run_dir / "summary.json").exists():
                    tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
                    raise RuntimeError(f"{' '.join(cmd)} exited with {rc}; {log}:\n{tail}")
        summary = json.loads((run_dir / "summary.json").read_text())
        frames_total += int(summary["frames"])
        if was_reused:
            frames_reused += int(summary["frames"])
        seconds_total += float(summary["seconds"])
        score = _run_score(spec, run_dir, summary, cfg)
        scores.setdefault(seed, []).append(score)
    per_seed = [statistics.fmean(v) for v in scores.values()]
    result = {
        "frames": frames_total,
        "minutes": seconds_total / 60.0,
        "score": statistics.median(per_seed),
        "score_min": min(per_seed),
        "score_max": max(per_seed),
        "seed_scores": per_seed,
        "reused": reused,
        "reused_dirs": reused_dirs,
        "frames_reused": frames_reused,
        "finished": True,
    }
    report({**result, "curve": result["score"] if spec.to_score is None else float("nan")})
    return result


def _trainable(spec: SweepSpec, out: Path):
    def trial(params: dict[str, Any]) -> None:
        from ray import tune

        trial_dir = out / "trials" / tune.get_context().get_trial_id()
        run_trial(spec, params, trial_dir, tune.report)

    return trial


def _scheduler(spec: SweepSpec, total_frames: int):
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, MedianStoppingRule

    if spec.scheduler == "asha":
        # max_t beyond every report (the final one counts all runs' frames): a trial is never
        # stopped for having run long enough, only for a curve below its rung's.
        return ASHAScheduler(
            time_attr="frames", metric="curve", mode="max", max_t=total_frames + 1,
            grace_period=spec.grace_frames, reduction_factor=spec.reduction_factor,
        )  # fmt: skip
    if spec.scheduler == "median":
        return MedianStoppingRule(
            time_attr="frames", metric="curve", mode="max", grace_period=spec.grace_frames,
            min_samples_required=2,
        )  # fmt: skip
    return FIFOScheduler()


def run_sweep(
    spec: SweepSpec, out_dir: str | Path, *, ray_address: str = "local", resume: bool = False
) -> dict[str, Any]:
    """Run (or go on with) the sweep, printing a line as each trial starts and ends; write the
    table, plot and best config; return the result."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            f"rapidrl sweep needs Ray Tune and Optuna ({exc}): pip install -e '.[sweep]' in the rapidrl checkout"
        ) from None
    check_ray_version(ray.__version__)  # before a Tune API that older Rays lack fails midway
    try:
        from ray import tune
        from ray.tune.search.optuna import OptunaSearch  # noqa: F401  (Optuna there too)
    except ImportError as exc:
        raise ConfigError(
            f"rapidrl sweep needs Ray Tune and Optuna ({exc}): pip install -e '.[sweep]' in the rapidrl checkout"
        ) from None
    from rapidrl.sweep.tune_hooks import Budget, Progress
    from rapidrl.train.lock import RunLock

    out = Path(out_dir).resolve() / spec.name
    experiment = out / "tune" / spec.name
    if experiment.exists() and not resume:
        raise ConfigError(
            f"a sweep named {spec.name} is already in {out}: --resume goes on with it; or "
            "choose another --out-dir or name"
        )
    if resume and not experiment.exists():
        raise ConfigError(f"nothing to resume in {out}: no Tune experiment there; drop --resume")
    base = trial_config(spec, {k: r.values[0] for k, r in spec.space.items()}, *spec.envs[:1],
                        spec.seeds[0])  # fmt: skip
    total_frames = base.max_frames * len(spec.envs) * len(spec.seeds)
    with RunLock(out, "sweep directory"):
        started = not ray.is_initialized()
        if started:
            ray.init(address=ray_address, log_to_driver=False, include_dashboard=False)
        try:
            cpus = ray.cluster_resources().get("CPU", 1.0)
            if cpus < spec.cpus_per_trial:
                raise ConfigError(
                    f"cpus_per_trial {spec.cpus_per_trial:g} is more than the {cpus:g} CPUs Ray "
                    "has; lower it in the spec"
                )
            plan = search_plan(spec)
            at_once = max(1, int(cpus // spec.cpus_per_trial))
            print(_header(spec, plan.how, at_once, base.max_frames, out, resume), flush=True)
            trainable = tune.with_resources(_trainable(spec, out), {"cpu": spec.cpus_per_trial})
            if resume:
                # Tune restores the search, the scheduler, the budget and the progress lines.
                tuner = tune.Tuner.restore(
                    str(experiment), trainable=trainable, resume_unfinished=True,
                    restart_errored=True,
                )  # fmt: skip
            else:
                tuner = tune.Tuner(
                    trainable,
                    param_space=plan.param_space,
                    tune_config=tune.TuneConfig(
                        search_alg=plan.search_alg,
                        scheduler=_scheduler(spec, total_frames),
                        num_samples=plan.num_samples,
                        max_concurrent_trials=at_once,
                    ),
                    run_config=tune.RunConfig(
                        name=spec.name,
                        storage_path=str(out / "tune"),
                        verbose=0,
                        stop=None if spec.hours is None else Budget(spec.hours * 3600),
                        callbacks=[Progress(plan.trials)],
                    ),
                )
            Budget.spent = False
            t0 = time.monotonic()
            grid = tuner.fit()
            wall = time.monotonic() - t0
        finally:
            if started:
                ray.shutdown()
        result = summarize(spec, grid, total_frames, wall, budget_spent=Budget.spent)
        for row in result["trials"]:  # the trials the sweep's end cut: no Tune callback told
            if row["end"] in ("cut", "not started", "interrupted"):
                print(trial_line(row["trial"], row["params"], row, row["end"]), flush=True)
        write_outputs(spec, result, out)
    return result


def _header(
    spec: SweepSpec, how: str, at_once: int, max_frames: int, out: Path, resume: bool
) -> str:
    """The line a sweep starts with: what runs, how many at a time, where it writes."""
    budget = "" if spec.hours is None else f", at most {spec.hours:g} h"
    runs = len(spec.envs) * len(spec.seeds)
    return (
        f"sweep {spec.name}{' (resumed)' if resume else ''}: {how}{budget}, "
        f"{spec.cpus_per_trial:g} CPUs a trial, up to {at_once} at a time; a trial: "
        f"{runs} run{'s' if runs != 1 else ''} ({', '.join(spec.envs)} x seeds "
        f"{', '.join(map(str, spec.seeds))}) of {max_frames:,} frames; early stopping "
        f"{spec.scheduler}; in {out}"
    )


def summarize(
    spec: SweepSpec, grid: Any, total_frames: int, wall_s: float, budget_spent: bool = False
) -> dict[str, Any]:
    """One row a trial (its parameters, score and spread, frames, minutes, how it ended: see
    :func:`trial_end`), the best trial, and the frames early stopping saved: the frames trained
    against those plus what the trials stopped early would have run to the end of their budget
    (an upper bound: a run that reaches ``to_score`` stops sooner)."""
    rows = []
    for res in grid:
        m = res.metrics or {}
        end = trial_end(m, res.error, budget_spent)
        rows.append(
            {
                "trial": str(m.get("trial_id") or (Path(res.path).name if res.path else "?")),
                "params": dict(res.config or {}),
                "score": m.get("score") if end == "finished" else None,
                "score_min": m.get("score_min") if end == "finished" else None,
                "score_max": m.get("score_max") if end == "finished" else None,
                "frames": int(m.get("frames") or 0),
                "minutes": m.get("minutes"),
                "end": end,
                "stopped_early": end == "stopped",
                "reused": list(m.get("reused") or []),
                "reused_dirs": list(m.get("reused_dirs") or []),
                "frames_reused": int(m.get("frames_reused") or 0),
                "error": None if res.error is None else error_line(res.error),
            }
        )
    rows.sort(key=lambda r: r["trial"])
    done = [r for r in rows if r["score"] is not None and not math.isnan(r["score"])]
    pick = max if spec.mode == "max" else min
    best = pick(done, key=lambda r: r["score"]) if done else None
    used = sum(r["frames"] - r["frames_reused"] for r in rows)  # trained here
    saved = sum(max(0, total_frames - r["frames"]) for r in rows if r["end"] == "stopped")
    return {
        "spec": {**spec.__dict__, "space": {k: vars(v) for k, v in spec.space.items()}},
        "trials": rows,
        "best": best,
        "ends": {e: n for e in ENDS if (n := sum(r["end"] == e for r in rows))},
        "frames_used": used,
        "frames_without_early_stopping": used + saved,
        "wall_minutes": wall_s / 60.0,
    }


def format_table(result: dict[str, Any]) -> str:
    spec, rows = result["spec"], result["trials"]
    keys = list(spec["space"])
    if spec["frames_to_score"] is not None:
        objective = f"frames to mean-100 > {spec['frames_to_score']:g} (fewest best)"
    elif spec.get("minutes_to_score") is not None:
        objective = f"training minutes to mean-100 > {spec['minutes_to_score']:g} (fewest best)"
    else:
        objective = f"{spec['metric']} at the end ({spec['mode']})"
    lines = [
        f"rapidrl sweep {spec['name']}: {spec['algo']} --preset {spec['preset']} on "
        f"{', '.join(spec['envs'])}, seeds {', '.join(map(str, spec['seeds']))}; objective "
        f"{objective}, median over seeds; early stopping {spec['scheduler']}",
        "",
        "| trial | " + " | ".join(keys) + " | score | min..max | frames | minutes | end |",
        "| --- | " + " | ".join("---" for _ in keys) + " | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        spread = "-" if r["score"] is None else f"{fmt(r['score_min'])}..{fmt(r['score_max'])}"
        end = r.get("end") or ("stopped" if r["stopped_early"] else "finished")
        how = f"failed: {r['error']}" if end == "failed" and r["error"] else ENDS[end]
        if r.get("reused"):  # the same config and seed as an earlier trial's run: its score
            how += "; reused " + ", ".join(r["reused"])
        lines.append(
            f"| {r['trial']} | " + " | ".join(fmt(r["params"].get(k)) for k in keys)
            + f" | {fmt(r['score'])} | {spread} | {int(r['frames'] or 0):,} | "
            f"{fmt(r['minutes'])} | {how} |"
        )  # fmt: skip
    used, full = result["frames_used"], result["frames_without_early_stopping"]
    ends = result.get("ends") or {}
    stopped = ends.get("stopped", 0)
    lines += [
        "",
        "Trials: " + (", ".join(f"{n} {ENDS[e]}" for e, n in ends.items()) or "none") + ".",
        f"Frames trained: {used:,}; with the {stopped} trial{'s' if stopped != 1 else ''} "
        f"stopped early run to the end of their budget: {full:,}" + (f" ({used / full:.0%})" if full else "")
        + f". Wall time {result['wall_minutes']:.1f} min.",
    ]  # fmt: skip
    if result["best"]:
        b = result["best"]
        lines.append(f"Best: trial {b['trial']}, score {fmt(b['score'])}: {b['params']}")
    return "\n".join(lines) + "\n"


def write_outputs(spec: SweepSpec, result: dict[str, Any], out: Path) -> None:
    """``sweep.json``, ``sweep.md``, ``sweep.csv``, ``best.json`` and ``sweep.png``, each written
    whole or not at all (a crash or a full disk leaves the previous version, never a torn one)."""
    from rapidrl.train.run import atomic_write_text  # imports torch: not before it is needed

    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "sweep.json", json.dumps(result, indent=2, default=str) + "\n")
    atomic_write_text(out / "sweep.md", format_table(result))
    keys = list(spec.space)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["trial", *keys, "score", "score_min", "score_max", "frames", "minutes", "end",
                "stopped_early"])  # fmt: skip
    for r in result["trials"]:
        w.writerow([r["trial"], *(r["params"].get(k) for k in keys), r["score"], r["score_min"],
                    r["score_max"], r["frames"], r["minutes"], r["end"],
                    r["stopped_early"]])  # fmt: skip
    atomic_write_text(out / "sweep.csv", buf.getvalue())
    if result["best"]:
        best = trial_config(spec, result["best"]["params"], spec.envs[0], spec.seeds[0])
        data = {k: v for k, v in config_to_dict(best).items() if k not in ("run_dir", "resume")}
        atomic_write_text(out / "best.json", json.dumps(data, indent=2) + "\n", "the best config")
    try:
        _plot(spec, result, out / "sweep.png")
    except Exception as exc:  # a plot must never lose the table
        print(f"could not plot: {exc}", file=sys.stderr)


def _plot(spec: SweepSpec, result: dict[str, Any], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rapidrl.train.plots import save_png  # imports torch: not before it is needed

    rows = [r for r in result["trials"] if r["score"] is not None]
    keys = list(spec.space)
    fig, axes = plt.subplots(1, 1 + len(keys), figsize=(4 * (1 + len(keys)), 3.2), squeeze=False)
    ax = axes[0][0]
    ax.scatter(range(len(rows)), [r["score"] for r in rows])
    ax.set_xlabel("trial (finished)")
    ax.set_ylabel("score")
    for ax, key in zip(axes[0][1:], keys):
        ax.scatter([r["params"][key] for r in rows], [r["score"] for r in rows])
        if spec.space[key].kind == "loguniform":
            ax.set_xscale("log")
        ax.set_xlabel(key)
    fig.suptitle(f"sweep {spec.name}")
    fig.tight_layout()
    try:
        save_png(fig, png, dpi=90, what="the sweep's plot")
    finally:
        plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """``rapidrl sweep SPEC [--out-dir sweeps] [--ray local|ADDRESS] [--resume]``"""
    from rapidrl.config import parse_config

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-"):
        argv = ["--spec", argv[0], *argv[1:]]
    cfg = parse_config(SweepConfig, {}, argv, prog="rapidrl sweep", description=__doc__)
    if not cfg.spec:
        raise ConfigError("rapidrl sweep SPEC: name the sweep's spec file (YAML, JSON or TOML)")
    spec = load_spec(cfg.spec)
    result = run_sweep(spec, cfg.out_dir, ray_address=cfg.ray, resume=cfg.resume)
    print(format_table(result))
    return 0
