"""The run directory, the resolved-config round trip, and atomic file writes.

A run directory holds everything one training run writes::

    runs/dqn-PongNoFrameskip-v4-20261101-120000/
        config.json          resolved config (``config_to_dict``), rewritten at every (re)start
        metrics.csv          one row per log step (``MetricsLogger``)
        tb/                  TensorBoard events
        checkpoints/         ckpt-<frames>.pt (+ .npz), ``latest`` pointer (``Checkpointer``)
        summary.json         frames, seconds, best mean-100, solved, frames/seconds to solve
        learning_curve.png   ``plot_learning_curve``
        wandb_run_id         with ``--track wandb``: the W&B run this run dir logs to
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
import typing
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import IO, Any, TypeVar

from rapidrl.config import config_from_dict, config_to_dict
from rapidrl.train.lock import RunLock, check_unlocked

__all__ = [
    "CHECKPOINT_NAME",
    "RunDir",
    "RunWriteError",
    "atomic_write",
    "atomic_write_text",
    "config_diff",
    "config_from_dict",
    "config_to_dict",
    "flatten_dict",
    "list_checkpoints",
    "load_config",
    "read_config_json",
    "save_config",
    "write_failed",
]

T = TypeVar("T")

CHECKPOINT_NAME = re.compile(r"^ckpt-(\d+)\.pt$")
"""The file name of a checkpoint in a run's ``checkpoints/`` folder (group 1: its frames)."""


def list_checkpoints(directory: str | os.PathLike) -> list[Path]:
    """``ckpt-*.pt`` files in ``directory``, oldest first by frame count ([] if none/absent)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for p in directory.iterdir():
        m = CHECKPOINT_NAME.match(p.name)
        if m and p.is_file():
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


# --------------------------------------------------------------------------------------------
# Atomic writes
# --------------------------------------------------------------------------------------------
def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows: directories cannot be opened; rename is durable enough
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class RunWriteError(OSError):
    """A file of a run could not be written (a full disk, a quota, a lost mount): the message
    names the file, what it holds and what to do; ``errno`` and ``filename`` are the OS's. What
    was written before is whole (see :func:`atomic_write`)."""


_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def write_failed(path: str | os.PathLike, what: str, exc: OSError) -> RunWriteError:
    """The :class:`RunWriteError` for ``exc``, raised while writing ``what`` to ``path``."""
    path = Path(path)
    reason = exc.strerror or str(exc)
    if exc.errno in _FULL:
        fix = f"free space there (`df -h {path.parent}`)"
    else:
        fix = "make it writable again"
    err = RunWriteError(
        exc.errno or errno.EIO,
        f"could not write {what} to {path}: {reason}. The files written before it are whole "
        f"(the newest complete checkpoint is what resumes); {fix}",
    )
    err.filename = str(path)
    return err


class _Recording:
    """A file that keeps the first OSError its writes raised (what a full disk raises)."""

    def __init__(self, file: IO[bytes]):
        self._file = file
        self.error: OSError | None = None

    def write(self, data) -> int:
        try:
            return self._file.write(data)
        except OSError as exc:
            self.error = self.error or exc
            raise

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError as exc:
            self.error = self.error or exc
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


def _umask() -> int:
    """This process's umask, read without changing it where the OS tells it (Linux's
    /proc/self/status); elsewhere set and restored at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(
    path: str | os.PathLike, write: Callable[[IO[bytes]], None], what: str | None = None
) -> Path:
    """Write ``path`` all-or-nothing: ``write(f)`` fills a temp file in the same directory, which
    is flushed, fsynced and then ``os.replace``-d over ``path``. The file gets the mode an
    ordinary ``open()`` gives (0666 less the umask: 0644 under the usual umask 022).

    A crash at any point leaves either the old file or the new one, never a torn one (at worst a
    stray ``.<name>.*.tmp`` that the next write in that directory does not care about). A write
    that fails (a full disk) removes its temp file and raises :class:`RunWriteError` naming the
    file and ``what`` it holds (default: the file's name).
    """
    path = Path(path)
    tmp = f = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        # mkstemp makes the file 0600; give it what open() would (0666 less the umask), so a
        # teammate's `rapidrl eval` or TensorBoard can read the run where the umask lets them.
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as raw:
            f = _Recording(raw)
            write(f)
            f.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        # A writer may turn the OS's error into its own (torch.save's zip writer raises a
        # RuntimeError "unexpected pos" after a short write on a full disk): report the OS's.
        cause = exc if isinstance(exc, OSError) else (f.error if f is not None else None)
        if cause is not None and not isinstance(exc, RunWriteError):
            raise write_failed(path, what or path.name, cause) from exc
        raise
    _fsync_dir(path.parent)
    return path


def atomic_write_text(path: str | os.PathLike, text: str, what: str | None = None) -> Path:
    """``atomic_write`` for UTF-8 text."""
    data = text.encode("utf-8")
    return atomic_write(path, lambda f: f.write(data), what)


# --------------------------------------------------------------------------------------------
# config.json (the conversion itself: rapidrl.config.config_to_dict / config_from_dict)
# --------------------------------------------------------------------------------------------
def save_config(config: Any, path: str | os.PathLike) -> Path:
    """Write a dataclass config as indented JSON, atomically."""
    return atomic_write_text(
        path, json.dumps(config_to_dict(config), indent=2) + "\n", "the run config"
    )


def read_config_json(
    path: str | os.PathLike,
    fix: str = "repair it, or restore it from a backup of the run",
) -> dict[str, Any]:
    """The JSON object in a run's ``config.json``; ``ConfigError`` naming the file, what is wrong
    with it, and ``fix`` (what the caller can do about it) if it is not readable, not JSON (a
    torn copy, a hand edit) or not an object. ``FileNotFoundError`` if absent: callers differ on
    what a missing config means."""
    from rapidrl.config import ConfigError  # rapidrl.config needs nothing from here: no cycle

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the run config {path} ({exc}); {fix}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"the run config {path} is not valid JSON ({exc.msg} at line {exc.lineno}, column "
            f"{exc.colno}): it is truncated or was edited by hand; {fix}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"the run config {path} holds a JSON {type(data).__name__}, not the object of "
            f"config fields rapidrl writes there; {fix}"
        )
    return data


def load_config(cls: type[T], path: str | os.PathLike) -> T:
    """Read a config written by ``save_config`` back into ``cls``."""
    return config_from_dict(cls, read_config_json(path))


def flatten_dict(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"net": {"hidden": 512}}`` -> ``{"net.hidden": 512}`` (lists stay leaves)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(flatten_dict(v, key + "."))
        else:
            out[key] = v
    return out


_MISSING = "<absent>"


def config_diff(
    old: Any,
    new: Any,
    *,
    fields: typing.Iterable[str] | None = None,
    ignore: typing.Iterable[str] = (),
) -> list[tuple[str, Any, Any]]:
    """Differences between two configs (dataclasses or dicts from ``config_to_dict``).

    Returns ``[(dotted.field, old_value, new_value), ...]``; a field absent on one side shows as
    ``"<absent>"``. ``fields``: compare only these dotted paths (a path also selects everything
    under it, e.g. ``"net"``); ``ignore``: dotted paths (and everything under them) to skip; a
    plain name (no dot) is skipped at any depth (``"total_frames"`` also skips
    ``"train.total_frames"``).
    """
    a = flatten_dict(old if isinstance(old, Mapping) else config_to_dict(old))
    b = flatten_dict(new if isinstance(new, Mapping) else config_to_dict(new))
    fields = None if fields is None else tuple(fields)
    ignore = tuple(ignore)

    def under(key: str, paths: tuple[str, ...]) -> bool:
        return any(key == p or key.startswith(p + ".") for p in paths)

    def ignored(key: str) -> bool:
        parts = key.split(".")
        return under(key, ignore) or any(p in parts[:-1] or p == parts[-1] for p in ignore)

    diffs = []
    for key in sorted(set(a) | set(b)):
        if fields is not None and not under(key, fields):
            continue
        if ignored(key):
            continue
        va, vb = a.get(key, _MISSING), b.get(key, _MISSING)
        if va != vb:
            diffs.append((key, va, vb))
    return diffs


# --------------------------------------------------------------------------------------------
# Run directory
# --------------------------------------------------------------------------------------------
def _slug(text: str) -> str:
    """Make an env id like ``ALE/Pong-v5`` safe for a directory name: ``ALE_Pong-v5``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "env"


class RunDir:
    """The directory of one training run, and the paths of what goes in it.

    Build it with ``RunDir.create`` (makes the directory, guards against clobbering an earlier
    run); ``RunDir(path)`` just wraps an existing directory (e.g. to plot or inspect it).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.lock: RunLock | None = None
        """The directory's lock while this process writes it (``create``), else None."""

    def release(self) -> None:
        """Release the directory's lock (the end of a writer's session; again: nothing)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    @classmethod
    def create(
        cls,
        run_dir: str | os.PathLike | None = None,
        *,
        algo: str,
        env_id: str,
        resume: bool = False,
        root: str | os.PathLike = "runs",
        now: datetime | None = None,
    ) -> RunDir:
        """Make (or, with ``resume``, reopen) a run directory.

        ``run_dir=None`` -> ``<root>/<algo>-<env_id>-<YYYYmmdd-HHMMSS>`` (``-2``, ``-3``... if
        that exists). ``resume=True`` needs an existing ``run_dir`` holding checkpoints;
        ``resume=False`` refuses a ``run_dir`` that already holds checkpoints, so an earlier run
        is never overwritten by accident (``check`` makes these checks without creating anything).

        The run returned holds the directory's lock (:class:`rapidrl.train.lock.RunLock`) until
        :meth:`release`: another writer is refused with ``RunDirBusyError``. The checks are made
        again once the lock is held, so two starts racing past ``check`` cannot both go on.
        """
        cls.check(run_dir, resume=resume)
        if run_dir is None:
            stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
            base = Path(root) / f"{_slug(algo)}-{_slug(env_id)}-{stamp}"
            path, n = base, 1
            while True:
                try:
                    path.mkdir(parents=True, exist_ok=False)
                    break
                except FileExistsError:
                    n += 1
                    path = base.with_name(f"{base.name}-{n}")
            run = cls(path)
        else:
            run = cls(run_dir)
            run.path.mkdir(parents=True, exist_ok=True)
        run.lock = RunLock(run.path).acquire()
        try:
            if run_dir is not None:
                cls._check_contents(run.path, resume=resume)  # what a racing start wrote
            run.checkpoints.mkdir(parents=True, exist_ok=True)
        except BaseException:
            run.release()
            raise
        return run

    @classmethod
    def check(cls, run_dir: str | os.PathLike | None = None, *, resume: bool = False) -> None:
        """The checks of ``create``, touching nothing on disk: a trainer calls it first, so a
        wrong ``--run-dir``/``--resume`` fails before anything slow is built."""
        if run_dir is None:
            if resume:
                raise ValueError("--resume needs --run-dir: the run directory to continue")
            return
        check_unlocked(run_dir)
        cls._check_contents(Path(run_dir), resume=resume)

    @classmethod
    def _check_contents(cls, path: Path, *, resume: bool) -> None:
        run = cls(path)
        has_ckpts = run.has_checkpoints()
        if resume and not has_ckpts:
            raise FileNotFoundError(
                f"nothing to resume in {run.path}: no {run.checkpoints}/ckpt-*.pt; "
                "drop --resume to start a fresh run there"
            )
        if not resume and has_ckpts:
            raise FileExistsError(
                f"{run.path} already holds checkpoints of an earlier run: pass --resume to "
                "continue it, or choose another --run-dir"
            )

    # --- paths ----------------------------------------------------------------------------
    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def metrics_csv(self) -> Path:
        return self.path / "metrics.csv"

    @property
    def tb(self) -> Path:
        return self.path / "tb"

    @property
    def summary_json(self) -> Path:
        return self.path / "summary.json"

    @property
    def config_json(self) -> Path:
        return self.path / "config.json"

    @property
    def learning_curve_png(self) -> Path:
        return self.path / "learning_curve.png"

    def has_checkpoints(self) -> bool:
        return bool(list_checkpoints(self.checkpoints))

    # --- config ---------------------------------------------------------------------------
    def save_config(self, config: Any) -> Path:
        """Write the resolved config to ``config.json`` (atomically; rewritten on resume)."""
        return save_config(config, self.config_json)

    def load_config(self, cls: type[T]) -> T:
        return load_config(cls, self.config_json)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __fspath__(self) -> str:
        return str(self.path)
