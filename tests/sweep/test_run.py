"""A real sweep on a local Ray (slow stage): PPO on CartPole, 6 trials x 2 seeds, ASHA stopping
the hopeless ones from their learning curves, interrupted (SIGINT) once a trial has finished and
resumed with --resume: the finished trial kept as it was, the table, the best config (which
`rapidrl train --config` takes) and the frames early stopping saved; a sweep that exists is not
overwritten."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from rapidrl import cli
from rapidrl.algos.ppo.train import parse_ppo_args
from rapidrl.config import ConfigError
from rapidrl.sweep import load_spec

tune = pytest.importorskip("ray.tune")  # the sweep extra: pip install 'rapidrl[sweep]'
pytest.importorskip("optuna")

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray"), pytest.mark.timeout(900)]

SPEC = """\
name: cartpole-ent
algo: ppo
preset: cartpole
fields: {max_frames: 4096, lr: 0.005}
space:
  ent_coef: {choice: [0.0, 3.0]}   # 3.0 keeps the policy uniform: a curve that never rises
  clip: {uniform: [0.1, 0.3]}
seeds: [1, 2]
budget: {trials: 6}
early_stop: {scheduler: asha, grace_frames: 1024, reduction_factor: 2}
cpus_per_trial: 2                  # one trial at a time on 2 cores: the rungs fill in order
"""


def test_a_cartpole_sweep_with_early_stopping(tmp_path, capsys):
    spec_path = tmp_path / "cartpole-ent.yaml"
    spec_path.write_text(SPEC)
    out = tmp_path / "sweeps"
    folder = out / "cartpole-ent"
    # Started in a child process and stopped with Ctrl-C (SIGINT) once a trial has finished.
    proc = subprocess.Popen(
        [sys.executable, "-m", "rapidrl.cli", "sweep", str(spec_path), "--out-dir", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 600
    first = None
    while first is None and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(1)
        done = sorted((folder / "trials").glob("*/CartPole-v1-seed-2/summary.json"))
        first = done[0] if done else None
    assert first is not None, proc.stderr.read() if proc.poll() is not None else "no trial ended"
    kept = (first.stat().st_mtime_ns, first.read_bytes())
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    # Resumed: the finished trial is not run again; the others finish; 6 trials in all.
    argv = ["sweep", str(spec_path), "--out-dir", str(out), "--resume"]
    assert cli.main(argv) == 0, "resume"
    printed = capsys.readouterr().out
    assert (first.stat().st_mtime_ns, first.read_bytes()) == kept
    result = json.loads((folder / "sweep.json").read_text())
    trials = result["trials"]
    assert len(trials) == 6
    finished = [t for t in trials if t["score"] is not None]
    stopped = [t for t in trials if t["stopped_early"]]
    assert finished and stopped, trials  # some ran to the end, some were stopped early
    assert all(t["frames"] == 2 * 4096 for t in finished)  # both seeds, whole budget
    assert all(t["frames"] < 4096 for t in stopped)  # stopped within their first run
    assert all(t["score_min"] <= t["score"] <= t["score_max"] for t in finished)
    assert result["frames_used"] < result["frames_without_early_stopping"] == 6 * 2 * 4096
    best = result["best"]
    assert best["score"] == max(t["score"] for t in finished)
    assert "| trial | ent_coef | clip | score |" in printed and "stopped early" in printed
    # Every run of a trial is an ordinary run dir; the best config is a --config file.
    trial_dir = folder / "trials" / best["trial"]
    assert (
        json.loads((trial_dir / "CartPole-v1-seed-2" / "summary.json").read_text())["frames"]
        == 4096
    )
    cfg = parse_ppo_args(["--config", str(folder / "best.json")], "rapidrl train ppo", "fast")
    assert cfg.ent_coef == best["params"]["ent_coef"] and cfg.clip == best["params"]["clip"]
    assert cfg.lr == 0.005 and cfg.max_frames == 4096
    assert (folder / "sweep.csv").read_text().count("\n") == 7 and (folder / "sweep.png").exists()
    # The same sweep again without --resume: refused, nothing touched.
    with pytest.raises(ConfigError, match="--resume goes on with it"):
        from rapidrl.sweep.run import run_sweep

        run_sweep(load_spec(spec_path), out)
