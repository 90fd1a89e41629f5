"""Launching one training as a child process with a wall-clock limit, and reading what it left:
written once for ``rapidrl bench solve``, ``rapidrl bench atari`` and ``rapidrl sweep``.

Not the run loop (:func:`rapidrl.train.runner.run_training` trains in this process):
:func:`launch_training` starts ``rapidrl train ...`` (or any command) in a child process.
Imports only the standard library and, inside functions, :mod:`rapidrl.train.child`,
:mod:`rapidrl.train.checkpoint` and :mod:`rapidrl.train.metrics`."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "read_curve",
    "same_recipe",
    "scores_at",
    "time_split",
    "read_summary",
    "run_state",
    "launch_training",
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


_STOP_GRACE = 300.0  # s: for a stopped trainer to finish its step and write its checkpoint


def _start_child(cmd: Sequence[str], log: Any) -> subprocess.Popen:
    """``cmd`` as a child writing to ``log``. On POSIX in its own process group, made by Popen
    itself (no ``preexec_fn``: it can deadlock in a threaded parent, and Ray Tune runs a trial
    in a thread), so a Ctrl-C in the terminal or a SIGTERM to the bench's group reaches it once,
    forwarded by the bench (:class:`_ForwardStops`), not a second time through the group; its
    other set-up (SIGINT at its default, Linux's parent-death signal) is done in the child by
    :mod:`rapidrl.train.child` before it execs ``cmd``."""
    if os.name != "posix":
        return subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT)
    from rapidrl.train.child import child_argv

    # process_group=0 is setpgid(0, 0) (Python 3.11+); before, a new session is the nearest.
    group: dict[str, Any] = (
        {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
    )
    return subprocess.Popen(child_argv(cmd), stdout=log, stderr=subprocess.STDOUT, **group)


# The child gets SIGTERM from the kernel when the thread that started it ends (rapidrl.train.child).
_PARENT_DEATH_STOPS = sys.platform.startswith("linux")


def _stop_child(proc: subprocess.Popen) -> None:
    """Stop a child still running as a Ctrl-C stops a trainer (one SIGINT: finish the step,
    checkpoint, stop), give it :data:`_STOP_GRACE` seconds, then kill it."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=_STOP_GRACE)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


_PYTHON_DEFAULTS = (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler, None)


class _ForwardStops:
    """While the bench waits for its child (in the main thread; elsewhere a no-op): each SIGINT
    or SIGTERM the bench gets is passed on to the child as one SIGINT, the trainers' Ctrl-C
    (the first: finish the step, checkpoint, stop; a second: abort). ``first``: when the first
    came (monotonic), else None. A signal this process already handles otherwise is left so."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.first: float | None = None
        self._previous: dict[int, Any] = {}

    def _handler(self, signum, frame) -> None:
        if self.first is None:
            self.first = time.monotonic()
        try:
            self.proc.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass

    def __enter__(self) -> _ForwardStops:
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in (signal.SIGINT, signal.SIGTERM):
            # Not a signal that this process already handles its own way (a Ray worker's
            # SIGTERM, an application's): there the child still stops when this process dies.
            if signal.getsignal(sig) in _PYTHON_DEFAULTS:
                self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if previous is None else previous)


def launch_training(
    cmd: Sequence[str],
    log_path: Path,
    limit_seconds: float,
    on_poll: Callable[[], None] | None = None,
    poll_seconds: float = 2.0,
) -> tuple[int | None, float]:
    """Run ``cmd`` with stdout and stderr into ``log_path``; kill it after ``limit_seconds`` (a
    hang: the trainers stop themselves at their budget). Returns ``(exit code or None when
    killed, wall seconds)``. A Ctrl-C or SIGTERM to the bench (or to its process group) is
    passed to the child once, which then has :data:`_STOP_GRACE` seconds to checkpoint and
    stop, and raises ``KeyboardInterrupt`` here after it ended. Any other exception here (one
    raised by ``on_poll``) stops the child the same way before it goes on; but ``SystemExit`` on
    Linux, since the end of this thread or process it brings stops the child once already. The
    child is stopped when this process (on Linux: the thread that started it) dies, however it
    dies (:mod:`rapidrl.train.child`). ``on_poll()`` is called every ``poll_seconds`` while it
    runs and once after (e.g. to pass its new metrics rows on)."""
    t0 = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:
        proc = _start_child(cmd, log)
        with _ForwardStops(proc) as stops:
            try:
                rc: int | None = _wait(proc, t0 + limit_seconds, on_poll, poll_seconds, stops)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
                rc = None
            except SystemExit:
                # Ray Tune ends a stopped trial's thread so, sys.exit() this process: their end
                # is the child's one stop where it has a parent-death signal (Linux). A signal
                # from here too would be its second: abort, without the checkpoint.
                if not _PARENT_DEATH_STOPS:
                    _stop_child(proc)
                raise
            except BaseException:
                # Whatever else ended the wait (a KeyboardInterrupt raised by a handler of this
                # process's own, an error in on_poll): the child stops as after a Ctrl-C, not
                # left training on while this process goes on.
                _stop_child(proc)
                raise
    if stops.first is not None:
        raise KeyboardInterrupt
    return rc, time.monotonic() - t0


def _wait(proc: subprocess.Popen, deadline: float, on_poll, poll_seconds: float, stops) -> int:
    """``proc.wait`` until ``deadline`` (monotonic; once a stop was forwarded, at most
    :data:`_STOP_GRACE` after it), calling ``on_poll`` every ``poll_seconds`` (then once more at
    the end)."""
    while True:
        if stops.first is not None:
            deadline = min(deadline, stops.first + _STOP_GRACE)
        left = deadline - time.monotonic()
        try:
            rc = proc.wait(timeout=max(0.0, min(poll_seconds, left)))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
            if on_poll is not None:
                on_poll()
            continue
        if on_poll is not None:
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
    from rapidrl.train.checkpoint import list_checkpoints

    run_dir = Path(run_dir)
    summary = read_summary(run_dir)
    if summary is not None and summary.get("stop_reason") not in (None, "interrupted"):
        return "done"
    if (run_dir / "checkpoints").is_dir() and list_checkpoints(run_dir / "checkpoints"):
        return "resume"
    return "fresh"


def read_curve(run_dir: Path, column: str = "return_mean_100") -> list[tuple[float, float, float]]:
    """``(minutes, frames, value)`` of every metrics row of the run with a finite ``column``."""
    from rapidrl.train.metrics import read_metrics

    _, rows = read_metrics(Path(run_dir) / "metrics.csv")  # or metrics.csv.gz (a kept record)
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


def scores_at(run_dir: Path, counts: Sequence[int]) -> list[tuple[float, float] | None]:
    """For each frame count, ``(mean-100, minutes)`` at the first metrics row at or past it with
    a finite mean-100: the row of the update that reaches it, where a run with ``--max-frames
    COUNT`` ends. None where the run never got there (or has no metrics)."""
    curve = read_curve(run_dir)  # read once for all the counts
    return [next(((v, m) for m, at, v in curve if at >= n), None) for n in counts]


def time_split(metrics_csv: Path) -> dict[str, float]:
    """Mean seconds per update in the rollout and in the update phase (PPO/PQN columns):
    ``{"mean_rollout_s": ..., "mean_update_s": ...}``, what the run logged of them."""
    from rapidrl.train.metrics import read_metrics

    _, rows = read_metrics(metrics_csv)  # none: {}; metrics.csv.gz where that is all there is
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
