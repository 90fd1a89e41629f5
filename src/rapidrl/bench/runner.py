"""Running one training as a child process with a wall-clock limit, and reading what it left:
written once for ``rapidrl bench solve`` and ``rapidrl bench atari``."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "read_curve",
    "same_recipe",
    "time_split",
    "read_summary",
    "run_state",
    "run_training",
    "stopped_from_outside",
    "split_extra",
    "trainer_argv",
]


def split_extra(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """A bench's own arguments and, after ``--``, those it passes to every trainer as they are."""
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1 :]


def trainer_argv(algo: str, *args: str) -> list[str]:
    """``python -m rapidrl.cli train ALGO ARGS...`` with this interpreter."""
    return [sys.executable, "-m", "rapidrl.cli", "train", algo, *args]


def _die_with(parent: int) -> None:
    """In the child, before exec (Linux): have the kernel send it SIGTERM when the bench process
    dies, however it dies. The trainers take SIGTERM as Ctrl-C (checkpoint and stop), so a killed
    bench, or a Ray task whose worker died, leaves no orphan training on beside the run that
    replaces it. Elsewhere (no prctl) a no-op."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl: nobody will send it
        os.kill(os.getpid(), signal.SIGTERM)


def run_training(
    cmd: Sequence[str],
    log_path: Path,
    limit_seconds: float,
    on_poll: Callable[[], None] | None = None,
    poll_seconds: float = 2.0,
) -> tuple[int | None, float]:
    """Run ``cmd`` with stdout and stderr into ``log_path``; kill it after ``limit_seconds`` (a
    hang: the trainers stop themselves at their budget). Returns ``(exit code or None when
    killed, wall seconds)``. Ctrl-C reaches the child too: it is given a minute to checkpoint.
    The child is stopped when this process (with prctl: the thread that started it) dies
    (:func:`_die_with`). ``on_poll()`` is called every ``poll_seconds`` while it runs and once
    after (e.g. to pass its new metrics rows on)."""
    t0 = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    parent = os.getpid()
    with open(log_path, "a") as log:
        proc = subprocess.Popen(
            list(cmd),
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=(lambda: _die_with(parent)) if sys.platform == "linux" else None,
        )
        try:
            rc: int | None = _wait(proc, t0 + limit_seconds, on_poll, poll_seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
            rc = None
        except KeyboardInterrupt:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    return rc, time.monotonic() - t0


def _wait(proc: subprocess.Popen, deadline: float, on_poll, poll_seconds: float) -> int:
    """``proc.wait`` until ``deadline`` (monotonic), calling ``on_poll`` every ``poll_seconds``
    (then once more at the end)."""
    if on_poll is None:
        return proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    while True:
        left = deadline - time.monotonic()
        try:
            rc = proc.wait(timeout=max(0.0, min(poll_seconds, left)))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
            on_poll()
            continue
        on_poll()
        return rc


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """The run's ``summary.json``, or None when there is none (or it is torn)."""
    try:
        return json.loads((Path(run_dir) / "summary.json").read_text())
    except (OSError, ValueError):
        return None


def stopped_from_outside(run_dir: Path) -> bool:
    """The run's trainer was stopped by a signal (Ctrl-C, or one sent to it alone): it
    checkpointed, wrote an ``interrupted`` summary and exited 0. Not a failure: the benches stop
    there and the same command resumes it."""
    return (read_summary(run_dir) or {}).get("stop_reason") == "interrupted"


def run_state(run_dir: Path) -> str:
    """``done`` (a summary with a final stop reason), ``resume`` (a checkpoint to go on from),
    or ``fresh`` (nothing worth keeping)."""
    from rapidrl.train import list_checkpoints

    run_dir = Path(run_dir)
    summary = read_summary(run_dir)
    if summary is not None and summary.get("stop_reason") not in (None, "interrupted"):
        return "done"
    if (run_dir / "checkpoints").is_dir() and list_checkpoints(run_dir / "checkpoints"):
        return "resume"
    return "fresh"


def read_curve(run_dir: Path, column: str = "return_mean_100") -> list[tuple[float, float, float]]:
    """``(minutes, frames, value)`` of every metrics row of the run with a finite ``column``."""
    from rapidrl.train import read_metrics

    path = Path(run_dir) / "metrics.csv"
    if not path.exists():
        return []
    _, rows = read_metrics(str(path))
    out = []
    for row in rows:
        try:
            value = float(row.get(column) or "nan")
            minutes, frames = float(row["seconds"]) / 60.0, float(row["frames"])
        except (KeyError, ValueError):
            continue
        if math.isfinite(value):
            out.append((minutes, frames, value))
    return out


def time_split(metrics_csv: Path) -> dict[str, float]:
    """Mean seconds per update in the rollout and in the update phase (PPO/PQN columns):
    ``{"mean_rollout_s": ..., "mean_update_s": ...}``, what the run logged of them."""
    from rapidrl.train import read_metrics

    if not Path(metrics_csv).exists():
        return {}
    _, rows = read_metrics(str(metrics_csv))
    out = {}
    for key in ("rollout_s", "update_s"):
        vals = [float(r[key]) for r in rows if r.get(key) not in (None, "", "nan")]
        vals = [v for v in vals if math.isfinite(v)]
        if vals:
            out[f"mean_{key}"] = sum(vals) / len(vals)
    return out


# A trainer's flags that may differ between two runs of the same recipe (each takes a value).
_NOT_RECIPE = ("--run-dir", "--max-minutes", "--torch-threads")


def same_recipe(cmd: Sequence[str]) -> list[str]:
    """A trainer command (:func:`trainer_argv`) without what may differ between two runs of the
    same recipe: the interpreter, the run dir, the time budget and the thread count."""
    out, skip = [], False
    for arg in list(cmd)[1:]:
        if skip:
            skip = False
        elif arg in _NOT_RECIPE:
            skip = True
        else:
            out.append(arg)
    return out
