"""``python -m rapidrl.train.child PARENT_PID CMD...``: the first step of every training child
that :func:`rapidrl.train.launch.launch_training` starts. In the child's own Python it sets up what
a ``preexec_fn`` would do between fork and exec in the parent (which the Python docs warn can
deadlock in a threaded parent, and Ray Tune runs each trial in a thread), then execs ``CMD``:

* SIGINT at its default even where the bench ignores it (a background job), since the bench
  forwards a stop as one SIGINT (the trainers' Ctrl-C: checkpoint and stop);
* (Linux) SIGTERM from the kernel when the bench thread that started the child ends, however it
  ends: the parent-death signal outlives the exec, and the trainers take SIGTERM as Ctrl-C, so a
  killed bench, or a Ray worker that died, leaves no training on beside the run that replaces it.

The child's own process group (a Ctrl-C in the terminal reaches it once, forwarded by the bench,
not a second time through the group) is made by ``Popen`` itself (``process_group=0``), before
any code runs in the child. Importing this module imports nothing else of rapidrl's (the
``__init__`` of ``rapidrl`` and of ``rapidrl.train`` are lazy): the exec follows within a few
tens of milliseconds.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

__all__ = ["child_argv", "set_parent_death_signal"]

_PR_SET_PDEATHSIG = 1


def child_argv(cmd: Sequence[str], parent: int | None = None) -> list[str]:
    """``CMD`` started through this module by this interpreter, ``parent`` (default: this
    process) being the process whose death stops it."""
    parent = os.getpid() if parent is None else parent
    return [sys.executable, "-m", "rapidrl.train.child", str(parent), *cmd]


def set_parent_death_signal(parent: int, sig: int = signal.SIGTERM) -> None:
    """(Linux; elsewhere nothing) Have the kernel send ``sig`` to this process when the thread
    that started it ends; at once if ``parent`` already died (then nobody would send it)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig))
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def main(argv: Sequence[str]) -> int:
    """Set up the child (see the module docstring) and exec ``argv[1:]``; 127 if it cannot."""
    if len(argv) < 2:
        print("usage: python -m rapidrl.train.child PARENT_PID CMD...", file=sys.stderr)
        return 2
    parent, cmd = int(argv[0]), list(argv[1:])
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # kept by exec: the command's Python installs
    # its own KeyboardInterrupt handler only over a default, not over an inherited SIG_IGN
    set_parent_death_signal(parent)
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        print(f"rapidrl: cannot run {cmd[0]}: {exc}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
