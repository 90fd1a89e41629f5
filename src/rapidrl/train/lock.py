"""One writer per run directory: :class:`RunLock`.

Every process that writes a run directory (a trainer, a Ray driver, ``bench solve`` / ``bench
atari`` on their out dir) holds its lock for as long as it writes. A second writer is refused at
once with :class:`RunDirBusyError`, which names the holder (pid, host, start time, command) and
what to do. ``rapidrl eval`` only reads and takes no lock.

How: a POSIX record lock (``fcntl.lockf``) on ``DIR/.lock``, a small JSON file that names the
holder. The kernel drops the lock when its process ends in any way (exit, crash, SIGKILL, a power
loss ends every holder), so a lock left behind is never a stale *lock*, only a stale *file*: the
next writer takes the lock, warns that the process the file names ended without releasing it,
and goes on. Record locks belong to the process and are not inherited by forked children, so an
env worker that outlives its trainer for a moment does not keep the run dir locked. They are also
per process, so this module keeps a table of the locks this process holds: a second lock on the
same directory from the same process is refused like one from another process.

A record lock has one trap: closing *any* descriptor of the file drops every record lock this
process holds on it. So while this process holds a directory, nothing here opens its lock file
again: the holder is read through the held descriptor (``os.pread``), and :func:`check_unlocked`
asks the kernel who holds it (``F_GETLK``) instead of taking the lock itself (which would also
race with another process's :meth:`RunLock.acquire`).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import time
import warnings
import weakref
from pathlib import Path
from typing import Any

from rapidrl.config import ConfigError

try:
    import fcntl
except ImportError:  # not POSIX: no kernel lock; the holder file still names the writer
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_NAME", "RunDirBusyError", "RunLock", "check_unlocked", "lock_holder"]

LOCK_NAME = ".lock"
"""The lock file in a locked directory."""

_HELD: weakref.WeakValueDictionary[Path, RunLock] = weakref.WeakValueDictionary()
"""The locks this process holds, by resolved directory (a lock dropped unreleased, e.g. by a
start-up that failed, is released when it is collected)."""


class RunDirBusyError(ConfigError):
    """Another process (or another run in this process) writes this directory now."""


def _key(directory: str | os.PathLike) -> Path:
    return Path(directory).resolve()


def lock_holder(directory: str | os.PathLike) -> dict[str, Any] | None:
    """What ``DIR/.lock`` says of its last holder (pid, host, started, command), or None if the
    file is absent, empty (released) or unreadable. Reading it never drops this process's lock
    on ``directory`` (see the module docstring)."""
    held = _HELD.get(_key(directory))
    if held is not None and held._fd is not None:
        try:
            raw = os.pread(held._fd, 65536, 0)
        except OSError:
            return None
        return _parse_holder(raw)
    try:
        raw = (Path(directory) / LOCK_NAME).read_bytes()
    except OSError:
        return None
    return _parse_holder(raw)


def _parse_holder(raw: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError is a ValueError too
        return None
    return data if isinstance(data, dict) else None


def _describe(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "another process (its lock file names none)"
    started = holder.get("started")
    when = (
        time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started))
        if isinstance(started, (int, float))
        else "at an unknown time"
    )
    return (
        f"pid {holder.get('pid')} on host {holder.get('host')}, started {when} "
        f"({holder.get('command') or 'unknown command'})"
    )


def _busy(directory: Path, holder: dict[str, Any] | None, what: str) -> RunDirBusyError:
    pid = holder.get("pid") if holder else None
    stop = "stop it"
    if pid:
        stop += f" (Ctrl-C there, or `kill -INT {pid}`: a trainer checkpoints first)"
    return RunDirBusyError(
        f"{what} {directory} is in use by {_describe(holder)}. One process writes a run "
        f"directory at a time: wait for that one to end, or {stop} and run this command again; "
        f"to run beside it, choose another directory."
    )


def _try_lock(fd: int) -> bool:
    if fcntl is None:
        return True
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # EACCES / EAGAIN: held by another process
        return False
    return True


# ``struct flock`` for F_GETLK: its field order differs between Linux and the BSDs (macOS).
if sys.platform.startswith("linux"):
    _FLOCK = "hhqqi4x"  # l_type, l_whence, l_start, l_len, l_pid (+ padding to 32 bytes)
    _FLOCK_FIELDS = ("type", "whence", "start", "len", "pid")
elif sys.platform == "darwin" or "bsd" in sys.platform:
    _FLOCK = "qqihh"  # l_start, l_len, l_pid, l_type, l_whence
    _FLOCK_FIELDS = ("start", "len", "pid", "type", "whence")
else:
    _FLOCK = None
    _FLOCK_FIELDS = ()


def _locked_by_another(fd: int) -> bool | None:
    """Whether another process holds a record lock on ``fd``'s file (``F_GETLK``: the kernel
    says who would block an exclusive lock, and no lock is taken). None where this platform's
    ``struct flock`` is not known here."""
    if fcntl is None or _FLOCK is None:
        return None
    query = {"type": fcntl.F_WRLCK, "whence": os.SEEK_SET, "start": 0, "len": 0, "pid": 0}
    packed = struct.pack(_FLOCK, *(query[f] for f in _FLOCK_FIELDS))
    answer = dict(zip(_FLOCK_FIELDS, struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, packed))))
    return answer["type"] != fcntl.F_UNLCK


def check_unlocked(directory: str | os.PathLike, what: str = "run directory") -> None:
    """Raise :class:`RunDirBusyError` if a process holds ``directory``'s lock now; take no lock
    and touch nothing (an absent directory or lock file is free). For early checks, before
    anything slow is built; :class:`RunLock` itself is what keeps a second writer out."""
    directory = Path(directory)
    if _key(directory) in _HELD:  # ours: opening the file again would drop the lock
        raise _busy(directory, lock_holder(directory), what)
    try:
        fd = os.open(directory / LOCK_NAME, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # absent: free; unreadable: RunLock will say so if it matters
        return
    try:
        # This process holds no lock on the file (checked above): the close drops nothing.
        busy = _locked_by_another(fd)
    except OSError:
        busy = None
    finally:
        os.close(fd)
    if busy:
        raise _busy(directory, lock_holder(directory), what)


class RunLock:
    """The lock on one directory, held from :meth:`acquire` to :meth:`release` (or the end of
    this process)::

        lock = RunLock(run_dir).acquire()   # RunDirBusyError if another process writes there
        try:
            ...                              # write the run dir
        finally:
            lock.release()

    ``what`` names the directory in messages ("run directory", "suite directory").
    """

    def __init__(self, directory: str | os.PathLike, what: str = "run directory"):
        self.directory = Path(directory)
        self.what = what
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunLock:
        if self._fd is not None:
            return self
        key = _key(self.directory)
        if key in _HELD:
            raise _busy(self.directory, lock_holder(self.directory), self.what)
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        if not _try_lock(fd):
            holder = lock_holder(self.directory)
            os.close(fd)
            raise _busy(self.directory, holder, self.what)
        # Ours. A holder still named in the file ended without releasing (killed, crashed, the
        # machine went down): say so, then take over.
        previous = os.read(fd, 65536)
        if previous.strip():
            try:
                old = json.loads(previous)
            except ValueError:
                old = None
            warnings.warn(
                f"{self.what} {self.directory}: taking over the lock of "
                f"{_describe(old if isinstance(old, dict) else None)}, which ended without "
                "releasing it (killed or crashed); its last checkpoint is what resumes",
                stacklevel=2,
            )
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
            "command": " ".join(sys.argv) or sys.executable,
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
        self._fd = fd
        _HELD[key] = self
        return self

    def release(self) -> None:
        """Empty the holder file (a clean end), drop the lock. Again: nothing."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        _HELD.pop(_key(self.directory), None)
        try:
            os.ftruncate(fd, 0)
        except OSError:  # a full disk cannot refuse a truncate, but a gone mount can
            pass
        finally:
            os.close(fd)  # drops the record lock

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self) -> None:  # a RunDir dropped without release (an exception in start-up)
        try:
            self.release()
        except Exception:
            pass
