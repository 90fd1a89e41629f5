"""``rapidrl sweep SPEC``: a hyperparameter search on Ray Tune, seeds per trial, bad trials stopped
early from their learning curves.

Ray Tune does the scheduling, searching and resuming: Optuna's TPE sampler through Tune's search
API (``OptunaSearch``), ASHA or the median rule as the scheduler. A trial runs the spec's envs x
seeds one after the other, each an ordinary run directory under ``OUT/NAME/trials/TRIAL/``
(``rapidrl train``'s files: resumable, plottable, evaluable). The first run reports every
metrics row to Tune (``frames`` and the learning curve ``curve``, the mean-100): the scheduler
compares trials there and stops the hopeless ones early. A trial that gets through runs its other
seeds and reports its ``score``: the median over seeds of the objective (averaged over the envs),
with the spread kept. On a cluster (``--ray ADDRESS``) trials run side by side, ``cpus_per_trial``
CPUs each; on one machine as many as its CPUs allow.

A stopped sweep (Ctrl-C, a lost machine) goes on with ``--resume``: Tune keeps the finished
trials and starts the unfinished ones again, and each of their runs resumes from its own run
directory's newest checkpoint.

Output in ``OUT/NAME/``: ``sweep.md`` and ``sweep.csv`` (trial, parameters, score and spread,
frames, minutes, stopped early or not), ``sweep.json``, ``sweep.png`` (score against trial and
against each parameter) and ``best.json``: the best trial's config, for ``rapidrl train ALGO
--config best.json``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rapidrl.config import ConfigError, config_to_dict
from rapidrl.sweep.spec import SweepSpec, load_spec, trial_config

__all__ = ["SweepConfig", "main", "run_sweep", "run_trial", "tune_space"]

_UNSOLVED = 2.0  # frames/minutes_to_score of a run that never reached the score: this x its budget


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
    if spec.metric == "return_mean_100":
        value = summary.get("return_mean_100")
        return float("nan") if value is None else float(value)
    from rapidrl.train.metrics import read_metrics

    _, rows = read_metrics(run_dir / "metrics.csv")
    values = [float(r[spec.metric]) for r in rows if r.get(spec.metric) not in (None, "")]
    return values[-1] if values else float("nan")


def _same_run_elsewhere(trial_dir: Path, name: str, fields: dict[str, Any]) -> Path | None:
    """A finished run of another trial of this sweep with the same config, seed included (a
    sampler may propose a choice it proposed before). A run is deterministic for its config and
    seed on one machine with the same threads, so training it again would repeat it."""
    from rapidrl.bench.runner import run_state

    for other in sorted(trial_dir.parent.glob(f"*/{name}.config.json")):
        if other.parent == trial_dir:
            continue
        try:
            if json.loads(other.read_text()) != fields:
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
    sweep started again); one that another trial already ran with the same config and seed is
    copied from it, not trained again (``reused`` in the result names those runs). A trainer
    that fails raises ``RuntimeError`` with its log's tail."""
    from rapidrl.bench.runner import run_training, trainer_argv
    from rapidrl.train.metrics import read_metrics
    from rapidrl.train.run import RunDir

    runs = [(env, seed) for seed in spec.seeds for env in spec.envs]
    reused: list[str] = []
    scores: dict[int, list[float]] = {}
    frames_total, seconds_total, frames_reused = 0, 0.0, 0
    for i, (env, seed) in enumerate(runs):
        cfg = trial_config(spec, params, env, seed)
        name = f"{_slug(env)}-seed-{seed}"
        run_dir, log = trial_dir / name, trial_dir / f"{name}.log"
        summary_path = run_dir / "summary.json"
        was_reused = False
        done = summary_path.exists() and json.loads(summary_path.read_text()).get(
            "stop_reason"
        ) not in (None, "interrupted")
        if not done:
            if RunDir(run_dir).has_checkpoints():
                cmd = trainer_argv(spec.algo, "--resume", str(run_dir), "--no-progress")
            else:
                trial_dir.mkdir(parents=True, exist_ok=True)
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
                config = trial_dir / f"{name}.config.json"
                config.write_text(json.dumps(fields, indent=1) + "\n")
                cmd = trainer_argv(spec.algo, "--config", str(config), "--run-dir", str(run_dir))
                twin = _same_run_elsewhere(trial_dir, name, fields)
                if twin is not None:
                    if run_dir.exists():
                        shutil.rmtree(run_dir)
                    shutil.copytree(twin, run_dir, ignore=shutil.ignore_patterns("checkpoints"))
                    reused.append(f"{name} (from trial {twin.parent.name})")
                    was_reused, cmd = True, None
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
                rc = 0
            else:
                rc, _ = run_training(cmd, log, 10 * 24 * 3600.0, on_poll=pass_rows)
            if rc != 0 or not summary_path.exists():
                tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
                raise RuntimeError(f"{' '.join(cmd)} exited with {rc}; {log}:\n{tail}")
        summary = json.loads(summary_path.read_text())
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
    """Run (or go on with) the sweep; write the table, plot and best config; return the
    result."""
    try:
        import ray
        from ray import tune
        from ray.tune.search.optuna import OptunaSearch
    except ImportError as exc:
        raise ConfigError(
            f"rapidrl sweep needs Ray Tune and Optuna ({exc}): pip install 'rapidrl[sweep]'"
        ) from None
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
            trainable = tune.with_resources(_trainable(spec, out), {"cpu": spec.cpus_per_trial})
            if resume:
                tuner = tune.Tuner.restore(
                    str(experiment), trainable=trainable, resume_unfinished=True,
                    restart_errored=True,
                )  # fmt: skip
            else:
                tuner = tune.Tuner(
                    trainable,
                    param_space=tune_space(spec),
                    tune_config=tune.TuneConfig(
                        search_alg=OptunaSearch(metric="score", mode=spec.mode, seed=0),
                        scheduler=_scheduler(spec, total_frames),
                        num_samples=spec.trials,
                        max_concurrent_trials=max(1, int(cpus // spec.cpus_per_trial)),
                        time_budget_s=None if spec.hours is None else spec.hours * 3600,
                    ),
                    run_config=tune.RunConfig(
                        name=spec.name, storage_path=str(out / "tune"), verbose=0
                    ),
                )
            t0 = time.monotonic()
            grid = tuner.fit()
            wall = time.monotonic() - t0
        finally:
            if started:
                ray.shutdown()
        result = summarize(spec, grid, total_frames, wall)
        write_outputs(spec, result, out)
    return result


def summarize(spec: SweepSpec, grid: Any, total_frames: int, wall_s: float) -> dict[str, Any]:
    """One row a trial (its parameters, score and spread, frames, minutes, stopped early or
    not), the best trial, and the frames early stopping saved."""
    rows = []
    for res in grid:
        m = res.metrics or {}
        rows.append(
            {
                "trial": str(m.get("trial_id") or (Path(res.path).name if res.path else "?")),
                "params": dict(res.config or {}),
                "score": m.get("score") if m.get("finished") else None,
                "score_min": m.get("score_min") if m.get("finished") else None,
                "score_max": m.get("score_max") if m.get("finished") else None,
                "frames": m.get("frames", 0),
                "minutes": m.get("minutes"),
                "stopped_early": not m.get("finished", False) and res.error is None,
                "reused": list(m.get("reused") or []),
                "frames_reused": int(m.get("frames_reused") or 0),
                "error": None if res.error is None else str(res.error).splitlines()[0],
            }
        )
    rows.sort(key=lambda r: r["trial"])
    done = [r for r in rows if r["score"] is not None and not math.isnan(r["score"])]
    pick = max if spec.mode == "max" else min
    best = pick(done, key=lambda r: r["score"]) if done else None
    used = sum(int(r["frames"] or 0) - r["frames_reused"] for r in rows)  # trained here
    return {
        "spec": {**spec.__dict__, "space": {k: vars(v) for k, v in spec.space.items()}},
        "trials": rows,
        "best": best,
        "frames_used": used,
        "frames_without_early_stopping": total_frames * len(rows),
        "wall_minutes": wall_s / 60.0,
    }


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


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
        "| trial | "
        + " | ".join(keys)
        + " | score | min..max | frames | minutes | stopped early |",
        "| --- | " + " | ".join("---" for _ in keys) + " | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        spread = "-" if r["score"] is None else f"{_fmt(r['score_min'])}..{_fmt(r['score_max'])}"
        early = "yes" if r["stopped_early"] else (f"error: {r['error']}" if r["error"] else "no")
        if r.get("reused"):  # the same config and seed as an earlier trial: copied, not trained
            early += "; reused " + ", ".join(r["reused"])
        lines.append(
            f"| {r['trial']} | " + " | ".join(_fmt(r["params"].get(k)) for k in keys)
            + f" | {_fmt(r['score'])} | {spread} | {int(r['frames'] or 0):,} | "
            f"{_fmt(r['minutes'])} | {early} |"
        )  # fmt: skip
    used, full = result["frames_used"], result["frames_without_early_stopping"]
    lines += [
        "",
        f"Frames run: {used:,}; the same trials without early stopping: {full:,} "
        f"({used / full:.0%}). Wall time {result['wall_minutes']:.1f} min.",
    ]
    if result["best"]:
        b = result["best"]
        lines.append(f"Best: trial {b['trial']}, score {_fmt(b['score'])}: {b['params']}")
    return "\n".join(lines) + "\n"


def write_outputs(spec: SweepSpec, result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (out / "sweep.md").write_text(format_table(result))
    keys = list(spec.space)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["trial", *keys, "score", "score_min", "score_max", "frames", "minutes",
                "stopped_early"])  # fmt: skip
    for r in result["trials"]:
        w.writerow([r["trial"], *(r["params"].get(k) for k in keys), r["score"], r["score_min"],
                    r["score_max"], r["frames"], r["minutes"], r["stopped_early"]])  # fmt: skip
    (out / "sweep.csv").write_text(buf.getvalue())
    if result["best"]:
        best = trial_config(spec, result["best"]["params"], spec.envs[0], spec.seeds[0])
        data = {k: v for k, v in config_to_dict(best).items() if k not in ("run_dir", "resume")}
        (out / "best.json").write_text(json.dumps(data, indent=2) + "\n")
    try:
        _plot(spec, result, out / "sweep.png")
    except Exception as exc:  # a plot must never lose the table
        print(f"could not plot: {exc}", file=sys.stderr)


def _plot(spec: SweepSpec, result: dict[str, Any], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    fig.savefig(png, dpi=90)
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
