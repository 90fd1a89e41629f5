"""The live progress bar and the end-of-run ``summary.json``."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from rapidrl.train.metrics import EpisodeTracker
from rapidrl.train.run import atomic_write_text

__all__ = ["Progress", "write_summary"]


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "-"
    a = abs(v)
    return f"{v:.3g}" if a < 1e-2 or a >= 1e4 else f"{v:.3f}".rstrip("0").rstrip(".")


class Progress:
    """A tqdm bar over frames: frames, frames/s, episodes, mean of the last 100, and extras.

    ``enabled=None`` (default) shows the bar only when ``file`` (stderr) is a terminal;
    ``enabled=False`` (``--no-progress``) shows nothing. ``update`` is cheap to call every step:
    the bar is redrawn at most every ``min_interval`` seconds. ``initial`` is the resumed frame
    count, so a resumed run's bar starts where the run stands.
    """

    def __init__(
        self,
        total_frames: int | None,
        *,
        initial: int = 0,
        enabled: bool | None = None,
        min_interval: float = 0.5,
        file: IO[str] | None = None,
        desc: str | None = None,
    ):
        file = file if file is not None else sys.stderr
        if enabled is None:
            enabled = hasattr(file, "isatty") and file.isatty()
        self.enabled = bool(enabled)
        self.min_interval = min_interval
        self._last = -math.inf
        self._bar = None
        if self.enabled:
            self._bar = tqdm(
                total=total_frames,
                initial=initial,
                desc=desc,
                unit="fr",
                unit_scale=True,
                dynamic_ncols=True,
                file=file,
                mininterval=0,  # we throttle ourselves
                smoothing=0.1,
            )

    def update(
        self, frames: int, tracker: EpisodeTracker | None = None, *, force: bool = False, **extras
    ) -> None:
        """Move the bar to ``frames``; show ``tracker``'s episodes and mean-100 and ``extras``
        (e.g. ``epsilon=0.1, loss=0.02``). Redraws at most every ``min_interval`` seconds."""
        if self._bar is None:
            return
        now = time.monotonic()
        if not force and now - self._last < self.min_interval:
            return
        self._last = now
        post: dict[str, str] = {}
        if tracker is not None:
            post["ep"] = str(tracker.episodes)
            post["mean100"] = _fmt(tracker.mean)
        post.update({k: _fmt(v) for k, v in extras.items()})
        self._bar.set_postfix(post, refresh=False)
        self._bar.update(frames - self._bar.n)  # refreshes (mininterval=0)

    def write(self, text: str) -> None:
        """Print a line without breaking the bar (plain print when disabled)."""
        if self._bar is not None:
            self._bar.write(text)
        else:
            print(text, file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_summary(
    path: str | os.PathLike,
    *,
    frames: int,
    seconds: float,
    tracker: EpisodeTracker,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``summary.json`` atomically: frames, seconds, episodes, final and best mean-100
    (null while fewer than 100 episodes exist), solved, frames_to_solve, seconds_to_solve, plus
    ``extra`` (e.g. algo, env_id, stop_at_score)."""

    def num(x: float) -> float | None:
        return None if x is None or math.isnan(x) else float(x)

    summary = {
        "frames": int(frames),
        "seconds": float(seconds),
        "episodes": tracker.episodes,
        "return_mean_100": num(tracker.mean),
        "best_return_mean_100": num(tracker.best_mean),
        "stop_at_score": tracker.stop_at_score,
        "solved": tracker.solved,
        "frames_to_solve": tracker.frames_to_solve,
        "seconds_to_solve": tracker.seconds_to_solve,
        **(extra or {}),
    }
    return atomic_write_text(path, json.dumps(summary, indent=2) + "\n", "the run summary")
