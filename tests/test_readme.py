"""The README's examples as written: the library example runs when pasted into a script
(spawned workers and all; the first ```python block under "## Library", run in a fresh
interpreter), and the sweep example (the ```yaml block under "### Sweeps") is a spec the sweep
accepts, whose best config is where the README says to train it from."""

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SWEEPS_DOC = ROOT / "docs" / "sweeps.md"


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


def _sweep_section() -> str:
    text = README.read_text()
    start = text.index("### Sweeps")
    return text[start : text.index("\n## ", start)]


def test_readme_sweep_example_is_a_valid_spec_and_names_where_best_json_goes(tmp_path):
    """No Ray, no training. The README's spec, saved under the file name its `rapidrl sweep
    FILE` gives, passes the sweep's own checks (``load_spec``, what ``rapidrl sweep`` reads it
    with), and so does each objective its comment offers in place of the one written; a score
    to reach is the env's solved bar (the stop score rapidrl uses for it: CartPole-v1 475). The
    `--config .../best.json` the README and docs/sweeps.md say to train from is where the sweep
    writes it: ``OUT/NAME/best.json`` with OUT the default ``--out-dir`` and NAME the spec's."""
    from rapidrl.envs import resolve_env
    from rapidrl.sweep import load_spec
    from rapidrl.sweep.run import SweepConfig, summarize, write_outputs
    from rapidrl.train.loop import resolve_stop_score

    section = _sweep_section()
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block, "README: no ```yaml block under '### Sweeps'"
    command = re.search(r"`rapidrl sweep (\S+\.ya?ml)`", section)
    assert command, "README: no `rapidrl sweep FILE.yaml` under '### Sweeps'"
    spec_file = tmp_path / command.group(1)
    spec_file.write_text(block.group(1))
    spec = load_spec(spec_file)  # a ConfigError naming the key if the sweep refuses it

    lines = block.group(1).splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith("objective:")]
    for offered in re.findall(r"\{[^{}]*\}", lines[at].partition("#")[2]):
        alt_file = tmp_path / "offered" / spec_file.name
        alt_file.parent.mkdir(exist_ok=True)
        alt_file.write_text("\n".join([*lines[:at], f"objective: {offered}", *lines[at + 1 :]]))
        alt = load_spec(alt_file)
        if alt.to_score is not None:
            for env in alt.envs:
                solved = resolve_stop_score("auto", resolve_env(env))
                assert alt.to_score == solved, f"{offered} on {env}: its solved bar is {solved}"

    # rapidrl.sweep.run.run_sweep writes into Path(out_dir) / spec.name (the slow sweep test
    # in tests/sweep/test_run.py runs that); write_outputs puts best.json there.
    expected = Path(SweepConfig().out_dir) / spec.name / "best.json"
    for doc in (README, SWEEPS_DOC):
        named = re.findall(r"--config (\S*best\.json)", doc.read_text())
        assert named, f"{doc.name}: no `--config .../best.json`"
        assert {Path(p) for p in named} == {expected}, (doc.name, named, str(expected))
    params = {key: rng.values[0] for key, rng in spec.space.items()}
    finished = SimpleNamespace(  # one of Tune's results, as test_report.py stands them in
        metrics={"trial_id": "t1", "finished": True, "done": True, "frames": 1, "score": 1.0,
                 "score_min": 1.0, "score_max": 1.0, "minutes": 0.1},
        error=None, config=params, path=None,
    )  # fmt: skip
    write_outputs(spec, summarize(spec, [finished], 1, 1.0), tmp_path / expected.parent)
    assert (tmp_path / expected).is_file()
