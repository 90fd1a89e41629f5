"""``python -m rapidrl`` is the ``rapidrl`` command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rapidrl import cli
from rapidrl.cli import USAGE


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    # A subprocess, as a user runs it: this is what fails with "No module named
    # rapidrl.__main__" when the module is missing.
    return subprocess.run(
        [sys.executable, "-m", "rapidrl", *args], capture_output=True, text=True, timeout=120
    )


def test_python_m_rapidrl_help():
    result = _run("--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == USAGE.strip()


def test_python_m_rapidrl_passes_the_exit_code_on():
    # The exit status of cli.main must reach the shell, or scripts cannot detect a failure.
    result = _run("no-such-command")
    assert result.returncode == 2
    assert "unknown command 'no-such-command'" in result.stderr


@pytest.mark.parametrize(
    "bench, script", [("dqn", "dqn_ladder"), ("lstm", "lstm_phase"), ("ray", "ray_sampler")]
)
def test_a_bench_that_moved_to_benchmarks_says_where(capsys, bench, script):
    """The project's own experiments left the package: the old command names the script."""
    assert cli.main(["bench", bench, "--seconds", "3"]) == 2
    err = capsys.readouterr().err
    assert f"'rapidrl bench {bench}' moved" in err
    assert f"python benchmarks/{script}.py" in err and "Traceback" not in err
    assert f"bench {bench} " not in USAGE
