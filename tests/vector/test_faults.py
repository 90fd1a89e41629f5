"""Faults and bad input: a crashing env, a killed or stuck worker, restarts, misuse of the API.

Every failure must surface as a specific error within a bounded time, never as a hang or a bare
EOFError, and ``close()`` must leave no child process and no shared-memory segment behind.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from rapidrl.vector import EnvWorkerError, WorkerDiedError, make_vec
from rapidrl.vector.testing import CountingEnv, counting_env_fns

pytestmark = pytest.mark.timeout(60)


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()}


def _assert_gone(pids, shm_name=None):
    alive = [p for p in pids if p is not None and psutil.pid_exists(p)]
    alive = [p for p in alive if psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"worker processes left behind: {alive}"
    assert not set(pids) & _children()
    if shm_name is not None:
        assert not os.path.exists(f"/dev/shm/{shm_name}"), "shared memory segment leaked"


def _kill(venv, k: int) -> int:
    """SIGKILL worker ``k`` and wait until it is dead; returns its pid."""
    proc = venv.workers[k].proc
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)  # the kernel may take a while to tear a process down on a loaded machine
    assert proc.exitcode == -signal.SIGKILL
    return proc.pid


def _crash_fns(crash_env: int, crash_at: int, n: int = 4):
    return [
        functools.partial(CountingEnv, crash_at=crash_at if i == crash_env else None)
        for i in range(n)
    ]


# --- a crashing env ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "backend, kwargs",
    [
        ("serial", {}),
        ("hybrid", {"num_workers": 2}),
        ("hybrid", {"num_workers": 2, "inline": True}),  # env 2 raises in this process
    ],
    ids=["serial", "hybrid", "hybrid-inline"],
)
def test_env_exception_names_env_and_traceback(backend, kwargs):
    venv = make_vec(_crash_fns(crash_env=2, crash_at=3), 4, backend, **kwargs)
    pids, shm = venv.worker_pids, getattr(venv, "shm_name", None)
    venv.reset(seed=0)
    with pytest.raises(EnvWorkerError) as info:
        for _ in range(5):
            venv.step(np.zeros(4, np.int64))
    msg = str(info.value)
    assert "env 2" in msg and "'step'" in msg
    assert "Traceback" in msg and "deliberate crash at step 3" in msg
    # the vector env closed itself: no workers, no segment; further use is a clear error
    _assert_gone(pids, shm)
    with pytest.raises(RuntimeError, match="closed after an error"):
        venv.step(np.zeros(4, np.int64))
    venv.close()
    venv.close()


def test_env_factory_exception_names_env():
    def bad_factory():
        raise ValueError("no such game")

    fns = counting_env_fns(3) + [bad_factory]
    before = _children()
    with pytest.raises(EnvWorkerError, match=r"env 3[\s\S]*no such game"):
        make_vec(fns, 4, "hybrid", num_workers=2)
    time.sleep(0.1)
    assert _children() <= before


# --- a killed or stuck worker -----------------------------------------------------------------
def test_sigkilled_worker_raises_worker_died():
    venv = make_vec(counting_env_fns(4), 4, "hybrid", num_workers=2, step_timeout=20)
    pids, shm = venv.worker_pids, venv.shm_name
    venv.reset(seed=0)
    venv.step(np.zeros(4, np.int64))
    _kill(venv, 1)
    t0 = time.monotonic()
    with pytest.raises(WorkerDiedError) as info:
        for _ in range(3):
            venv.step(np.zeros(4, np.int64))
    assert time.monotonic() - t0 < 20  # the sentinel, not the timeout, reported it
    msg = str(info.value)
    assert "worker 1" in msg and "SIGKILL" in msg and "[2, 3]" in msg and str(pids[1]) in msg
    _assert_gone(pids, shm)


def test_workers_leave_stop_signals_to_the_parent():
    """A Ctrl-C in the terminal or a SIGTERM to the parent's whole process group must not reach
    the workers (the parent finishes its step, checkpoints, then closes them): they run in their
    own process groups and ignore SIGINT, and step on, the same steps as a serial vector env."""
    serial = make_vec(counting_env_fns(4), 4, "serial")
    venv = make_vec(counting_env_fns(4), 4, "hybrid", num_workers=2, step_timeout=20)
    pids, shm = venv.worker_pids, venv.shm_name
    actions = np.array([0, 1, 2, 1])
    try:
        serial.reset(seed=0)
        venv.reset(seed=0)
        serial.step(actions)
        venv.step(actions)
        for pid in pids:
            assert os.getpgid(pid) == pid != os.getpgrp()
            os.kill(pid, signal.SIGINT)
        time.sleep(0.5)  # a worker that took SIGINT's default action is gone by now
        for _ in range(3):
            got, want = venv.step(actions), serial.step(actions)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
    finally:
        venv.close()
        serial.close()
    _assert_gone(pids, shm)


def test_exit_without_close_ends_the_workers(tmp_path):
    """A script that exits without ``close()`` and whose vector env's own finalizer came too
    late: multiprocessing's exit hook terminates the daemonic workers (SIGTERM) and joins them;
    the interpreter exits instead of waiting on them forever."""
    script = tmp_path / "no_close.py"
    script.write_text(
        "import numpy as np\n"
        "from rapidrl.vector import make_vec\n"
        "from rapidrl.vector.testing import counting_env_fns\n"
        "if __name__ == '__main__':\n"
        "    venv = make_vec(counting_env_fns(4), 4, 'hybrid', num_workers=2)\n"
        "    venv.reset(seed=0)\n"
        "    venv._finalizer.detach()  # as if it ran after multiprocessing's exit hook\n"
        "    print(*venv.worker_pids, flush=True)\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=30, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    for pid in map(int, proc.stdout.split()):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_sigkilled_worker_beside_an_inline_group():
    """The inline group does not hide a dead worker: the sentinel still reports it, and close()
    leaves nothing (processes and the inline group both released)."""
    venv = make_vec(counting_env_fns(4), 4, "async", num_workers=2, batch_size=2, inline=True)
    pids, shm = venv.worker_pids, venv.shm_name
    _, infos = venv.reset(seed=0)
    ids = infos["env_id"]
    for _ in range(4):
        venv.send(np.zeros(len(ids), np.int64), ids)
        *_, ids = venv.recv()
    _kill(venv, 0)
    with pytest.raises(WorkerDiedError, match=r"worker 0 .*\[0, 1\]"):
        for _ in range(4):
            venv.send(np.zeros(len(ids), np.int64), ids)
            *_, ids = venv.recv()
    _assert_gone(pids, shm)


def test_restart_on_crash_inline_group():
    """An env raising in the inline group: with restart_on_crash its group is rebuilt here."""
    fns = _crash_fns(crash_env=3, crash_at=2)
    with make_vec(fns, 4, "hybrid", num_workers=2, inline=True, restart_on_crash=True) as venv:
        venv.reset(seed=1)
        restarted = [
            venv.step(np.zeros(4, np.int64))[4]["worker_restarted"].tolist() for _ in range(3)
        ]
    assert restarted == [[False] * 4, [False, False, True, True], [False] * 4]


def test_stuck_worker_times_out():
    fns = [functools.partial(CountingEnv, delay=30.0 if i == 0 else 0.0) for i in range(2)]
    venv = make_vec(fns, 2, "subprocess", step_timeout=0.5)
    pids = venv.worker_pids
    venv.reset(seed=0)
    t0 = time.monotonic()
    with pytest.raises(WorkerDiedError, match=r"worker 0 .*did not finish 'step' within 0.5s"):
        venv.step(np.zeros(2, np.int64))
    assert time.monotonic() - t0 < 10
    _assert_gone(pids, venv.shm_name)


def test_close_leaves_nothing_and_is_idempotent():
    venv = make_vec(counting_env_fns(4), 4, "async", num_workers=2, batch_size=2)
    pids, shm = venv.worker_pids, venv.shm_name
    assert set(pids) <= _children()
    obs, infos = venv.reset(seed=0)
    venv.send(np.zeros(4, np.int64), infos["env_id"])  # leave steps in flight
    venv.close()
    venv.close()
    _assert_gone(pids, shm)
    with pytest.raises(RuntimeError, match="closed"):
        venv.recv()


# --- restart_on_crash -------------------------------------------------------------------------
def test_restart_on_crash_after_sigkill():
    venv = make_vec(counting_env_fns(4), 4, "hybrid", num_workers=2, restart_on_crash=True)
    try:
        venv.reset(seed=0)
        last, *_ = venv.step(np.zeros(4, np.int64))
        old = venv.worker_pids
        _kill(venv, 1)
        obs, rewards, terminated, truncated, infos = venv.step(np.zeros(4, np.int64))
        np.testing.assert_array_equal(infos["worker_restarted"], [False, False, True, True])
        assert truncated[2:].all() and not terminated[2:].any()
        assert not infos["episode_end"][2:].any()
        np.testing.assert_array_equal(infos["final_obs"][2:], last[2:])
        assert (obs[2:, 2] == 0).all()  # fresh episodes
        assert (obs[:2, 2] > 0).all() or (terminated[:2] | truncated[:2]).any()
        new = venv.worker_pids
        assert new[0] == old[0] and new[1] != old[1]
        for _ in range(5):  # training goes on
            obs, _, _, _, infos = venv.step(np.ones(4, np.int64))
            assert not infos["worker_restarted"].any()
    finally:
        pids = venv.worker_pids
        venv.close()
    _assert_gone(pids + old, venv.shm_name)


def test_restart_on_crash_async():
    """First-ready batches: the killed worker's envs come back once as a cut-short batch."""
    venv = make_vec(
        counting_env_fns(4), 4, "async", num_workers=2, batch_size=2, restart_on_crash=True
    )
    with venv:
        _, infos = venv.reset(seed=0)
        ids = infos["env_id"]
        old = venv.worker_pids
        restarted = np.zeros(4, np.int64)
        for k in range(200):  # until the dead worker's envs came back (and a few more steps)
            venv.send(np.zeros(len(ids), np.int64), ids)
            obs, rewards, terminated, truncated, infos, ids = venv.recv()
            if k == 1:
                _kill(venv, 1)
            r = infos["worker_restarted"]
            assert truncated[r].all() and not infos["episode_end"][r].any()
            restarted[ids[r]] += 1
            if restarted.any() and k > 10:
                break
        np.testing.assert_array_equal(restarted, [0, 0, 1, 1])
        assert venv.worker_pids[0] == old[0] and venv.worker_pids[1] != old[1]
    _assert_gone(old + venv.worker_pids, venv.shm_name)


def test_restart_on_crash_after_env_exception():
    venv = make_vec(
        _crash_fns(crash_env=0, crash_at=3, n=2), 2, "subprocess", restart_on_crash=True
    )
    with venv:
        venv.reset(seed=1)
        restarted, truncs = [], []
        for _ in range(4):
            *_, truncated, infos = venv.step(np.zeros(2, np.int64))
            restarted.append(infos["worker_restarted"].tolist())
            truncs.append(truncated[0])
        # env 0 raised on its 3rd step: restarted, that step cut short; env 1 untouched
        assert [r[0] for r in restarted] == [False, False, True, False]
        assert truncs[2]
        assert not any(r[1] for r in restarted)


# --- bad input --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def async_venv():
    venv = make_vec(counting_env_fns(4), 4, "async", num_workers=2, batch_size=2)
    yield venv
    venv.close()


def test_bad_actions(async_venv):
    v = async_venv
    _, infos = v.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        v.send(np.zeros(3, np.int64))
    with pytest.raises(TypeError, match="integers"):
        v.send(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="out of range"):
        v.send(np.full(4, 7))
    with pytest.raises(ValueError, match="out of range"):
        v.send(np.zeros(1, np.int64), np.array([4]))
    with pytest.raises(ValueError, match="duplicates"):
        v.send(np.zeros(2, np.int64), np.array([1, 1]))
    with pytest.raises(ValueError, match="1-D integer"):
        v.send(np.zeros(2, np.int64), np.array([0.0, 1.0]))


def test_protocol_misuse(async_venv):
    v = async_venv
    _, infos = v.reset(seed=0)
    with pytest.raises(RuntimeError, match="call send"):
        v.recv()  # recv before send
    v.send(np.zeros(2, np.int64), np.array([0, 1]))  # worker 0's envs
    with pytest.raises(RuntimeError, match=r"not waiting for an action"):
        v.send(np.zeros(2, np.int64), np.array([1, 0]))  # send twice
    v.send(np.zeros(1, np.int64), np.array([2]))  # half of worker 1: pending, not stepping
    *_, ids = v.recv()
    assert sorted(ids.tolist()) == [0, 1]
    with pytest.raises(RuntimeError, match=r"envs \[2\] have actions"):
        v.recv()
    v.send(np.zeros(3, np.int64), np.array([3, 0, 1]))
    *_, ids2 = v.recv()
    *_, ids3 = v.recv()
    assert sorted(ids2.tolist() + ids3.tolist()) == [0, 1, 2, 3]


def test_misuse_before_reset_and_after_close():
    v = make_vec(counting_env_fns(2), 2, "serial")
    with pytest.raises(RuntimeError, match=r"send\(\) before reset\(\)"):
        v.send(np.zeros(2, np.int64))
    v.close()
    with pytest.raises(RuntimeError, match="closed"):
        v.reset()
    with pytest.raises(RuntimeError, match="closed"):
        v.step(np.zeros(2, np.int64))


def test_bad_layouts():
    fns = counting_env_fns(4)
    with pytest.raises(ValueError, match="multiple of the envs per worker"):
        make_vec(fns, 4, "async", num_workers=2, batch_size=3)
    with pytest.raises(ValueError, match="one env per process"):
        make_vec(fns, 4, "subprocess", num_workers=2)
    with pytest.raises(ValueError, match="unknown backend"):
        make_vec(fns, 4, "threads")
    with pytest.raises(ValueError, match="3 env factories"):
        make_vec(fns[:3], 4, "serial")
    with pytest.raises(ValueError, match="synchronous"):
        make_vec(fns, 4, "serial", batch_size=2)
    with pytest.raises(ValueError, match="inline=True applies to the hybrid and async"):
        make_vec(fns, 4, "subprocess", inline=True)
    with pytest.raises(ValueError, match="inline=True needs num_workers >= 2"):
        make_vec(fns, 4, "hybrid", num_workers=1, inline=True)
    with pytest.raises(ValueError, match="spin must be >= 0"):
        make_vec(fns, 4, "hybrid", spin=-1.0)
    with pytest.raises(ValueError, match="spin applies to the process backends"):
        make_vec(fns, 4, "serial", spin=0.001)


_ORPHAN_SCRIPT = """
import numpy as np
from rapidrl.vector import make_vec
from rapidrl.vector.testing import counting_env_fns
if __name__ == "__main__":
    v = make_vec(counting_env_fns(4), 4, "hybrid", num_workers=2)
    v.reset(seed=0)
    print(" ".join(map(str, v.worker_pids)), v.shm_name, flush=True)
    while True:
        v.step(np.zeros(4, np.int64))
"""


def test_killed_parent_leaves_no_workers_and_no_segment(tmp_path):
    """SIGKILL the *parent*: its workers see the pipe close and exit; the resource tracker
    unlinks the shared block."""
    import subprocess
    import sys

    script = tmp_path / "parent.py"
    script.write_text(_ORPHAN_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    try:
        *pids, shm = parent.stdout.readline().decode().split()
        pids = [int(p) for p in pids]
        assert os.path.exists(f"/dev/shm/{shm}")
    finally:
        parent.kill()
        parent.wait(10)

    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (
        any(map(running, pids)) or os.path.exists(f"/dev/shm/{shm}")
    ):
        time.sleep(0.05)
    assert not any(map(running, pids)), "orphaned workers"
    assert not os.path.exists(f"/dev/shm/{shm}"), "shared memory segment leaked"
