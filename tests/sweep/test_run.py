"""A real sweep on a local Ray (slow stage): PPO on CartPole, 6 trials x 2 seeds, ASHA stopping
the hopeless ones from their learning curves; the table, the best config (which `rapidrl train
--config` takes) and the frames early stopping saved; a sweep that exists is not overwritten."""

from __future__ import annotations

import json

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
    assert cli.main(["sweep", str(spec_path), "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    folder = out / "cartpole-ent"
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
