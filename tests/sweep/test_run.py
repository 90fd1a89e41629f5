"""A real sweep on a local Ray (slow stage): PPO on CartPole, 6 trials x 2 seeds, ASHA stopping
the hopeless ones from their learning curves, interrupted (SIGINT) once a trial has finished and
resumed with --resume: the finished trial kept as it was, the lines printed as trials start and
end, the table, the best config (which `rapidrl train --config` takes) and the frames early
stopping saved; a sweep that exists is not overwritten.

Ray gets 2 CPUs whatever the machine has: with 2 CPUs a trial, trials run one at a time and
ASHA's rungs fill in order on 2 cores and on 16 alike (side by side, the first trial at a rung
always goes on, and whether any is stopped would depend on which gets there first)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rapidrl import cli
from rapidrl.algos.ppo.train import parse_ppo_args
from rapidrl.config import ConfigError
from rapidrl.sweep import load_spec

tune = pytest.importorskip("ray.tune")  # the sweep extra: pip install -e '.[sweep]'
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
cpus_per_trial: 2                  # one trial at a time on Ray's 2 CPUs: the rungs fill in order
"""

# `rapidrl sweep` on a local Ray of 2 CPUs (whatever the machine has), as the sweep's own process.
SWEEP = textwrap.dedent("""
    import sys

    import ray

    ray.init(address="local", num_cpus=2, log_to_driver=False, include_dashboard=False)
    from rapidrl import cli

    try:
        code = cli.main(["sweep", *sys.argv[1:]])
    finally:
        ray.shutdown()
    sys.exit(code)
""")


def test_a_cartpole_sweep_with_early_stopping(tmp_path, capsys):
    spec_path = tmp_path / "cartpole-ent.yaml"
    spec_path.write_text(SPEC)
    out = tmp_path / "sweeps"
    folder = out / "cartpole-ent"
    # Started in a child process and stopped with Ctrl-C (SIGINT) once a trial has finished.
    # Its output goes to a file (a pipe nobody reads would fill with Ray's and block it).
    log = tmp_path / "sweep.log"

    def tail() -> str:
        return log.read_text(errors="replace")[-3000:]

    with open(log, "w") as f:
        proc = subprocess.Popen(
            [sys.executable, "-c", SWEEP, str(spec_path), "--out-dir", str(out)],
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline, ran_at = time.monotonic() + 600, None
        # Once Tune has the first trial's end (not only its runs' summaries): its line is out
        # (asserted below; a minute after the last run's summary at most).
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(1)
            if ") finished: score " in log.read_text(errors="replace"):
                break
            ran = sorted((folder / "trials").glob("*/CartPole-v1-seed-2/summary.json"))
            ran_at = ran_at or (time.monotonic() if ran else None)
            if ran_at is not None and time.monotonic() - ran_at > 60:
                break
        done = sorted((folder / "trials").glob("*/CartPole-v1-seed-2/summary.json"))
        assert done and proc.poll() is None, tail()
        first = done[0]
        kept = (first.stat().st_mtime_ns, first.read_bytes())
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # It said what it was doing: a line as each trial started and ended, and the progress.
    said = log.read_text(errors="replace")
    assert "sweep cartpole-ent: 6 trials by Optuna's TPE" in said, tail()
    assert " started: ent_coef=" in said and ") finished: score " in said, tail()
    assert "  progress: 1 of 6 trials ended (1 finished" in said, tail()
    # Resumed: the finished trial is not run again; the others finish; 6 trials in all.
    import ray

    ray.init(address="local", num_cpus=2, log_to_driver=False, include_dashboard=False)
    try:
        argv = ["sweep", str(spec_path), "--out-dir", str(out), "--resume"]
        assert cli.main(argv) == 0, "resume"
    finally:
        ray.shutdown()
    printed = capsys.readouterr().out
    assert "sweep cartpole-ent (resumed)" in printed
    assert "  progress: 6 of 6 trials ended" in printed
    assert (first.stat().st_mtime_ns, first.read_bytes()) == kept
    result = json.loads((folder / "sweep.json").read_text())
    trials = result["trials"]
    assert len(trials) == 6
    finished = [t for t in trials if t["score"] is not None]
    stopped = [t for t in trials if t["stopped_early"]]
    assert finished and stopped, trials  # some ran to the end, some were stopped early
    assert {t["end"] for t in trials} == {"finished", "stopped"}, trials  # no budget, no error
    assert all(t["end"] == "finished" for t in finished)
    assert all(t["frames"] == 2 * 4096 for t in finished)  # both seeds, whole budget
    # Stopped within their first run: at a rung of 1024, 2048 or 4096 frames (its last row).
    assert all(t["frames"] <= 4096 for t in stopped)
    assert all(t["score_min"] <= t["score"] <= t["score_max"] for t in finished)
    assert result["frames_used"] < result["frames_without_early_stopping"] == 6 * 2 * 4096
    best = result["best"]
    assert best["score"] == max(t["score"] for t in finished)
    assert "| trial | ent_coef | clip | score |" in printed and "| stopped early |" in printed
    assert f"Trials: {len(finished)} finished, {len(stopped)} stopped early." in printed
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
