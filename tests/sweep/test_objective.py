"""A trial's score from its runs, for each objective, without Ray: run_trial with a stand-in
trainer that writes the summary a real one would."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import rapidrl.train.launch as launch
from rapidrl.sweep import parse_spec
from rapidrl.sweep.run import run_trial

SPEC = {
    "algo": "ppo", "preset": "cartpole", "env": "CartPole-v1",
    "fields": {"max_frames": 4096, "max_minutes": 2},
    "space": {"lr": {"choice": [0.001]}}, "seeds": [1, 2, 3], "budget": {"trials": 1},
}  # fmt: skip
SOLVED = {  # seed: (seconds_to_solve, frames_to_solve); None: never reached the score
    1: (90.0, 3000),
    2: None,
    3: (30.0, 1000),
}


@pytest.fixture
def fake_trainer(monkeypatch):
    """Each `rapidrl train` child writes a summary: solved per SOLVED, else at its budget."""
    launched = []

    def launch_training(cmd, log_path, limit_seconds, on_poll=None):
        config = json.loads(Path(cmd[cmd.index("--config") + 1]).read_text())
        run_dir = Path(cmd[cmd.index("--run-dir") + 1])
        launched.append(config)
        solved = SOLVED[config["seed"]]
        (run_dir / "checkpoints").mkdir(parents=True)
        (run_dir / "metrics.csv").write_text("frames,return_mean_100\n1024,10.0\n")
        summary = {"frames": 4096, "seconds": 120.0, "stop_reason": "max_minutes",
                   "return_mean_100": 100.0 + config["seed"], "seconds_to_solve": None,
                   "frames_to_solve": None}  # fmt: skip
        if config.get("eval_episodes"):  # the final eval's mean, as final_eval writes it
            summary["eval_mean"] = 200.0 + config["seed"]
        if solved:
            summary.update(seconds_to_solve=solved[0], frames_to_solve=solved[1],
                           stop_reason="solved", frames=solved[1], seconds=solved[0])  # fmt: skip
        (run_dir / "summary.json").write_text(json.dumps(summary))
        if on_poll:
            on_poll()
        return 0, 1.0

    monkeypatch.setattr(launch, "launch_training", launch_training)
    return launched


@pytest.mark.parametrize(
    "objective, seed_scores, stop_at",
    [
        # minutes to the score; the unsolved seed scores twice its 2-minute budget
        ({"minutes_to_score": 475}, [1.5, 4.0, 0.5], 475),
        ({"frames_to_score": 475}, [3000.0, 2 * 4096.0, 1000.0], 475),
        (None, [101.0, 102.0, 103.0], None),  # mean-100 at the end
    ],
)
def test_a_trial_scores_its_runs_by_the_objective(tmp_path, fake_trainer, objective,
                                                  seed_scores, stop_at):  # fmt: skip
    spec = parse_spec({**SPEC, **({"objective": objective} if objective else {})})
    reports: list[dict] = []
    result = run_trial(spec, {"lr": 0.001}, tmp_path / "trial", reports.append)
    assert result["seed_scores"] == seed_scores
    assert result["score"] == sorted(seed_scores)[1]  # the median over the seeds
    assert [c["stop_at_score"] for c in fake_trainer] == [stop_at] * 3
    assert reports[-1]["finished"] and reports[-1]["score"] == result["score"]


def test_a_trial_scored_by_the_final_eval_reads_it_from_each_summary(tmp_path, fake_trainer):
    spec = parse_spec(
        {
            **SPEC,
            "fields": {**SPEC["fields"], "eval_episodes": 5},
            "objective": {"metric": "eval_mean", "mode": "max"},
        }
    )
    reports: list[dict] = []
    result = run_trial(spec, {"lr": 0.001}, tmp_path / "trial", reports.append)
    assert [c["eval_episodes"] for c in fake_trainer] == [5] * 3
    assert result["seed_scores"] == [201.0, 202.0, 203.0] and result["score"] == 202.0
    # Rows carry no eval: the scores reported while a run goes are not numbers.
    interim = [r for r in reports if not r["finished"]]
    assert interim and all(math.isnan(r["score"]) for r in interim)


def test_a_trial_with_the_params_of_a_finished_one_points_at_its_runs(tmp_path, fake_trainer):
    """A sampler may propose parameters again: the second trial takes the first one's finished
    runs' scores (the same measurement, not a new one) and points at their run dirs, which keep
    their checkpoints (evaluable) and their own config; nothing is copied or trained."""
    spec = parse_spec({**SPEC, "objective": {"minutes_to_score": 475}})
    first = run_trial(spec, {"lr": 0.001}, tmp_path / "trials" / "a", lambda m: None)
    assert len(fake_trainer) == 3 and first["reused"] == [] and first["frames_reused"] == 0
    reports: list[dict] = []
    again = run_trial(spec, {"lr": 0.001}, tmp_path / "trials" / "b", reports.append)
    assert len(fake_trainer) == 3  # nothing trained
    runs = [tmp_path / "trials" / "a" / f"CartPole-v1-seed-{s}" for s in (1, 2, 3)]
    assert again["reused_dirs"] == [str(r) for r in runs]
    assert again["reused"] == [f"CartPole-v1-seed-{s} of trial a" for s in (1, 2, 3)]
    assert all((r / "checkpoints").is_dir() for r in runs)  # rapidrl eval takes them
    assert not (tmp_path / "trials" / "b" / "CartPole-v1-seed-1").exists()  # nothing copied
    assert (
        again["seed_scores"] == first["seed_scores"]
        and again["frames_reused"] == 3000 + 4096 + 1000
    )
    assert any(not r["finished"] for r in reports)  # the first run's rows reached the scheduler
    other = run_trial(spec, {"lr": 0.002}, tmp_path / "trials" / "c", lambda m: None)
    assert len(fake_trainer) == 6 and other["reused"] == []  # another config: trained
