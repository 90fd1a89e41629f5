"""``python -m rapidrl`` is the ``rapidrl`` command."""

from __future__ import annotations

import subprocess
import sys

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
