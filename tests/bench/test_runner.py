"""bench/runner.py: a training child never outlives the bench process that started it."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for a reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_for(path: Path, what: str, seconds: float = 30.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{what} did not appear within {seconds} s")


def test_the_child_gets_sigterm_when_the_bench_is_killed(tmp_path):
    """SIGKILL: the bench gets no chance to stop its child itself; the kernel sends SIGTERM."""
    child_pid, got = tmp_path / "child.pid", tmp_path / "child.got"
    # The child: a stand-in for a trainer that records the signal it is stopped with.
    child = textwrap.dedent(f"""
        import os, signal, sys, time
        def stop(signum, frame):
            open({str(got)!r}, "w").write(str(signum))
            sys.exit(0)
        signal.signal(signal.SIGTERM, stop)
        open({str(child_pid)!r}, "w").write(str(os.getpid()))
        time.sleep(120)
    """)
    bench = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from rapidrl.bench.runner import run_training
        run_training([sys.executable, "-c", {child!r}], Path({str(tmp_path / "log")!r}), 300)
    """)
    parent = subprocess.Popen([sys.executable, "-c", bench])
    try:
        pid = int(_wait_for(child_pid, "the child's pid"))
        assert _alive(pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        assert _wait_for(got, "the child's signal", 30) == str(int(signal.SIGTERM))
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)
    finally:
        parent.kill()
        if child_pid.exists() and _alive(int(child_pid.read_text())):
            os.kill(int(child_pid.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("how", ["group SIGTERM", "group SIGINT", "bench SIGTERM"])
def test_a_stop_reaches_the_trainer_once_and_the_bench_waits_for_it(tmp_path, how):
    """A SIGTERM to the bench's process group (``kill -TERM -PGID``, a job scheduler), a Ctrl-C
    in its terminal (SIGINT to the group) or a SIGTERM to the bench alone: the trainer gets one
    SIGINT (its Ctrl-C: finish the step, checkpoint, stop), not the group's signal and then a
    second one from the bench's death, which made it abort without its checkpoint; the bench
    waits for it to end, then stops (KeyboardInterrupt)."""
    child_pid, got, stopped = tmp_path / "child.pid", tmp_path / "child.got", tmp_path / "stopped"
    # The child: a stand-in for a trainer that takes a while to "checkpoint" after a stop.
    child = textwrap.dedent(f"""
        import os, signal, sys, time
        seen = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, frame: seen.append(signum))
        open({str(child_pid)!r}, "w").write(str(os.getpid()))
        deadline = time.monotonic() + 60
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(1.0)  # finishing the step, saving: a second signal would come in here
        open({str(got)!r}, "w").write(",".join(str(int(s)) for s in seen))
    """)
    bench = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from rapidrl.bench.runner import run_training
        try:
            run_training([sys.executable, "-c", {child!r}], Path({str(tmp_path / "log")!r}), 300)
        except KeyboardInterrupt:
            open({str(stopped)!r}, "w").write("stopped")
    """)
    parent = subprocess.Popen([sys.executable, "-c", bench], start_new_session=True)
    try:
        pid = int(_wait_for(child_pid, "the child's pid"))
        if how == "group SIGTERM":
            os.killpg(parent.pid, signal.SIGTERM)
        elif how == "group SIGINT":
            os.killpg(parent.pid, signal.SIGINT)
        else:
            os.kill(parent.pid, signal.SIGTERM)
        assert parent.wait(timeout=60) == 0
        assert got.read_text() == str(int(signal.SIGINT))  # one stop, and a Ctrl-C
        assert stopped.read_text() == "stopped"
        assert not _alive(pid)
    finally:
        parent.kill()
        if child_pid.exists() and _alive(int(child_pid.read_text())):
            os.kill(int(child_pid.read_text()), signal.SIGKILL)
