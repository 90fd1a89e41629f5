"""``rapidrl bench atari``: the scores it reports (human-normalized, the references at the same
frame count), the tables from canned run dirs, the state of a run dir, and a real suite that is
stopped and started again (finished runs kept, an unfinished one resumed from its checkpoint)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rapidrl.bench.atari import (
    GAME_SETS,
    HUMAN_RANDOM,
    BenchAtariConfig,
    RunSpec,
    bench_atari,
    format_tables,
    human_normalized,
    reference_scores,
    run_command,
    run_record,
    suite_medians,
    summarize_suite,
)
from rapidrl.config import ConfigError
from rapidrl.train.launch import run_state


def test_human_normalized_scores():
    assert human_normalized("pong", -20.7) == pytest.approx(0.0)
    assert human_normalized("pong", 14.6) == pytest.approx(1.0)
    assert human_normalized("space_invaders", 148.0 + (1668.7 - 148.0) / 2) == pytest.approx(0.5)
    assert human_normalized("SpaceInvaders", 148.0) == pytest.approx(0.0)
    assert human_normalized("CartPole-v1", 500.0) is None  # no published human score
    assert human_normalized("breakout", None) is None


def test_reference_scores_at_the_same_frames():
    ref = reference_scores("breakout", 10_003_200)  # a 10M budget ends a little past it
    assert ref["frames"] == 10_000_000
    assert ref["DQN"] == pytest.approx(21.5) and ref["Rainbow"] == pytest.approx(41.9)
    assert reference_scores("breakout", 4_000_000)["frames"] == 2_000_000
    assert reference_scores("space_invaders", 5e6)["frames"] == 5_000_000
    assert reference_scores("breakout", 500_000) is None  # before the first tabulated point
    assert reference_scores("CartPole-v1", 1e7) is None


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(algos="ppo:fast,a2c"), "unknown algorithm 'a2c'"),
        (dict(algos="ppo,ppo:lean"), "lists a pair twice"),
        (dict(seeds="1,1"), "--seeds"),
        (dict(games=" , "), "--games"),
        (dict(stop_at_score="solved"), "--stop-at-score"),
        (dict(max_frames=0), "--max-frames"),
        (dict(cpus_per_run=0), "--cpus-per-run"),
        (dict(games="pong,brekout"), "--games: unknown env id 'brekout'; did you mean 'breakout'"),
    ],
)
def test_config_errors(fields, message):
    with pytest.raises(ConfigError, match=message):
        BenchAtariConfig(**fields).validate()


def test_named_game_lists():
    """atari5 / atari10 / atari57 expand in place, each game once, and every name is a real ALE
    game with published human and random scores (so every row of a 57-game suite is
    human-normalized)."""
    b = BenchAtariConfig(games="pong,Atari-5,qbert")
    assert b.game_list() == ["pong", *GAME_SETS["atari5"]]  # qbert is already in Atari-5
    b.validate()
    b10 = BenchAtariConfig(games="atari5,atari10")
    assert b10.game_list() == list(GAME_SETS["atari10"]) and len(b10.game_list()) == 10
    b10.validate()
    games57 = BenchAtariConfig(games="atari57").game_list()
    assert len(games57) == 57 and {g.replace("_", "") for g in games57} == set(HUMAN_RANDOM)
    BenchAtariConfig(games="atari57").validate()  # each resolves to an ALE env


def test_runs_and_default_presets():
    b = BenchAtariConfig(games="breakout,pong", algos="ppo,rainbow,dqn:fast", seeds="1,2")
    runs = b.runs()
    assert len(runs) == 12 and runs[0] == RunSpec("breakout", "ppo", "lean", 1)
    assert {r.label for r in runs} == {"ppo:lean", "rainbow:rainbow-lean", "dqn:fast"}
    assert runs[0].run_dir("out").as_posix() == "out/breakout/ppo-lean/seed-1"


def _canned_run(run_dir, *, frames, final, best, stop="max_frames", curve=((0, -20.0),)):
    run_dir.mkdir(parents=True)
    summary = dict(
        frames=frames, seconds=600.0, episodes=150, return_mean_100=final,
        best_return_mean_100=best, solved=False, frames_to_solve=None, seconds_to_solve=None,
        frames_per_second=frames / 600.0, stop_reason=stop,
    )  # fmt: skip
    (run_dir / "summary.json").write_text(json.dumps(summary))
    rows = ["frames,seconds,return_mean_100"] + [f"{f},{f / 1000},{v}" for f, v in curve]
    (run_dir / "metrics.csv").write_text("\n".join(rows) + "\n")


def test_tables_from_canned_run_dirs(tmp_path):
    specs = [RunSpec("breakout", "ppo", "fast", s) for s in (1, 2, 3)]
    for spec, final in zip(specs, (10.0, 30.0, 20.0)):
        _canned_run(spec.run_dir(tmp_path), frames=10_001_024, final=final, best=final + 5)
    records = [run_record(spec, spec.run_dir(tmp_path)) for spec in specs]
    records.append({**RunSpec("breakout", "ppo", "fast", 4).__dict__, "failed": "exit code 1"})
    assert records[0]["hns"] == pytest.approx((10.0 - 1.7) / (30.5 - 1.7))
    assert records[0]["reference"]["frames"] == 10_000_000
    (group,) = summarize_suite(records)
    assert group["seeds"] == 4 and group["failed"] == 1
    assert group["return_mean_100"] == 20.0 and (group["min"], group["max"]) == (10.0, 30.0)
    assert group["hns"] == pytest.approx((20.0 - 1.7) / 28.8)
    assert group["best_return_mean_100"] == 25.0 and group["minutes"] == 10.0
    table = format_tables(
        {"cpu": "test CPU", "summary": [group], "runs": records, "argv": ["rapidrl", "x"]}
    )
    assert "| breakout | ppo:fast | 3/4 | 10.00M | 10.0 |" in table
    assert "**20.0** | 10.0..30.0 | 0.64 |" in table
    assert "21.5 / 41.9 @10M" in table  # Dopamine DQN / Rainbow at 10M frames
    assert "| breakout | ppo:fast | 4 | failed: exit code 1 |" in table
    assert "Final eval" not in table  # no run was evaluated (--eval-episodes 0)


def test_final_evals_get_their_own_table(tmp_path):
    """Runs trained with `-- --eval-episodes N`: each seed's eval and their median, by game."""
    specs = [RunSpec("breakout", "ppo", "fast", s) for s in (1, 2, 3)]
    for spec, final in zip(specs, (10.0, 30.0, 20.0)):
        _canned_run(spec.run_dir(tmp_path), frames=10_001_024, final=final, best=final)
    for spec, score in zip(specs[:2], (40.0, 12.5)):
        path = spec.run_dir(tmp_path) / "summary.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "eval_mean": score}))
    records = [run_record(spec, spec.run_dir(tmp_path)) for spec in specs]
    (group,) = summarize_suite(records)
    assert group["eval_mean"] == pytest.approx(26.25) and group["eval_seeds"] == [40.0, 12.5, None]
    table = format_tables(
        {"cpu": "test CPU", "summary": [group], "runs": records, "argv": ["rapidrl", "x"]}
    )
    assert "| breakout | ppo:fast | **26.2** | 40.0 / 12.5 / - |" in table


def test_a_carried_run_is_kept_and_a_stop_keeps_the_curves(tmp_path, monkeypatch):
    """A finished run carried without checkpoints/ and tb/ (docs/suite.md) is kept as it is;
    the suite stopped in the next run still has the table and the curves of the first."""
    import rapidrl.bench.atari as atari

    b = BenchAtariConfig(
        games="breakout", algos="ppo:fast", seeds="1,2", max_frames=10_000_000,
        out_dir=str(tmp_path),
    )  # fmt: skip
    carried = RunSpec("breakout", "ppo", "fast", 1).run_dir(tmp_path)
    _canned_run(carried, frames=10_001_024, final=30.0, best=35.0, curve=((0, 2.0), (5e6, 30.0)))
    summary = (carried / "summary.json").read_bytes()
    real = atari.execute_run

    def stop_at_seed_2(b, spec, extra=()):
        if spec.seed == 2:
            raise KeyboardInterrupt  # Ctrl-C while seed 2 trains
        return real(b, spec, extra)

    monkeypatch.setattr(atari, "execute_run", stop_at_seed_2)
    with pytest.raises(KeyboardInterrupt):
        bench_atari(b)
    assert (carried / "summary.json").read_bytes() == summary  # kept, not run again
    suite = json.loads((tmp_path / "suite.json").read_text())
    assert [r["seed"] for r in suite["runs"]] == [1] and suite["runs"][0]["return_mean_100"] == 30
    assert (tmp_path / "curves-breakout.png").stat().st_size > 0


def test_a_trainer_stopped_from_outside_stops_the_suite(tmp_path, monkeypatch, capsys):
    """A signal to the trainer alone (it checkpoints, writes an "interrupted" summary and exits
    0) is recorded as stopped, not as a finished or crashed run, and the suite stops there as
    on Ctrl-C instead of starting the next run."""
    import rapidrl.bench.atari as atari

    b = BenchAtariConfig(
        games="breakout", algos="ppo:fast", seeds="1,2", max_frames=1000, out_dir=str(tmp_path)
    )
    started = []

    def stopped_trainer(cmd, log_path, limit_seconds):
        run_dir = cmd[cmd.index("--run-dir") + 1]
        started.append(run_dir)
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        (Path(run_dir) / "summary.json").write_text(json.dumps({"stop_reason": "interrupted"}))
        return 0, 1.0

    monkeypatch.setattr(atari, "launch_training", stopped_trainer)
    result = bench_atari(b)
    assert len(started) == 1  # seed 2 never started
    (run,) = result["runs"]
    assert run["seed"] == 1 and run["interrupted"] and run["failed"].startswith("interrupted")
    assert "seed 1: stopped (interrupted" in capsys.readouterr().out
    suite = json.loads((tmp_path / "suite.json").read_text())
    assert suite["summary"][0]["failed"] == 1


def test_run_state_and_command(tmp_path):
    b = BenchAtariConfig(games="pong", algos="ppo:fast", out_dir=str(tmp_path), max_frames=1000)
    spec = b.runs()[0]
    run_dir = spec.run_dir(tmp_path)
    assert run_state(run_dir) == "fresh"
    cmd = run_command(b, spec, run_dir, ["--obs-size", "64"])
    assert cmd[-2:] == ["--obs-size", "64"] and "--preset" in cmd and "--resume" not in cmd
    assert cmd[cmd.index("--stop-at-score") + 1] == "None"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "ckpt-000000001000.pt").write_bytes(b"x")
    assert run_state(run_dir) == "resume"
    cmd = run_command(b, spec, run_dir, ["--obs-size", "64"])
    assert cmd[cmd.index("--resume") + 1] == str(run_dir) and "--preset" not in cmd
    (run_dir / "summary.json").write_text(json.dumps({"stop_reason": "interrupted"}))
    assert run_state(run_dir) == "resume"  # Ctrl-C: summary written, run not finished
    (run_dir / "summary.json").write_text(json.dumps({"stop_reason": "max_frames"}))
    assert run_state(run_dir) == "done"


# What every small training run of these tests adds to its trainer's command line.
TINY_RUN = ["--torch-threads", "1", "--no-tensorboard", "--log-every-seconds", "0"]


def test_a_stopped_suite_goes_on_where_it_left_off(tmp_path):
    """Two CartPole runs to the end; then seed 2 is made "stopped before its end" (its summary
    gone, its checkpoints kept) and a third run's dir holds only a torn start. Run again: seed 1
    is kept byte for byte, seed 2 resumes from its checkpoint, seed 3 starts over."""
    b = BenchAtariConfig(
        games="CartPole-v1", algos="ppo:cartpole", seeds="1,2", max_frames=1024,
        out_dir=str(tmp_path / "suite"),
    )  # fmt: skip
    first = bench_atari(b, TINY_RUN)
    assert [r["seed"] for r in first["runs"]] == [1, 2]
    assert all("failed" not in r and r["frames"] >= 1024 for r in first["runs"])
    assert first["runs"][0]["hns"] is None and first["runs"][0]["reference"] is None
    seed1, seed2 = (RunSpec("CartPole-v1", "ppo", "cartpole", s).run_dir(b.out_dir) for s in (1, 2))
    kept = (seed1 / "summary.json").read_bytes()
    (seed2 / "summary.json").unlink()
    torn = RunSpec("CartPole-v1", "ppo", "cartpole", 3).run_dir(b.out_dir)
    torn.mkdir(parents=True)
    (torn / "config.json").write_text("{")

    again = bench_atari(BenchAtariConfig(**{**b.__dict__, "seeds": "1,2,3"}), TINY_RUN)
    assert (seed1 / "summary.json").read_bytes() == kept
    log2 = (seed2.parent / "seed-2.log").read_text()
    assert "resumed" in log2
    assert [r["seed"] for r in again["runs"]] == [1, 2, 3]
    assert all("failed" not in r for r in again["runs"]), again["runs"]
    assert again["runs"][1]["frames"] == first["runs"][1]["frames"]  # its budget was spent
    assert json.loads((tmp_path / "suite" / "suite.json").read_text())["summary"][0]["seeds"] == 3
    assert (tmp_path / "suite" / "curves-CartPole-v1.png").exists()
    assert not math.isnan(again["summary"][0]["return_mean_100"])


def test_report_runs_nothing_and_tables_the_finished_runs(tmp_path, monkeypatch, capsys):
    """--report: the table and curves of the runs finished so far (one carried, one stopped
    mid-run, one never started), nothing run, the unfinished ones named."""
    import rapidrl.bench.atari as atari

    def no_run(*args, **kwargs):
        raise AssertionError("--report ran a trainer")

    monkeypatch.setattr(atari, "launch_training", no_run)
    done = RunSpec("breakout", "ppo", "lean", 1).run_dir(tmp_path)
    _canned_run(done, frames=10_027_008, final=103.1, best=103.1, curve=((0, 1.0), (1e7, 103.1)))
    stopped = RunSpec("qbert", "ppo", "lean", 1).run_dir(tmp_path)
    _canned_run(stopped, frames=4_000_000, final=900.0, best=900.0, stop="interrupted")
    argv = ["--games", "breakout,qbert,phoenix", "--algos", "ppo:lean", "--seeds", "1"]
    assert atari.main([*argv, "--out-dir", str(tmp_path), "--report"]) == 0
    out = capsys.readouterr().out
    assert "1 runs finished; not finished: qbert ppo:lean seed 1, phoenix ppo:lean seed 1" in out
    suite = json.loads((tmp_path / "suite.json").read_text())
    assert [(r["game"], r["return_mean_100"]) for r in suite["runs"]] == [("breakout", 103.1)]
    assert "| breakout | ppo:lean | 1/1 | 10.03M |" in (tmp_path / "suite.md").read_text()
    assert (tmp_path / "curves-breakout.png").stat().st_size > 0
    assert json.loads((stopped / "summary.json").read_text())["stop_reason"] == "interrupted"


def _record(game, label, seed, final):
    algo, preset = label.split(":")
    return dict(
        game=game, algo=algo, preset=preset, seed=seed, return_mean_100=final,
        best_return_mean_100=final, frames=10_027_008, minutes=17.0, frames_per_second=9_800.0,
        hns=human_normalized(game, final), stop_reason="max_frames",
        reference=reference_scores(game, 10_027_008),
    )  # fmt: skip


def test_score_at_is_the_row_of_the_update_that_reaches_the_count(tmp_path):
    """--score-at N reads the first metrics row at or past N (the update that reaches N, where
    a run with --max-frames N ends), skipping rows before the first episode's return."""
    from rapidrl.train.launch import scores_at

    run_dir = tmp_path / "run"
    _canned_run(
        run_dir, frames=1_040_000, final=6.0, best=6.0,
        curve=((0, "nan"), (997_376, 4.0), (1_017_856, 5.0), (1_040_000, 6.0)),
    )  # fmt: skip
    hits = scores_at(run_dir, [1_000_000, 997_376, 1, 2_000_000])
    assert hits == [
        (5.0, 1_017.856 / 60.0),  # the first row past 1M
        (4.0, 997.376 / 60.0),  # a row exactly at the count
        (4.0, 997.376 / 60.0),  # the nan row (no episode yet) is skipped
        None,  # stopped before
    ]
    assert scores_at(tmp_path / "none", [1]) == [None]  # no metrics


def test_the_report_tables_the_scores_at_the_given_counts(tmp_path, capsys):
    """`bench atari --report --score-at 1000000`: a column in both tables, each run's score and
    minutes at 1M, the game's median over the seeds that reached it (and how many), "-" for a
    run that stopped before; suite.json carries them. (MuJoCo's 1M-step comparison is what it is
    for; an Atari game here keeps the test off the mujoco extra.)"""
    import rapidrl.bench.atari as atari

    for seed, (frames, curve) in {
        1: (1_100_000, ((500_000, 1.0), (1_000_448, 10.0), (1_100_000, 11.0))),
        2: (1_100_000, ((990_000, 2.0), (1_020_000, 30.0), (1_100_000, 31.0))),
        3: (800_000, ((400_000, 3.0), (800_000, 4.0))),  # a budget that ended before 1M
    }.items():
        run_dir = RunSpec("breakout", "ppo", "lean", seed).run_dir(tmp_path)
        _canned_run(run_dir, frames=frames, final=curve[-1][1], best=curve[-1][1], curve=curve)
    argv = ["--games", "breakout", "--algos", "ppo:lean", "--seeds", "1,2,3"]
    assert atari.main([*argv, "--out-dir", str(tmp_path), "--report", "--score-at", "1000000"]) == 0
    capsys.readouterr()
    suite = json.loads((tmp_path / "suite.json").read_text())
    assert [r["at_frames"][0]["return_mean_100"] for r in suite["runs"]] == [10.0, 30.0, None]
    (game,) = suite["summary"]
    assert game["at_frames"] == [
        {"frames": 1_000_000, "return_mean_100": 20.0, "minutes": (1_000.448 / 60 + 17.0) / 2,
         "reached": 2},
    ]  # fmt: skip
    table = (tmp_path / "suite.md").read_text()
    assert "| best mean-100 | Dopamine DQN / Rainbow | mean-100 at 1.00M (minutes) |" in table
    assert "| 20.0 (16.8, 2 of 3) |" in table  # the game: median of 10 and 30, two seeds
    assert "| max_frames | 10.0 (16.7) |" in table and "| max_frames | - |" in table
    assert "mean-100 at N: at the first metrics row at or past N frames" in table
    with pytest.raises(ConfigError, match="--score-at takes frame counts >= 1"):
        BenchAtariConfig(games="pong", score_at=(0,)).validate()


def test_suite_median_hns_against_dopamine_on_the_same_games():
    records = [
        _record("breakout", "ppo:lean", 1, 103.1),
        _record("breakout", "ppo:lean", 2, 84.8),  # the game's median: 93.95
        _record("qbert", "ppo:lean", 1, 5_334.5),
        _record("pong", "ppo:lean", 1, 20.0),
        _record("pong", "pqn:lean", 1, 10.0),
    ]
    summary = summarize_suite(records)
    lean, pqn = suite_medians(summary)
    assert (lean["algo"], lean["games"], pqn["games"]) == ("ppo:lean", 3, 1)
    # Per game (random, human): breakout (1.7, 30.5), qbert (163.9, 13455.0), pong (-20.7, 14.6).
    breakout, qbert, pong = (93.95 - 1.7) / 28.8, (5_334.5 - 163.9) / 13_291.1, 40.7 / 35.3
    assert lean["hns"] == pytest.approx(sorted([breakout, qbert, pong])[1])  # Pong's 1.15
    # Dopamine at 10M frames: DQN 21.5 / 1,658.4 / -4.9, Rainbow 41.9 / 5,353.9 / 15.2.
    dqn = sorted([19.8 / 28.8, 1_494.5 / 13_291.1, 15.8 / 35.3])[1]
    rainbow = sorted([40.2 / 28.8, 5_190.0 / 13_291.1, 35.9 / 35.3])[1]
    assert lean["reference_hns"]["DQN"] == pytest.approx(dqn)
    assert lean["reference_hns"]["Rainbow"] == pytest.approx(rainbow)
    assert pqn["hns"] == pytest.approx(30.7 / 35.3)
    table = format_tables({"cpu": "c", "summary": summary, "runs": records, "argv": ["x"]})
    # No Atari-5 estimate (not its five games): "-", then the median HNS of the three.
    assert f"| ppo:lean | - | - | 3 | {lean['hns']:.2f} | {dqn:.2f} / {rainbow:.2f} |" in table


def test_suite_median_hns_has_no_reference_where_a_game_has_none():
    records = [_record("breakout", "ppo:lean", 1, 50.0), _record("pong", "ppo:lean", 1, 0.0)]
    records[1]["reference"] = None  # e.g. a budget below Dopamine's first tabulated 1M frames
    (m,) = suite_medians(summarize_suite(records))
    assert m["games"] == 2 and m["reference_hns"] == {"DQN": None, "Rainbow": None}
    assert m["hns"] == pytest.approx(((50.0 - 1.7) / 28.8 + 20.7 / 35.3) / 2)


def test_a_mujoco_suite_of_ppo_and_sac(tmp_path):
    """The suite machinery is not Atari's alone: Hopper-v5 with PPO (`mujoco`, which `ppo` alone
    takes there) and SAC, one table and one curve, no human-normalized score or Dopamine
    reference (they are Atari's)."""
    pytest.importorskip("mujoco")
    b = BenchAtariConfig(
        games="Hopper-v5", algos="ppo,sac", seeds="1", max_frames=1024,
        out_dir=str(tmp_path / "suite"),
    )  # fmt: skip
    suite = bench_atari(b, TINY_RUN)
    assert [(r["algo"], r["preset"]) for r in suite["runs"]] == [("ppo", "mujoco"), ("sac", "sac")]
    assert all("failed" not in r and r["frames"] >= 1024 for r in suite["runs"]), suite["runs"]
    assert all(r["hns"] is None and r["reference"] is None for r in suite["runs"])
    assert (tmp_path / "suite" / "curves-Hopper-v5.png").exists()
    table = (tmp_path / "suite" / "suite.md").read_text()
    assert "| Hopper-v5 | ppo:mujoco |" in table and "| Hopper-v5 | sac:sac |" in table


def test_a_suite_without_atari_games_has_no_atari_text():
    """A MuJoCo suite's table has no Atari-5 estimate and no HNS or Dopamine notes; a suite
    with one Atari game keeps them."""
    mujoco = [_record("HalfCheetah-v5", "sac:sac", 1, 9_467.6)]
    assert mujoco[0]["hns"] is None and mujoco[0]["reference"] is None
    table = format_tables(
        {"cpu": "c", "summary": summarize_suite(mujoco), "runs": mujoco, "argv": ["x"]}
    )
    assert "| HalfCheetah-v5 | sac:sac | 1/1 |" in table
    assert "Atari-5" not in table and "HNS: human-normalized" not in table
    assert "Scores: mean return of the last 100 training episodes." in table
    both = [*mujoco, _record("pong", "ppo:lean", 1, 20.0)]
    table = format_tables(
        {"cpu": "c", "summary": summarize_suite(both), "runs": both, "argv": ["x"]}
    )
    assert "Atari-5 estimate" in table and "HNS: human-normalized" in table


def test_an_algo_without_a_preset_takes_what_its_trainer_takes_on_each_env():
    """`rapidrl train ppo --env Hopper-v5` trains `mujoco`; a suite, a solve and a sweep that
    name `ppo` alone on that env do the same, and keep `lean` on an Atari game."""
    pytest.importorskip("mujoco")
    from rapidrl.bench.solve import BenchSolveConfig
    from rapidrl.sweep.spec import parse_spec

    b = BenchAtariConfig(games="pong,Hopper-v5", algos="ppo,sac", seeds="1")
    assert [(r.game, r.algo, r.preset) for r in b.runs()] == [
        ("pong", "ppo", "lean"), ("pong", "sac", "sac"),
        ("Hopper-v5", "ppo", "mujoco"), ("Hopper-v5", "sac", "sac"),
    ]  # fmt: skip
    assert BenchSolveConfig(algo="ppo", env="Hopper-v5").suite().algo_list() == [("ppo", "mujoco")]
    budget, space = {"trials": 2}, {"lr": {"loguniform": [1e-4, 1e-3]}}
    assert (
        parse_spec({"algo": "ppo", "env": "Hopper-v5", "budget": budget, "space": space}).preset
        == "mujoco"
    )
    assert (
        parse_spec({"algo": "ppo", "env": ["pong"], "budget": budget, "space": space}).preset
        == "lean"
    )
    assert (
        parse_spec(
            {"algo": "ppo", "env": "Hopper-v5", "preset": "lean", "budget": budget, "space": space}
        ).preset
        == "lean"
    )
