"""The lines a sweep prints and tabulates about its trials: how each ended (from Tune's record of
it), a line at each start and end, the progress line. No Ray here: :mod:`rapidrl.sweep.run` and
its Tune callbacks (:mod:`rapidrl.sweep.tune_hooks`) both use them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["ENDS", "error_line", "fmt", "progress_line", "trial_end", "trial_line"]

ENDS = {
    "finished": "finished",
    "stopped": "stopped early",
    "cut": "cut by the budget",
    "not started": "not started",
    "failed": "failed",
    "interrupted": "interrupted",
}
"""How a trial ended (:func:`trial_end`), as the table and the printed lines say it."""


def fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def trial_end(metrics: dict[str, Any] | None, error: Any, budget_spent: bool) -> str:
    """How a trial ended (a key of :data:`ENDS`), from Tune's record of it (a ``Result``'s
    ``metrics`` and ``error``, or a ``Trial``'s ``last_result``): ``failed`` (an error),
    ``finished`` (its final result, every run done), ``stopped`` (the scheduler stopped it: Tune
    marks the result it stopped the trial at ``done``). A trial still running or waiting when
    the sweep ended was ``cut`` (it had started: a report, or Tune's record of its worker, its
    ``pid``) or ``not started`` when the time budget ran out (``budget_spent``), else
    ``interrupted`` (a Ctrl-C: ``--resume`` goes on with it)."""
    m = metrics or {}
    if error is not None:
        return "failed"
    if m.get("finished"):
        return "finished"
    if m.get("done"):
        return "stopped"
    if not budget_spent:
        return "interrupted"
    return "cut" if "frames" in m or "pid" in m else "not started"


def error_line(error: Any) -> str:
    """An error in one line: that of the exception Ray wrapped (``RayTaskError.cause``), its
    type and first line."""
    if error is None:
        return ""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        error = cause
    lines = [line for line in str(error).splitlines() if line.strip()]
    first = lines[0].strip() if lines else ""
    return f"{type(error).__name__}: {first}" if isinstance(error, BaseException) else first


def _params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={fmt(v)}" for k, v in params.items())


def trial_line(
    trial: str, params: dict[str, Any], metrics: dict[str, Any] | None, end: str,
    error: Any = None,
) -> str:  # fmt: skip
    """The line printed as a trial starts (``end`` = ``started``) or ends (a key of
    :data:`ENDS`): its parameters, and its score, frames and minutes as far as it got."""
    m = metrics or {}
    if end == "started":
        return f"  trial {trial} started: {_params_text(params)}"
    frames = int(m.get("frames") or 0)
    if end == "finished":
        minutes = m.get("minutes")
        text = (
            f"finished: score {fmt(m.get('score'))} ({fmt(m.get('score_min'))}.."
            f"{fmt(m.get('score_max'))}), {frames:,} frames"
            + ("" if minutes is None else f", {float(minutes):.1f} min")
        )
        if m.get("reused"):
            text += "; reused " + ", ".join(m["reused"])
    elif end == "stopped":
        text = f"stopped early at {frames:,} frames (mean-100 {fmt(m.get('curve'))})"
    elif end == "cut":
        text = f"cut by the budget at {frames:,} frames"
    elif end == "not started":
        text = "not started: the budget ran out first"
    elif end == "failed":
        text = f"FAILED: {error_line(error) if error is not None else m.get('error') or '?'}"
    else:
        text = f"interrupted at {frames:,} frames: --resume goes on with it"
    return f"  trial {trial} ({_params_text(params)}) {text}"


def progress_line(states: Sequence[str], total: int, minutes: float) -> str:
    """``  progress: 3 of 6 trials ended (2 finished, 1 stopped early), 1 running; 4.2 min``
    from each trial's state (a key of :data:`ENDS`, or ``running``, ``pending``...)."""
    counts = Counter(states)
    ended = sum(counts[e] for e in ENDS)
    how = ", ".join(f"{counts[e]} {ENDS[e]}" for e in ENDS if counts[e])
    line = f"  progress: {ended} of {max(total, len(states))} trials ended"
    if how:
        line += f" ({how})"
    if counts["running"]:
        line += f", {counts['running']} running"
    return line + f"; {minutes:.1f} min"
