"""One session of a run: :class:`RunSession` (the metrics log, progress bar, stop check, summary
and learning curve around every training loop), the stop rules (:func:`stop_reason`), the
"every N seconds and/or every N frames" cadence of rows and checkpoints (:class:`Every`), and
:class:`LogEvent` (what ``train(..., on_log=fn)`` hands ``fn``)."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from rapidrl.hardware import describe, hardware_record
from rapidrl.train.metrics import EpisodeTracker, MetricsLogger, RunClock
from rapidrl.train.plots import plot_learning_curve
from rapidrl.train.progress import Progress, write_summary
from rapidrl.train.run import RunDir
from rapidrl.train.track import WandbTracker, make_tracker

__all__ = ["Every", "LogEvent", "RunSession", "stop_reason"]


@dataclasses.dataclass
class LogEvent:
    """What ``train(..., on_log=fn)`` hands ``fn`` after every metrics row (every trainer);
    ``fn`` returning True stops the run like Ctrl-C (checkpoint, summary)."""

    frames: int
    row: dict[str, Any]
    run_dir: Path
    actor_pids: list[int | None] = dataclasses.field(default_factory=list)
    """Pids of the processes that step the envs for this run (actor processes, Ray workers)."""


def stop_reason(
    *,
    interrupted: bool,
    solved: bool,
    frames: int,
    max_frames: int,
    seconds: float,
    max_minutes: float | None,
) -> str | None:
    """Why a run stops now (checked in this order), or None to go on."""
    if interrupted:
        return "interrupted"
    if solved:
        return "solved"
    if frames >= max_frames:
        return "max_frames"
    if max_minutes is not None and seconds >= 60 * max_minutes:
        return "max_minutes"
    return None


class RunSession:
    """What every training loop does around its algorithm, written once: open the metrics log
    (CSV + TensorBoard, the config as text) and the progress bar, check the stop conditions at the
    top of each iteration, log rows, and at the end write ``summary.json`` and plot the learning
    curve. One session is one start or resume of a run::

        session = RunSession(run, cfg, algo="ppo", env_id=..., device=..., tracker=tracker,
                             clock=clock, stop_score=stop_score)
        try:
            envs = ...
            session.open(columns=METRIC_COLUMNS, frames=frames, desc="ppo CartPole-v1")
            with StopOnInterrupt() as stop:
                while not session.should_stop(stop, frames):
                    ...                              # the algorithm's iteration
                    session.cadence(frames, log_every=..., ckpt_every=..., row=..., save=...,
                                    on_log=on_log)   # a row / a checkpoint when due
            summary = session.end(frames, row=..., save=..., steps=..., updates=...,
                                  title="PPO CartPole-v1")  # last checkpoint, row, summary
        finally:
            session.close()
            envs.close()

    ``cfg`` is a trainer config (DQN or PPO): ``resume``, ``tensorboard``, ``no_progress``,
    ``max_frames`` and ``max_minutes`` are read from it. ``recurrent`` (PPO) goes into the
    summary after ``algo`` (None: no such key).
    """

    def __init__(
        self,
        run: RunDir,
        cfg: Any,
        *,
        algo: str,
        env_id: str,
        device: torch.device,
        tracker: EpisodeTracker,
        clock: RunClock,
        stop_score: float | None,
        recurrent: bool | None = None,
    ):
        self.run = run
        self.cfg = cfg
        self.algo = algo
        self.recurrent = recurrent
        self.env_id = env_id
        self.device = device
        self.tracker = tracker
        self.clock = clock
        self.stop_score = stop_score
        self.resuming = cfg.resume is not None
        self.log: MetricsLogger | None = None
        self.bar: Progress | None = None
        self.track: WandbTracker | None = None
        """The W&B run of --track wandb (None: none)."""
        self.reason: str | None = None
        """Why the run stopped (set by :meth:`should_stop`)."""
        self.callback_stop = False
        """Set when the ``on_log`` callback asks to stop: the stop reason is then "callback"."""
        self.last_row_frames: int | None = None
        self._start: tuple[float, int] = (time.monotonic(), 0)

    def open(self, *, columns: Sequence[str], frames: int, desc: str) -> None:
        """Open ``metrics.csv`` (a resumed run keeps its rows up to ``frames``; a fresh run logs
        its config to TensorBoard) and the progress bar at ``frames``; start this session's
        frames-per-second and the clock's fps count."""
        cfg, run = self.cfg, self.run
        self.log = MetricsLogger(
            run.metrics_csv,
            run.tb if cfg.tensorboard else None,
            columns=columns,
            resume_frames=frames if self.resuming else None,
        )
        if not self.resuming:
            self.log.log_text("config", "```\n" + run.config_json.read_text() + "\n```")
        self.track = make_tracker(  # None: no --track
            cfg, run.path, resume_frames=frames if self.resuming else None,
            metrics_csv=run.metrics_csv,
        )  # fmt: skip
        self.bar = Progress(
            cfg.max_frames,
            initial=frames,
            enabled=False if cfg.no_progress else None,
            desc=desc,
        )
        self._start = (time.monotonic(), frames)
        self.clock.fps(frames)
        # Every figure says where it came from: the CPU (and its learner ISAs) at the start.
        print(f"{self.algo} on {describe()}; device {self.device}", file=sys.stderr)

    def should_stop(self, stop: Any, frames: int) -> bool:
        """Whether to stop now, at ``frames`` (``stop``: the loop's ``StopOnInterrupt``); the
        reason is kept in :attr:`reason`: "interrupted" (Ctrl-C), "callback" (``on_log``),
        "solved", "max_frames" or "max_minutes"."""
        self.reason = stop_reason(
            interrupted=stop.requested or self.callback_stop,
            solved=self.tracker.solved and self.stop_score is not None,
            frames=frames,
            max_frames=self.cfg.max_frames,
            seconds=self.clock.seconds,
            max_minutes=self.cfg.max_minutes,
        )
        if self.reason and self.callback_stop and not stop.requested:
            self.reason = "callback"
        return self.reason is not None

    def log_row(self, frames: int, row: Mapping[str, Any]) -> None:
        """One metrics row at ``frames``."""
        assert self.log is not None, "open() first"
        self.log.log(frames, row)
        self.last_row_frames = frames
        if self.track is not None:
            self.track.log(frames, row)

    def cadence(
        self,
        frames: int,
        *,
        log_every: Every,
        ckpt_every: Every,
        row: Callable[[], Mapping[str, Any]],
        save: Callable[[int], None],
        on_log: Callable[[LogEvent], bool | None] | None = None,
        pids: Sequence[int | None] = (),
    ) -> None:
        """The last step of every loop's iteration, at ``frames``: a metrics row (``row()``)
        when ``log_every`` is due, handed to ``on_log`` (True stops the run like Ctrl-C; ``pids``:
        the processes stepping the envs); a checkpoint (``save(frames)``) when ``ckpt_every`` is
        due, and then the rows it covers to W&B (``--track``)."""
        if log_every.due(frames):
            log_every.mark(frames)
            values = row()
            self.log_row(frames, values)
            if on_log is not None and on_log(
                LogEvent(frames, dict(values), self.run.path, list(pids))
            ):
                self.callback_stop = True
        if ckpt_every.due(frames):
            ckpt_every.mark(frames)
            save(frames)
            if self.track is not None:  # W&B gets the rows a checkpoint covers: see track.py
                self.track.commit(frames)

    def end(
        self,
        frames: int,
        *,
        row: Callable[[], Mapping[str, Any]],
        save: Callable[[int], None],
        **summary: Any,
    ) -> dict[str, Any]:
        """The end of every loop: a last checkpoint, a last row (unless one was just logged at
        ``frames``), then :meth:`finish` with ``summary`` (steps, updates, title, ...)."""
        save(frames)
        if frames != self.last_row_frames:
            self.log_row(frames, row())
        return self.finish(frames, **summary)

    def finish(
        self,
        frames: int,
        *,
        steps: int,
        updates: int,
        grad_steps: int | None = None,
        title: str,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The end of a session that ran to its stop: close the log and the bar, write
        ``summary.json`` (the tracker's numbers, then algo, [recurrent,] env, stop_reason, steps,
        updates, [grad_steps,] this session's frames_per_second, device, run_dir, hardware (the CPU:
        :func:`rapidrl.hardware.hardware_record`), then ``extra``),
        plot the learning curve (a failed plot is a warning: it must never lose a finished run);
        return the summary as written. The run dir's lock is released last."""
        self._close_log()
        start_time, start_frames = self._start
        session_s = time.monotonic() - start_time
        fields: dict[str, Any] = {"algo": self.algo}
        if self.recurrent is not None:
            fields["recurrent"] = self.recurrent
        fields.update(env=self.env_id, stop_reason=self.reason, steps=steps, updates=updates)
        if grad_steps is not None:
            fields["grad_steps"] = grad_steps
        fields.update(
            frames_per_second=(frames - start_frames) / session_s if session_s > 0 else None,
            device=str(self.device),
            run_dir=str(self.run.path),
            hardware=hardware_record(),
        )
        write_summary(
            self.run.summary_json,
            frames=frames,
            seconds=self.clock.seconds,
            tracker=self.tracker,
            extra={**fields, **(extra or {})},
        )
        summary = json.loads(self.run.summary_json.read_text())
        try:
            plot_learning_curve(
                self.run.metrics_csv,
                self.run.learning_curve_png,
                title=title,
                stop_at_score=self.stop_score,
            )
        except Exception as exc:  # a plot must never lose a finished run
            warnings.warn(f"could not plot the learning curve: {exc}", stacklevel=3)
        if self.track is not None:
            track, self.track = self.track, None
            track.finish(summary, self.run.learning_curve_png)
        self.run.release()
        return summary

    def _close_log(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.log is not None:
            log, self.log = self.log, None
            log.close()

    def close(self) -> None:
        """Close the metrics log and the progress bar, end the W&B run of a session that did not
        finish (as failed, without the rows no checkpoint covers), release the run dir's lock
        (again: nothing). The lock is released even if closing the log fails (a full disk)."""
        try:
            self._close_log()
            if self.track is not None:
                track, self.track = self.track, None
                track.abort()
        finally:
            self.run.release()


class Every:
    """True every ``seconds`` of wall time and/or every ``frames`` frames, whichever comes first.

    The frame cadence is deterministic (``frames // every`` blocks done, saved through
    ``state_dict`` so a resumed run does not repeat a block); the time cadence is not saved.
    """

    def __init__(self, seconds: float | None = None, frames: int | None = None):
        self.seconds = seconds or None
        self.frames = frames or None
        self.blocks = 0
        self.last_time = time.monotonic()

    def due(self, frames: int, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        by_frames = self.frames is not None and frames // self.frames > self.blocks
        by_time = self.seconds is not None and now - self.last_time >= self.seconds
        return bool(by_frames or by_time)

    def mark(self, frames: int, now: float | None = None) -> None:
        """Record that the action was done at ``frames``."""
        if self.frames is not None:
            self.blocks = frames // self.frames
        self.last_time = time.monotonic() if now is None else now

    def state_dict(self) -> dict[str, int]:
        return {"blocks": self.blocks}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.blocks = int(state["blocks"])
        self.last_time = time.monotonic()
