"""Episode statistics, the run clock, and the metrics log (CSV + TensorBoard).

CSV columns
-----------
``metrics.csv`` has one header line and one row per ``MetricsLogger.log``. The columns are
``KNOWN_COLUMNS`` + the ``columns`` passed to the logger + the keys of the first row, in that
order. A later row with a key not yet in the header makes the logger *rewrite the file* with
the widened header (earlier rows get empty cells there; atomic, so a crash keeps the old file):
no value is ever dropped and every line always has as many cells as the header. Pass the loss
names up front as ``columns=`` to avoid the rewrite. Missing values and NaN are empty cells.

TensorBoard tags
----------------
``frames`` is the global step. A key with a ``/`` is used as the tag as it is; otherwise keys
containing ``loss`` go under ``losses/`` and all others under ``charts/``
(``"td_loss"`` -> ``losses/td_loss``, ``"return_mean_100"`` -> ``charts/return_mean_100``).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
import time
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rapidrl.train.run import RunWriteError, atomic_write_text, write_failed

__all__ = ["KNOWN_COLUMNS", "EpisodeTracker", "MetricsLogger", "RunClock", "read_metrics"]

KNOWN_COLUMNS = ("frames", "seconds", "fps", "episodes", "return_mean_100")


# --------------------------------------------------------------------------------------------
# Episode statistics
# --------------------------------------------------------------------------------------------
class EpisodeTracker:
    """Counts finished episodes from the vector-env ``infos`` and tracks the last-``window`` mean.

    Solved rule (the Pong convention "the mean score of the last 100 games is larger than 18"):
    the run is solved at the first episode end where a *full* window of ``window`` episodes
    exists and its mean is strictly greater than ``stop_at_score``. With fewer than ``window``
    episodes the run is never solved (a lucky first few games must not stop it), and
    ``best_mean`` stays NaN; ``mean`` is then the mean of the episodes there are (for display).
    """

    def __init__(self, stop_at_score: float | None = None, window: int = 100):
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.stop_at_score = stop_at_score
        self.window = window
        self.episodes = 0
        self.returns: deque[float] = deque(maxlen=window)
        self.lengths: deque[int] = deque(maxlen=window)
        self.best_mean = math.nan
        self.solved = False
        self.frames_to_solve: int | None = None
        self.seconds_to_solve: float | None = None

    def update(self, infos: Mapping[str, Any], frames: int, seconds: float) -> int:
        """Consume one step's ``infos``; ``frames``/``seconds`` are the run's totals after that
        step (used as frames/seconds to solve). Returns how many episodes ended."""
        try:
            ended = np.asarray(infos["episode_end"], dtype=bool)
        except KeyError:
            raise KeyError(
                "infos has no 'episode_end': EpisodeTracker needs the rapidrl vector API infos "
                "(episode_end, episode_return, episode_length; see rapidrl.vector.api)"
            ) from None
        if not ended.any():
            return 0
        idx = np.flatnonzero(ended)
        rets = np.asarray(infos["episode_return"])[idx]
        lens = np.asarray(infos["episode_length"])[idx]
        for r, n in zip(rets.tolist(), lens.tolist()):
            self.add_episode(r, n, frames, seconds)
        return len(idx)

    def add_episodes(self, returns: Any, lengths: Any, frames: int, seconds: float) -> None:
        """Record the episodes a batch from elsewhere (a Ray worker) reports as finished: their
        ``returns`` and ``lengths`` arrays, all at ``frames`` / ``seconds``."""
        for ret, length in zip(np.asarray(returns).tolist(), np.asarray(lengths).tolist()):
            self.add_episode(ret, length, frames, seconds)

    def add_episode(self, ret: float, length: int, frames: int, seconds: float) -> None:
        """Record one finished episode (``update`` calls this for each)."""
        self.episodes += 1
        self.returns.append(float(ret))
        self.lengths.append(int(length))
        if len(self.returns) < self.window:
            return
        mean = float(np.mean(self.returns))
        if not mean <= self.best_mean:  # also true while best_mean is NaN
            self.best_mean = mean
        if not self.solved and self.stop_at_score is not None and mean > self.stop_at_score:
            self.solved = True
            self.frames_to_solve = int(frames)
            self.seconds_to_solve = float(seconds)

    @property
    def mean(self) -> float:
        """Mean return of the last ``window`` episodes (fewer if fewer exist; NaN if none)."""
        return float(np.mean(self.returns)) if self.returns else math.nan

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths)) if self.lengths else math.nan

    @property
    def window_full(self) -> bool:
        return len(self.returns) >= self.window

    def metrics(self) -> dict[str, float]:
        """The columns a trainer logs every time: episodes, return_mean_100, length_mean_100,
        return_best_mean_100 (the ``_100`` names are kept whatever ``window`` is)."""
        return {
            "episodes": self.episodes,
            "return_mean_100": self.mean,
            "length_mean_100": self.mean_length,
            "return_best_mean_100": self.best_mean,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "stop_at_score": self.stop_at_score,
            "episodes": self.episodes,
            "returns": list(self.returns),
            "lengths": list(self.lengths),
            "best_mean": self.best_mean,
            "solved": self.solved,
            "frames_to_solve": self.frames_to_solve,
            "seconds_to_solve": self.seconds_to_solve,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore counts and the window. ``stop_at_score`` stays as constructed (a resumed run
        may raise the bar); ``solved`` is kept only if it was reached."""
        self.window = int(state["window"])
        self.episodes = int(state["episodes"])
        self.returns = deque((float(r) for r in state["returns"]), maxlen=self.window)
        self.lengths = deque((int(n) for n in state["lengths"]), maxlen=self.window)
        self.best_mean = float(state["best_mean"])
        self.solved = bool(state["solved"])
        self.frames_to_solve = state["frames_to_solve"]
        self.seconds_to_solve = state["seconds_to_solve"]


class RunClock:
    """Training wall time that survives resume: ``seconds`` = time of earlier sessions + now."""

    def __init__(self, offset: float = 0.0):
        self.offset = float(offset)
        self._start = time.monotonic()
        self._fps_frames: int | None = None
        self._fps_time = self._start

    @property
    def seconds(self) -> float:
        return self.offset + time.monotonic() - self._start

    def fps(self, frames: int) -> float:
        """Frames per second since the previous ``fps`` call (since construction/load at first;
        NaN on the very first call, which only sets the starting point)."""
        now = time.monotonic()
        if self._fps_frames is None:
            self._fps_frames, self._fps_time = frames, now
            return math.nan
        dt = now - self._fps_time
        rate = (frames - self._fps_frames) / dt if dt > 0 else math.nan
        self._fps_frames, self._fps_time = frames, now
        return rate

    def state_dict(self) -> dict[str, float]:
        return {"seconds": self.seconds}

    def load_state_dict(self, state: Mapping[str, float]) -> None:
        self.offset = float(state["seconds"])
        self._start = time.monotonic()
        self._fps_frames = None


# --------------------------------------------------------------------------------------------
# Metrics log
# --------------------------------------------------------------------------------------------
def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "" if math.isnan(f) else f"{f:.8g}"


def _tag(key: str) -> str:
    if "/" in key:
        return key
    return f"losses/{key}" if "loss" in key else f"charts/{key}"


def read_metrics(path: str | os.PathLike) -> tuple[list[str], list[dict[str, str]]]:
    """(header, rows as str dicts) of a metrics CSV; ([], []) if it does not exist or is empty.
    A last line without its newline (a row being written now, or torn by a crash) is left out.
    Where only ``PATH.gz`` exists (a record kept gzipped, as docs/results keeps them), that is
    read instead."""
    path = Path(path)
    gz = path.with_name(path.name + ".gz")
    if path.exists():
        text = path.read_text(encoding="utf-8", errors="replace")
    elif gz.exists():
        text = gzip.decompress(gz.read_bytes()).decode("utf-8", errors="replace")
    else:
        return [], []
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


class MetricsLogger:
    """Appends rows to ``metrics.csv`` and scalars to TensorBoard (``tb_dir=None``: CSV only).

    ``resume_frames``: continue an earlier run from a checkpoint taken at that frame count: the
    existing CSV keeps its rows with ``frames <= resume_frames`` (later ones were logged after the
    checkpoint and will be produced again), and TensorBoard events past it are purged. Without
    it an existing CSV is replaced. A CSV row goes to disk whole as it is logged (one unbuffered
    write; a failed one, e.g. on a full disk, is cut off again, so no torn line stays), and
    TensorBoard is flushed at least every ``flush_every_s``. A failed write raises
    :class:`rapidrl.train.run.RunWriteError` naming the file.
    """

    def __init__(
        self,
        csv_path: str | os.PathLike,
        tb_dir: str | os.PathLike | None = None,
        *,
        columns: Iterable[str] = (),
        resume_frames: int | None = None,
        flush_every_s: float = 10.0,
    ):
        self.csv_path = Path(csv_path)
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_every_s = flush_every_s
        self._wanted = list(dict.fromkeys([*KNOWN_COLUMNS, *columns]))
        self._columns: list[str] | None = None  # fixed when the header is written
        self._file = None
        self._writer = None
        self._failed = False  # a write failed: close() then raises nothing more
        if resume_frames is not None:
            header, rows = read_metrics(self.csv_path)
            if header:
                keep = [r for r in rows if _frames_of(r) <= resume_frames]
                self._columns = list(dict.fromkeys([*header, *self._wanted]))
                self._rewrite(keep)
        if self._columns is None and self.csv_path.exists():
            self.csv_path.unlink()
        if tb_dir is not None:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(
                str(tb_dir),
                purge_step=None if resume_frames is None else resume_frames + 1,
                flush_secs=max(1, int(flush_every_s)),
            )
        else:
            self._tb = None
        self._last_flush = time.monotonic()

    # --- CSV ------------------------------------------------------------------------------
    def _rewrite(self, rows: list[Mapping[str, Any]]) -> None:
        """Atomically write the header ``self._columns`` and ``rows``, then reopen to append."""
        if self._file is not None:
            self._file.close()
            self._file = None
        buf = io.StringIO()
        w = csv.DictWriter(
            buf, fieldnames=self._columns, extrasaction="ignore", lineterminator="\n"
        )
        w.writeheader()
        w.writerows(rows)
        try:
            atomic_write_text(self.csv_path, buf.getvalue(), "the metrics log")
        except RunWriteError:
            self._failed = True
            raise
        self._open_append()

    def _open_append(self) -> None:
        try:
            self._file = open(self.csv_path, "ab", buffering=0)
        except OSError as exc:
            raise self._fail(self.csv_path, "the metrics log", exc) from exc
        self._line = io.StringIO()
        self._writer = csv.DictWriter(
            self._line, fieldnames=self._columns, extrasaction="raise", lineterminator="\n"
        )

    def _fail(self, path: Path, what: str, exc: OSError) -> RunWriteError:
        self._failed = True
        return exc if isinstance(exc, RunWriteError) else write_failed(path, what, exc)

    def _append_row(self, row: Mapping[str, str]) -> None:
        """Append one CSV line whole: a write that fails part way is truncated away."""
        self._line.seek(0)
        self._line.truncate()
        self._writer.writerow(row)
        data = memoryview(self._line.getvalue().encode("utf-8"))
        start = os.fstat(self._file.fileno()).st_size
        try:
            while data:
                data = data[self._file.write(data) :]
        except OSError as exc:
            try:
                os.truncate(self.csv_path, start)
            except OSError:
                pass
            raise self._fail(self.csv_path, "a row of the metrics log", exc) from exc

    def log(self, frames: int, metrics: Mapping[str, Any]) -> None:
        """Write one row: ``frames`` plus ``metrics`` (numbers; None/NaN -> empty CSV cell)."""
        row = {"frames": int(frames), **{k: v for k, v in metrics.items() if k != "frames"}}
        if self._columns is None:
            self._columns = list(dict.fromkeys([*self._wanted, *row]))
            self._rewrite([])
        else:
            new = [k for k in row if k not in self._columns]
            if new:  # widen the header: rewrite the file once with the new columns
                _, old_rows = read_metrics(self.csv_path)
                self._columns += new
                self._rewrite(old_rows)
        self._append_row({k: _cell(v) for k, v in row.items()})
        if self._tb is not None:
            for k, v in row.items():
                if k == "frames" or v is None:
                    continue
                try:
                    value = float(v)
                except (TypeError, ValueError):
                    continue
                try:
                    self._tb.add_scalar(_tag(k), value, global_step=int(frames))
                except OSError as exc:  # the event writer's thread hit a full disk
                    raise self._fail(Path(self._tb.log_dir), "TensorBoard events", exc) from exc
        if time.monotonic() - self._last_flush >= self.flush_every_s:
            self.flush()

    def log_text(self, tag: str, text: str) -> None:
        """A text entry in TensorBoard (e.g. the config as JSON); nothing without ``tb_dir``."""
        if self._tb is not None:
            self._tb.add_text(tag, text)

    @property
    def columns(self) -> list[str]:
        return list(self._columns or self._wanted)

    def flush(self) -> None:
        """Flush TensorBoard (CSV rows are on disk as they are logged)."""
        if self._tb is not None:
            try:
                self._tb.flush()
            except OSError as exc:
                raise self._fail(Path(self._tb.log_dir), "TensorBoard events", exc) from exc
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Close both files. After a failed write it raises nothing more (that error is the
        one to report)."""
        failed = self._failed
        file, self._file = self._file, None
        tb, self._tb = self._tb, None
        if file is not None:
            file.close()
        if tb is not None:
            try:
                tb.close()
            except OSError as exc:
                if not failed:
                    raise self._fail(Path(tb.log_dir), "TensorBoard events", exc) from exc

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _frames_of(row: Mapping[str, str]) -> float:
    try:
        return float(row.get("frames") or "nan")
    except ValueError:
        return math.nan
