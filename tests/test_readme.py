"""The README's library example runs as written when pasted into a script (spawned workers and
all): the first ```python block under "## Library" is written to a file and run in a fresh
interpreter."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _library_example() -> str:
    text = README.read_text()
    section = text[text.index("## Library") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README: no ```python block under '## Library'"
    return match.group(1)


def test_readme_library_example_runs_as_a_script(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(_library_example())
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
