"""train/launch.py: a training child never outlives the bench process that started it."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from rapidrl.train.launch import launch_training

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
        from rapidrl.train.launch import launch_training
        launch_training([sys.executable, "-c", {child!r}], Path({str(tmp_path / "log")!r}), 300)
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
        from rapidrl.train.launch import launch_training
        try:
            launch_training([sys.executable, "-c", {child!r}], Path({str(tmp_path / "log")!r}), 300)
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


def _stop_recorder(child_pid: Path, got: Path) -> str:
    """A stand-in trainer: writes its pid, records the stop signals it gets (a second one would
    abort a trainer without its checkpoint), ends a moment after the first."""
    return textwrap.dedent(f"""
        import os, signal, time
        seen = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, frame: seen.append(signum))
        open({str(child_pid)!r}, "w").write(str(os.getpid()))
        deadline = time.monotonic() + 120
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(1.0)  # finishing the step, saving: a second signal would come in here
        open({str(got)!r}, "w").write(",".join(str(int(s)) for s in seen))
    """)


def test_an_error_in_the_poll_callback_leaves_no_child(tmp_path):
    """An exception other than a time-out or a Ctrl-C ending the wait (an error in ``on_poll``)
    stops the child (one SIGINT: checkpoint and stop) before it goes on, rather than leaving it
    training until this process dies."""
    child_pid, got = tmp_path / "child.pid", tmp_path / "child.got"

    def poll() -> None:
        if child_pid.exists() and child_pid.read_text().strip():
            raise RuntimeError("the poll failed")

    cmd = [sys.executable, "-c", _stop_recorder(child_pid, got)]
    try:
        with pytest.raises(RuntimeError, match="the poll failed"):
            launch_training(cmd, tmp_path / "log", 300, on_poll=poll, poll_seconds=0.05)
        assert not _alive(int(child_pid.read_text()))
        assert got.read_text() == str(int(signal.SIGINT))
    finally:
        if child_pid.exists() and _alive(int(child_pid.read_text())):
            os.kill(int(child_pid.read_text()), signal.SIGKILL)


def test_a_trial_thread_ended_by_ray_tune_stops_its_child_once(tmp_path):
    """Ray Tune ends a stopped trial's thread with SystemExit from its report (the poll): the
    thread's end stops the child (its parent-death signal, one SIGTERM), and nothing else does,
    or the trainer would take it as a second stop and abort without its checkpoint."""
    child_pid, got = tmp_path / "child.pid", tmp_path / "child.got"

    def poll() -> None:
        if child_pid.exists() and child_pid.read_text().strip():
            raise SystemExit(0)

    cmd = [sys.executable, "-c", _stop_recorder(child_pid, got)]

    def trial() -> None:  # a Tune trial's thread: SystemExit ends it
        try:
            launch_training(cmd, tmp_path / "log", 300, on_poll=poll, poll_seconds=0.05)
        except SystemExit:
            pass

    thread = threading.Thread(target=trial)
    thread.start()
    try:
        thread.join(timeout=60)
        assert _wait_for(got, "the child's signals", 30) == str(int(signal.SIGTERM))
        deadline = time.monotonic() + 30
        while _alive(int(child_pid.read_text())) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(int(child_pid.read_text()))
    finally:
        if child_pid.exists() and _alive(int(child_pid.read_text())):
            os.kill(int(child_pid.read_text()), signal.SIGKILL)


def test_a_child_started_from_a_thread_without_preexec_fn(tmp_path, monkeypatch):
    """Ray Tune runs a trial in a thread, where ``preexec_fn`` can deadlock: the child is started
    without one, yet is in its own process group with SIGTERM as its parent-death signal (set by
    the child itself before it execs the command)."""
    seen: list[dict] = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        seen.append(kwargs)
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    out = tmp_path / "child.out"
    child = textwrap.dedent(f"""
        import ctypes, os
        sig = ctypes.c_int(0)
        ctypes.CDLL(None).prctl(2, ctypes.byref(sig))  # 2 = PR_GET_PDEATHSIG
        open({str(out)!r}, "w").write(f"{{os.getpid()}} {{os.getpgid(0)}} {{sig.value}}")
    """)
    done: list = []
    thread = threading.Thread(
        target=lambda: done.append(
            launch_training([sys.executable, "-c", child], tmp_path / "log", 60, poll_seconds=0.05)
        )
    )
    thread.start()
    thread.join(timeout=60)
    assert done and done[0][0] == 0, (tmp_path / "log").read_text()
    assert [kw.get("preexec_fn") for kw in seen] == [None]
    pid, pgid, pdeathsig = map(int, out.read_text().split())
    assert pgid == pid != os.getpgid(0)  # its own group: a terminal's Ctrl-C is forwarded once
    assert pdeathsig == int(signal.SIGTERM)


def test_the_child_module_imports_no_torch():
    """``python -m rapidrl.train.child`` runs first in every training child, before it execs the
    trainer: importing it imports nothing of rapidrl's but the lazy packages, and no torch."""
    code = (
        "import sys, rapidrl.train.child; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rapidrl', 'torch')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.split() == ["['rapidrl',", "'rapidrl.train',", "'rapidrl.train.child']"]
