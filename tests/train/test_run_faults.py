"""A run directory that a second writer, a full disk or a killed holder cannot hurt.

- One writer at a time (:mod:`rapidrl.train.lock`): a second trainer on a run dir is refused at
  once with a message naming the holder; a lock left by a killed process is taken over with a
  warning; the bench commands lock their out dirs.
- A full disk (ENOSPC, simulated by a write that fails part way: the same system call error a
  full filesystem gives): a clear error naming the file and what it holds, no temp file left,
  ``latest`` still on a whole checkpoint, no torn metrics line, and the run resumes once the
  space is back.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from rapidrl import cli
from rapidrl.train import MetricsLogger, RunDir, read_metrics
from rapidrl.train import lock as lock_module
from rapidrl.train.checkpoint import load_latest
from rapidrl.train.lock import LOCK_NAME, RunDirBusyError, RunLock, check_unlocked, lock_holder
from rapidrl.train.run import RunWriteError, atomic_write, list_checkpoints

pytestmark = pytest.mark.timeout(180)

CARTPOLE = ["--preset", "cartpole", "--num-steps", "32", "--no-progress", "--torch-threads", "1"]
CARTPOLE += ["--no-tensorboard", "--log-every-frames", "128", "--checkpoint-every-frames", "256"]


def _holder(directory, *, release_on_stdin: bool = True) -> subprocess.Popen:
    """Another process holding ``directory``'s lock (what a running trainer does) until its
    stdin closes; returns once the lock is held."""
    code = textwrap.dedent(
        f"""
        import sys
        from rapidrl.train.lock import RunLock
        lock = RunLock({str(directory)!r}).acquire()
        print("locked", flush=True)
        sys.stdin.read()
        lock.release()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()  # bounded by the test's timeout
    assert line.strip() == "locked", f"the holder did not start (rc {proc.poll()})"
    return proc


def _train(run_dir, *args) -> int:
    return cli.main(["train", "ppo", *CARTPOLE, "--run-dir", str(run_dir), *args])


# --------------------------------------------------------------------------------------------
# One writer per run dir
# --------------------------------------------------------------------------------------------
def test_second_trainer_on_a_run_dir_is_refused_and_names_the_holder(tmp_path, capsys):
    run = tmp_path / "run"
    assert _train(run, "--max-frames", "256") == 0
    before = {p.name: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
    holder = _holder(run)
    try:
        rc = cli.main(["train", "ppo", "--resume", str(run), "--max-frames", "512"])
        err = capsys.readouterr().err
        assert rc == 2
        assert f"in use by pid {holder.pid} on host" in err and "Traceback" not in err
        assert "wait for that one to end" in err
        # Refused before anything was written.
        after = {p.name: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
        assert {k: v for k, v in after.items() if k != LOCK_NAME} == {
            k: v for k, v in before.items() if k != LOCK_NAME
        }
    finally:
        holder.communicate("", timeout=30)
    # Released at the holder's end: the same command goes on.
    assert cli.main(["train", "ppo", "--resume", str(run), "--max-frames", "512"]) == 0
    assert json.loads((run / "summary.json").read_text())["frames"] == 512
    assert lock_holder(run) is None  # a clean end empties the holder file


def test_a_fresh_run_into_a_busy_dir_is_refused_too(tmp_path, capsys):
    run = tmp_path / "run"
    holder = _holder(run)  # e.g. a trainer that has not written its first checkpoint yet
    try:
        assert _train(run, "--max-frames", "128") == 2
        assert f"in use by pid {holder.pid}" in capsys.readouterr().err
        assert not (run / "metrics.csv").exists()
    finally:
        holder.communicate("", timeout=30)


def test_a_lock_left_by_a_killed_process_is_taken_over_with_a_warning(tmp_path):
    run = tmp_path / "run"
    assert _train(run, "--max-frames", "256") == 0
    holder = _holder(run)
    holder.send_signal(signal.SIGKILL)  # no release: the holder file still names it
    holder.wait(timeout=30)
    holder.stdin.close()
    holder.stdout.close()
    assert lock_holder(run)["pid"] == holder.pid
    with pytest.warns(UserWarning, match=f"taking over the lock of pid {holder.pid}"):
        assert cli.main(["train", "ppo", "--resume", str(run), "--max-frames", "512"]) == 0
    assert json.loads((run / "summary.json").read_text())["frames"] == 512


def test_one_process_cannot_write_a_run_dir_twice(tmp_path):
    first = RunDir.create(tmp_path / "run", algo="ppo", env_id="x")
    with pytest.raises(RunDirBusyError, match=f"in use by pid {os.getpid()}"):
        RunDir.create(tmp_path / "run", algo="ppo", env_id="x")
    first.release()
    RunDir.create(tmp_path / "run", algo="ppo", env_id="x").release()


def _try_from_another_process(directory) -> str:
    """What a second process gets when it tries ``directory``: "refused" or "acquired" (by
    RunLock), and the same for the early check."""
    code = textwrap.dedent(
        f"""
        from rapidrl.train.lock import RunDirBusyError, RunLock, check_unlocked
        seen = []
        try:
            check_unlocked({str(directory)!r})
            seen.append("free")
        except RunDirBusyError:
            seen.append("busy")
        try:
            RunLock({str(directory)!r}).acquire()
            seen.append("acquired")
        except RunDirBusyError:
            seen.append("refused")
        print(" ".join(seen))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_refused_second_hold_in_the_same_process_keeps_the_lock(tmp_path):
    """Closing any descriptor of the lock file drops a POSIX record lock: being refused a
    second hold in-process (which reads the holder) must not hand the dir to another process."""
    run = tmp_path / "run"
    lock = RunLock(run).acquire()
    try:
        with pytest.raises(RunDirBusyError, match=f"in use by pid {os.getpid()}"):
            check_unlocked(run)
        with pytest.raises(RunDirBusyError, match=f"in use by pid {os.getpid()}"):
            RunLock(run).acquire()
        with pytest.raises(RunDirBusyError, match=f"in use by pid {os.getpid()}"):
            RunDir.create(run, algo="ppo", env_id="x")
        assert lock_holder(run)["pid"] == os.getpid()
        assert _try_from_another_process(run) == "busy refused"
    finally:
        lock.release()
    assert _try_from_another_process(run) == "free acquired"


def test_the_early_check_takes_no_lock(tmp_path, monkeypatch):
    """check_unlocked asks the kernel (F_GETLK) instead of locking: a lock it took, however
    briefly, would make a real acquire in another process fail at that moment."""
    run = tmp_path / "run"
    RunLock(run).acquire().release()  # the lock file exists, nobody holds it

    real = lock_module.fcntl

    class NoLocking:
        def __getattr__(self, name):
            return getattr(real, name)

        def lockf(self, *args):
            raise AssertionError("check_unlocked took a lock")

        flock = lockf

    monkeypatch.setattr(lock_module, "fcntl", NoLocking())
    check_unlocked(run)  # free: no error, no lock taken
    holder = _holder(run)
    try:
        with pytest.raises(RunDirBusyError, match=f"in use by pid {holder.pid}"):
            check_unlocked(run)
    finally:
        holder.communicate("", timeout=30)


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_run_files_get_the_mode_open_would_give(tmp_path, umask):
    """config.json, metrics.csv, summary.json, the curve, checkpoints and ``latest`` are
    readable by whoever the umask lets read them (a teammate's eval or TensorBoard), not 0600."""
    run = tmp_path / "run"
    old = os.umask(umask)
    try:
        assert _train(run, "--max-frames", "256") == 0
    finally:
        os.umask(old)
    files = {p.relative_to(run).as_posix(): p.stat().st_mode & 0o777 for p in run.rglob("*")}
    files = {name: mode for name, mode in files.items() if (run / name).is_file()}
    for name in ("config.json", "metrics.csv", "summary.json", "learning_curve.png"):
        assert name in files
    assert "checkpoints/latest" in files and any(n.endswith(".pt") for n in files)
    assert files == dict.fromkeys(files, 0o666 & ~umask)


def test_the_lock_is_not_inherited_by_forked_workers(tmp_path):
    """Env workers are forked from the trainer: one that outlives it must not keep the dir."""
    lock = RunLock(tmp_path / "run").acquire()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child only sleeps
        try:
            import time

            time.sleep(30)
        finally:
            os._exit(0)
    try:
        lock.release()  # the parent ends; the child still runs
        again = RunLock(tmp_path / "run").acquire()
        again.release()
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


def test_bench_solve_refuses_a_busy_out_dir(tmp_path, capsys):
    out = tmp_path / "bench"
    holder = _holder(out)
    try:
        argv = ["bench", "solve", "--algo", "ppo", "--env", "CartPole-v1", "--seeds", "1"]
        assert cli.main([*argv, "--out-dir", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"bench directory {out} is in use by pid {holder.pid}" in err
        # Nothing but the holder's lock file: no OUT/ENV/ALGO-PRESET/seed-S, no solve.json.
        assert [p.name for p in out.iterdir()] == [LOCK_NAME]
    finally:
        holder.communicate("", timeout=30)


def test_bench_atari_refuses_a_busy_out_dir(tmp_path, capsys):
    out = tmp_path / "suite"
    holder = _holder(out)
    try:
        argv = ["bench", "atari", "--games", "pong", "--algos", "ppo:fast", "--seeds", "1"]
        assert cli.main([*argv, "--out-dir", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"suite directory {out} is in use by pid {holder.pid}" in err
        assert [p.name for p in out.iterdir()] == [LOCK_NAME]
    finally:
        holder.communicate("", timeout=30)


# --------------------------------------------------------------------------------------------
# A stop signal to every process of the run
# --------------------------------------------------------------------------------------------
def test_sigterm_to_the_whole_process_group_leaves_the_checkpoint(tmp_path):
    """SIGTERM to the trainer's process group (``kill -TERM -PGID``, a job scheduler's stop)
    reaches its env workers too: they leave it to the trainer, which finishes its step, writes
    its checkpoint and an ``interrupted`` summary, and the run resumes from there."""
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "rapidrl.cli", "train", "ppo", *CARTPOLE, "--run-dir", str(run)]
    argv += ["--backend", "hybrid", "--num-workers", "2", "--max-frames", "100000000"]
    log = tmp_path / "log"
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, start_new_session=True, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 120
        while not list_checkpoints(run / "checkpoints") and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, log.read_text()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted"
    assert load_latest(run).frames == summary["frames"] > 0
    more = str(summary["frames"] + 256)
    assert cli.main(["train", "ppo", "--resume", str(run), "--max-frames", more]) == 0
    assert json.loads((run / "summary.json").read_text())["frames"] == int(more)


# --------------------------------------------------------------------------------------------
# A full disk
# --------------------------------------------------------------------------------------------
def _enospc_after(nbytes: int):
    """A ``write(f)`` for atomic_write that writes ``nbytes`` and then fails as a full disk."""

    def write(f):
        f.write(b"x" * nbytes)
        raise OSError(errno.ENOSPC, "No space left on device")

    return write


def test_atomic_write_on_a_full_disk_names_the_file_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "summary.json"
    target.write_text("old\n")
    with pytest.raises(RunWriteError, match="could not write the run summary to .*summary.json"):
        atomic_write(target, _enospc_after(1000), "the run summary")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_disk_error_that_the_writer_turns_into_its_own_is_still_reported(tmp_path, monkeypatch):
    """torch.save on a full disk: its zip writer gets the ENOSPC from a short write and raises
    its own RuntimeError ("unexpected pos ...") at the end; the report names the disk error."""
    import rapidrl.train.run as run_module

    real_fdopen = os.fdopen
    monkeypatch.setattr(
        run_module.os, "fdopen", lambda fd, mode: _FullAfter(real_fdopen(fd, mode), 5000)
    )
    target = tmp_path / "ckpt-000000000100.pt"
    with pytest.raises(
        RunWriteError, match="checkpoint ckpt-000000000100.pt .* No space left"
    ) as e:
        atomic_write(
            target,
            lambda f: torch.save({"w": torch.zeros(100_000)}, f),
            "checkpoint ckpt-000000000100.pt",
        )
    assert e.value.errno == errno.ENOSPC
    assert isinstance(e.value.__cause__, RuntimeError)  # what torch raised
    assert list(tmp_path.iterdir()) == []


class _FullAfter:
    """A file whose writes fail as a full disk after ``room`` more bytes (a short write first,
    as write(2) does when the space runs out mid-buffer)."""

    def __init__(self, file, room: int):
        self.file, self.room = file, room

    def write(self, data) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = self.file.write(bytes(data[: self.room]))
        self.room -= n
        return n

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


def test_metrics_row_on_a_full_disk_leaves_no_torn_line(tmp_path):
    path = tmp_path / "metrics.csv"
    log = MetricsLogger(path, columns=("loss",))
    log.log(100, {"seconds": 1.0, "loss": 0.5})
    whole = path.read_bytes()
    log._file = _FullAfter(log._file, room=7)  # the next row gets 7 bytes in, then ENOSPC
    with pytest.raises(RunWriteError, match="a row of the metrics log to .*metrics.csv"):
        log.log(200, {"seconds": 2.0, "loss": 0.25})
    assert path.read_bytes() == whole  # the 7 bytes were cut off again
    log.close()  # after the failure: closes, raises nothing more
    header, rows = read_metrics(path)
    assert [r["frames"] for r in rows] == ["100"]


def test_a_torn_last_line_from_a_crash_is_dropped_on_resume(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("frames,seconds\n100,1\n200,2\n30")  # "300,3" torn by a power loss
    header, rows = read_metrics(path)
    assert [r["frames"] for r in rows] == ["100", "200"]
    log = MetricsLogger(path, resume_frames=1000)
    log.log(300, {"seconds": 3})
    log.close()
    assert (
        path.read_text()
        == "frames,seconds,fps,episodes,return_mean_100\n100,1,,,\n200,2,,,\n300,3,,,\n"
    )


def test_full_disk_mid_run_then_resume(tmp_path, capsys, monkeypatch):
    """The issue's case: a run's filesystem fills while it writes a checkpoint."""
    import rapidrl.train.checkpoint as checkpoint

    run = tmp_path / "run"
    real_save = torch.save
    saves = []

    def save_until_full(payload, f):
        saves.append(payload["frames"])
        if len(saves) < 3:
            return real_save(payload, f)
        f.write(b"\0" * 4096)  # part of the checkpoint, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", save_until_full)
    assert _train(run, "--max-frames", "2048") == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"could not write checkpoint ckpt-{saves[2]:012d}.pt to {run}" in err
    assert "No space left on device" in err and f"--resume {run}" in err
    # The temp file is gone, `latest` points at a whole checkpoint, no torn metrics line.
    assert not [p for p in run.rglob("*.tmp")]
    latest = (run / "checkpoints" / "latest").read_text().strip()
    assert latest == f"ckpt-{saves[1]:012d}.pt"
    assert load_latest(run, read_only=True).frames == saves[1]
    assert (run / "metrics.csv").read_text().endswith("\n")
    assert [p.name for p in list_checkpoints(run / "checkpoints")][-1] == latest
    assert lock_holder(run) is None  # the failed run released its dir
    # Space is back: the command the message gives goes on to the end.
    monkeypatch.setattr(checkpoint.torch, "save", real_save)
    assert cli.main(["train", "ppo", "--resume", str(run)]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["frames"] == 2048 and summary["stop_reason"] == "max_frames"
    _, rows = read_metrics(run / "metrics.csv")
    frames = [int(r["frames"]) for r in rows]
    assert frames == sorted(set(frames)) and frames[-1] == 2048
