"""keep_freed_memory: with it, glibc serves a large allocation from its heap (no new mapping),
and RAPIDRL_MALLOC=default leaves malloc alone. Run in a fresh interpreter each, since the
setting is for the whole process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")

_PROBE = """
import ctypes, sys
import numpy as np
from rapidrl.train.loop import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
kept = keep_freed_memory()
before = libc.mallinfo2().hblkhd  # bytes in mmapped blocks
a = np.ones(64 * 2**20, np.uint8)  # 64 MB: above glibc's largest mmap threshold (32 MB)
grew = libc.mallinfo2().hblkhd - before
print(kept, grew >= 64 * 2**20)
"""


def _probe(env_value: str | None) -> str:
    env = None
    if env_value is not None:
        import os

        env = {**os.environ, "RAPIDRL_MALLOC": env_value}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=120
    )
    if "mallinfo2" in out.stderr:
        pytest.skip("no mallinfo2 (glibc < 2.33)")
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_a_large_allocation_comes_from_the_heap_once_kept():
    assert _probe(None) == ["True", "False"]


def test_rapidrl_malloc_default_leaves_malloc_alone():
    assert _probe("default") == ["False", "True"]


_TRAIN_THEN_PROBE = """
import ctypes, sys
import numpy as np
from rapidrl import cli
from rapidrl.algos.ppo.train import PRESETS, parse_ppo_args, train

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

argv = ["--preset", "cartpole", "--num-steps", "32", "--no-progress", "--torch-threads", "1",
        "--no-tensorboard", "--max-frames", "128", "--run-dir", sys.argv[2]]
if sys.argv[1] == "library":
    train(parse_ppo_args(argv, "test", "cartpole", PRESETS))
else:
    assert cli.main(["train", "ppo", *argv]) == 0
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
before = libc.mallinfo2().hblkhd
a = np.ones(64 * 2**20, np.uint8)
print(libc.mallinfo2().hblkhd - before >= 64 * 2**20)  # True: a fresh mapping (malloc as is)
"""


@pytest.mark.parametrize("how, mapped", [("library", "True"), ("cli", "False")])
def test_the_command_keeps_freed_memory_and_a_library_call_leaves_malloc_alone(
    tmp_path, how, mapped
):
    """mallopt changes the whole process: ``rapidrl train`` chooses it, a notebook's call of
    the trainer does not."""
    env = {k: v for k, v in os.environ.items() if k != "RAPIDRL_MALLOC"}
    out = subprocess.run(
        [sys.executable, "-c", _TRAIN_THEN_PROBE, how, str(tmp_path / "run")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    if "mallinfo2" in out.stderr:
        pytest.skip("no mallinfo2 (glibc < 2.33)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == mapped
