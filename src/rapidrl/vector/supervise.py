"""Supervising child processes, written once for the vector-env workers
(:mod:`rapidrl.vector.process`) and the DQN actor processes (:mod:`rapidrl.algos.dqn.actor`):
how a child ended, in words, the stop signals a child leaves to its parent, and stopping a set
of children under one deadline (ask, wait, terminate, kill). Waits that poll a pipe also watch
the process sentinels and re-check ``is_alive()`` every :data:`LIVENESS_PERIOD`."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["LIVENESS_PERIOD", "describe_exit", "leave_stop_signals_to_parent", "stop_processes"]

LIVENESS_PERIOD = 0.5  # s: how often a wait re-checks is_alive() on top of the sentinels


def leave_stop_signals_to_parent() -> None:
    """In a child: leave the parent's process group (POSIX) and ignore SIGINT. A Ctrl-C in the
    terminal, or a SIGTERM sent to the whole group (``kill -TERM -PGID``, ``timeout``), reaches
    the parent alone, which finishes its step with this child, saves its checkpoint and then
    closes it; a child that died of the signal first would take that checkpoint with it. A
    signal sent to the child itself still acts (multiprocessing's exit hook terminates daemonic
    children with SIGTERM; :func:`stop_processes` ends with SIGKILL), and the child ends when
    the parent's pipe ends (the parent died)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.setpgid(0, 0)
    except (AttributeError, OSError):  # no process groups here, or not allowed: stay in the group
        pass


def describe_exit(code: int | None) -> str:
    """How a process with this ``exitcode`` ended: ``still running``, ``killed by SIGKILL
    (exit code -9)``, ``exited with code 1``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name} (exit code {code})"
    return f"exited with code {code}"


def stop_processes(
    procs: Sequence[Any], conns: Sequence[Any], message: tuple, timeout: float
) -> None:
    """Stop child processes and close their pipes: send ``message`` to each live one (a pipe
    that is already broken is skipped), wait for all of them under one deadline of
    ``timeout`` seconds, then terminate, then kill whatever is still alive."""
    for p, conn in zip(procs, conns):
        if p.is_alive():
            try:
                conn.send(message)
            except (OSError, ValueError):
                pass
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 1.0  # one second for all of them, not one each
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(timeout=5.0)
    for conn in conns:
        conn.close()
