"""``rapidrl bench solve``: seeds run one after the other in child processes, their summaries
gathered into solve.json / solve.md / solve.png; failures reported, never lost or hung."""

import dataclasses
import json
import math
import shutil
from pathlib import Path

import pytest

from rapidrl.bench.solve import (
    BenchSolveConfig,
    bench_solve,
    format_table,
    summarize,
    within_budget,
)
from rapidrl.config import ConfigError

TINY = ["--num-envs", "2", "--num-steps", "32", "--torch-threads", "1", "--no-tensorboard"]


def _seed_dir(out, seed, env="CartPole-v1", label="ppo-cartpole"):
    return out / env / label / f"seed-{seed}"


def test_two_seeds_on_cartpole(tmp_path):
    b = BenchSolveConfig(
        algo="ppo", preset="cartpole", env="CartPole-v1", seeds="1,2", max_frames=128,
        max_minutes=2.0, out_dir=str(tmp_path / "out"),
    )  # fmt: skip
    result = bench_solve(b, TINY, ["--seeds", "1,2"])
    out = tmp_path / "out"
    saved = json.loads((out / "solve.json").read_text())
    assert [r["seed"] for r in saved["runs"]] == [1, 2]
    for r in saved["runs"]:
        assert "failed" not in r, r.get("log_tail")
        assert r["frames"] == 128 and r["solved"] is False and r["stop_reason"] == "max_frames"
        assert r["mean_rollout_s"] > 0 and r["mean_update_s"] > 0
        assert (_seed_dir(out, r["seed"]) / "summary.json").exists()
        cmd = r["command"]
        assert cmd[cmd.index("--seed") + 1] == str(r["seed"])
        assert cmd[cmd.index("--stop-at-score") + 1] == "auto"
    s = result["summary"]
    assert s["seeds"] == 2 and s["solved"] == 0 and s["failed"] == 0
    assert math.isinf(s["minutes_to_solve"]["median"])
    table = (out / "solve.md").read_text()
    # They stopped at --max-frames, not at the 2-minute budget: the table says so, not "> 2".
    assert "| no | not solved (max_frames at 0.0) |" in table
    assert "| **median** | 0/2 | **not solved**" in table and saved["cpu"] in table
    assert saved["hardware"]["cores"] >= 1
    assert (out / "solve.png").stat().st_size > 0
    assert (out / "suite.json").exists()  # the one-game suite's own record
    # Run again (more seeds, a longer budget): the finished seeds are kept, not re-run.
    more = dataclasses.replace(b, seeds="1,2,3", max_minutes=3.0)
    again = bench_solve(more, TINY)
    assert [r.get("kept", False) for r in again["runs"]] == [True, True, False]
    assert [r["frames"] for r in again["runs"]] == [128, 128, 128]
    assert again["runs"][0]["command"] == saved["runs"][0]["command"]
    # A bench never mixes new runs with old ones: another recipe is refused before any run.
    with pytest.raises(ConfigError, match="seed-1 ran another recipe"):
        bench_solve(dataclasses.replace(more, seeds="4,1"), [*TINY, "--lr", "1e-3"])
    assert not _seed_dir(out, 4).exists()
    # A run dir left without a summary or a checkpoint (a start that died) starts again.
    (_seed_dir(out, 2) / "summary.json").unlink()
    shutil.rmtree(_seed_dir(out, 2) / "checkpoints")
    again = bench_solve(b, TINY)
    assert [r.get("kept", False) for r in again["runs"]] == [True, False]
    assert again["runs"][1]["frames"] == 128
    # The same command when the preset gave another config (here seed 1 as if cartpole's lr had
    # been 1e-3 then): another recipe, refused, not kept as this one.
    config = _seed_dir(out, 1) / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "lr": 1e-3}))
    with pytest.raises(ConfigError, match=r"seed-1 ran the same command .* lr 0.001 -> 0.00025"):
        bench_solve(b, TINY)
    config.write_text(json.dumps({**json.loads(config.read_text()), "gone_field": 1}))
    with pytest.raises(ConfigError, match=r"not a config this version reads .*gone_field"):
        bench_solve(b, TINY)


def test_a_kept_seed_that_solved_after_the_budget_is_not_solved():
    r = {"seed": 1, "solved": True, "minutes_to_solve": 15.0, "frames_to_solve": 5e6}
    assert within_budget(r, 20.0) is r
    late = within_budget(r, 10.0)
    assert late["solved"] is False and late["stop_reason"] == "solved after 10 min"
    assert summarize([late], 10.0)["solved"] == 0


def test_a_trainer_stopped_from_outside_stops_the_bench_and_resumes(tmp_path, monkeypatch, capsys):
    """A signal to the trainer alone (it checkpoints, writes an "interrupted" summary and exits
    0) stops the bench there, as Ctrl-C does, instead of starting the next seed; the same
    command then resumes that seed from its checkpoint and goes on."""
    import rapidrl.bench.atari as atari

    b = BenchSolveConfig(seeds="1,2", max_minutes=5.0, out_dir=str(tmp_path))
    launched: list[list[str]] = []

    def trainer(stop_reason):
        def fake_launch_training(cmd, log_path, limit_seconds):
            launched.append(list(cmd))
            flag = "--resume" if "--resume" in cmd else "--run-dir"
            run_dir = Path(cmd[cmd.index(flag) + 1])
            (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
            (run_dir / "checkpoints" / "ckpt-000000001000.pt").write_bytes(b"x")
            summary = {"stop_reason": stop_reason, "solved": False, "frames": 1000}
            (run_dir / "summary.json").write_text(json.dumps(summary))
            with open(log_path, "a") as log:
                log.write("trained\n")
            return 0, 1.0

        return fake_launch_training

    monkeypatch.setattr(atari, "launch_training", trainer("interrupted"))
    result = bench_solve(b)
    assert len(launched) == 1  # seed 2 never started
    (run,) = result["runs"]
    assert run["seed"] == 1 and run["interrupted"] and run["failed"].startswith("interrupted")
    assert "seed 1: stopped (interrupted" in capsys.readouterr().out

    # The same command again: seed 1 resumes from its checkpoint (its own config.json), then
    # seed 2 starts afresh; both records carry the recipe's command, not the resume line.
    monkeypatch.setattr(atari, "launch_training", trainer("max_minutes"))
    result = bench_solve(b)
    resumed, fresh = launched[1:]
    seed1 = _seed_dir(tmp_path, 1, "pong", "ppo-lean")
    assert resumed[resumed.index("--resume") + 1] == str(seed1)
    assert "--preset" not in resumed and resumed[resumed.index("--max-minutes") + 1] == "5.0"
    assert "--resume" not in fresh and fresh[fresh.index("--seed") + 1] == "2"
    assert fresh[fresh.index("--preset") + 1] == "lean"  # the default preset of ppo
    assert "seed 1: resuming" in capsys.readouterr().out
    assert [r.get("interrupted", False) for r in result["runs"]] == [False, False]
    assert "--preset" in result["runs"][0]["command"]
    assert (seed1.parent / "seed-1.log").read_text() == "trained\n" * 2  # appended to
    # Finished now: a third time keeps both, runs nothing.
    bench_solve(b)
    assert len(launched) == 3


def test_a_failing_run_is_reported_with_its_log(tmp_path):
    b = BenchSolveConfig(
        algo="ppo", preset="cartpole", env="CartPole-v1", seeds="3", max_frames=128,
        out_dir=str(tmp_path),
    )  # fmt: skip
    result = bench_solve(b, ["--clip", "0"])
    (run,) = result["runs"]
    assert run["failed"] == "exit code 2" and "--clip must be > 0" in run["log_tail"]
    assert result["summary"]["failed"] == 1
    assert "failed: exit code 2" in format_table(result)


def test_summary_median_counts_unsolved_seeds_as_over_budget():
    runs = [
        {"seed": 1, "solved": True, "minutes_to_solve": 10.0, "frames_to_solve": 3e6},
        {"seed": 2, "solved": True, "minutes_to_solve": 20.0, "frames_to_solve": 4e6},
        {"seed": 3, "solved": False, "minutes_to_solve": None, "frames_to_solve": None},
    ]
    s = summarize(runs, 30)
    assert s["solved"] == 2 and s["minutes_to_solve"]["median"] == 20.0
    assert s["minutes_to_solve"]["min"] == 10.0 and math.isinf(s["minutes_to_solve"]["max"])
    assert s["frames_to_solve"]["median"] == 4e6


def _result(*runs, budget: float = 32) -> dict:
    """What bench_solve hands format_table, for canned run records."""
    cfg = {"algo": "pqn", "preset": "fast", "env": "pong", "max_minutes": budget}
    return {"config": cfg, "cpu": "cpu", "argv": ["rapidrl"], "runs": list(runs),
            "summary": summarize(list(runs), budget)}  # fmt: skip


def test_table_says_over_budget_only_for_seeds_that_ran_the_whole_budget():
    result = _result

    solved = {"seed": 1, "solved": True, "minutes_to_solve": 25.0, "frames_to_solve": 7e6}
    timed_out = {"seed": 2, "solved": False, "stop_reason": "max_minutes", "minutes": 32.02}
    stopped = {"seed": 3, "solved": False, "stop_reason": "interrupted", "minutes": 26.84}
    table = format_table(result(solved, timed_out))
    assert "| 2 | no | > 32 |" in table and "**> 32** (25.0 to > 32)" in table
    table = format_table(result(solved, timed_out, stopped))
    assert "| 3 | no | not solved (interrupted at 26.8) |" in table
    # Seed 3 might have solved within the budget: the median is not "> 32" but not solved.
    assert "**not solved** (25.0 to not solved)" in table


def test_table_has_a_final_eval_column_only_when_a_run_has_one():
    result = _result

    plain = {"seed": 1, "solved": True, "minutes_to_solve": 5.0, "frames_to_solve": 2e6}
    assert "final eval" not in format_table(result(plain))
    runs = [
        {**plain, "eval_mean": 20.5},
        {**plain, "seed": 2, "eval_mean": 19.0},
        {**plain, "seed": 3},  # its eval failed: the run stands, its cell says so
        {"seed": 4, "failed": "exit code 2"},
    ]
    assert summarize(runs, 32)["eval_mean"] == {"median": 19.75, "min": 19.0, "max": 20.5}
    table = format_table(result(*runs))
    lines = table.splitlines()
    assert lines[2].endswith("| final eval (greedy) |")
    assert lines[4].endswith("| 20.5 |") and lines[5].endswith("| 19.0 |")
    assert lines[6].endswith("| - |") and lines[7].endswith("| - |")
    assert lines[8].startswith("| **median** | 3/4") and lines[8].endswith("| 19.8 |")
    # Every row has the header's cells.
    assert len({line.count("|") for line in lines[2:9]}) == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(seeds=""), "at least one seed"),
        (dict(seeds="1,x"), "comma-separated integers"),
        (dict(seeds="1,1"), "a seed twice"),
        (dict(max_minutes=0), "--max-minutes must be > 0"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        BenchSolveConfig(**kwargs).validate()
