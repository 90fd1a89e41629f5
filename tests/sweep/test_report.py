"""What a sweep reports, without starting Ray: how each trial ended read from Tune's results
(finished, stopped early by the scheduler, cut by the time budget, not started, failed,
interrupted), the frames early stopping saved, the lines printed as trials start and end, the
output files written whole, the Ray version it needs, and a grid for a small discrete space."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

import rapidrl.sweep.run as sweep_run
from rapidrl.config import ConfigError
from rapidrl.sweep import parse_spec

ROOT = Path(__file__).resolve().parents[2]

SPEC = {
    "name": "ent", "algo": "ppo", "preset": "cartpole", "env": "CartPole-v1",
    "fields": {"max_frames": 4096}, "space": {"ent_coef": {"choice": [0.0, 3.0]}},
    "seeds": [1, 2], "budget": {"trials": 1, "hours": 1},
    "early_stop": {"scheduler": "asha", "grace_frames": 1024},
}  # fmt: skip
TOTAL = 2 * 4096  # a trial's frames: 2 seeds x max_frames


def _result(trial: str, error: BaseException | None = None, **metrics) -> SimpleNamespace:
    """A stand-in for one of Tune's ``Result``s: its last metrics (Tune adds ``trial_id``, and
    ``done`` to the result its scheduler stopped it at) and its error."""
    return SimpleNamespace(
        metrics={"trial_id": trial, **metrics}, error=error, config={"ent_coef": 0.0}, path=None
    )


FINISHED = _result(
    "t1", frames=TOTAL, score=50.0, score_min=40.0, score_max=60.0, minutes=1.5, curve=50.0,
    finished=True, done=True,
)  # fmt: skip
STOPPED = _result("t2", frames=2048, score=math.nan, curve=9.0, finished=False, done=True)
CUT = _result("t3", frames=3072, score=math.nan, curve=30.0, finished=False, done=False)
NOT_STARTED = _result("t4")  # Tune's last_result of a trial that never ran: its id alone
STARTED = _result("t6", pid=1234)  # its worker had started (Tune's metrics), no report yet
FAILED = _result(
    "t5", RuntimeError("python -m rapidrl.cli train ppo exited with 1; x.log:\nTraceback"),
    frames=1024, finished=False,
)  # fmt: skip


@pytest.mark.parametrize(
    "res, budget_spent, end",
    [
        (FINISHED, True, "finished"),
        (STOPPED, True, "stopped"),
        (CUT, True, "cut"),
        (NOT_STARTED, True, "not started"),
        (STARTED, True, "cut"),
        (FAILED, True, "failed"),
        (CUT, False, "interrupted"),  # no budget ran out: a Ctrl-C stopped the sweep
        (NOT_STARTED, False, "interrupted"),
    ],
)
def test_how_a_trial_ended_from_its_tune_result(res, budget_spent, end):
    assert sweep_run.trial_end(res.metrics, res.error, budget_spent) == end


def test_only_the_scheduler_stops_trials_early_and_the_headline_counts_those():
    """A trial cut by the budget, or never started, was not stopped early: it is not counted as
    such, and the frames "without early stopping" add only the stopped trials' remaining
    budget."""
    spec = parse_spec(SPEC)
    grid = [FINISHED, STOPPED, CUT, NOT_STARTED, FAILED]
    result = sweep_run.summarize(spec, grid, TOTAL, 60.0, budget_spent=True)
    rows = {r["trial"]: r for r in result["trials"]}
    assert [rows[t]["stopped_early"] for t in ("t1", "t2", "t3", "t4", "t5")] == [
        False, True, False, False, False,
    ]  # fmt: skip
    assert {t: r["end"] for t, r in rows.items()} == {
        "t1": "finished", "t2": "stopped", "t3": "cut", "t4": "not started", "t5": "failed",
    }  # fmt: skip
    assert rows["t5"]["error"] == (
        "RuntimeError: python -m rapidrl.cli train ppo exited with 1; x.log:"
    )
    used = TOTAL + 2048 + 3072 + 0 + 1024
    assert result["frames_used"] == used
    assert result["frames_without_early_stopping"] == used + (TOTAL - 2048)
    assert result["best"]["trial"] == "t1" and rows["t3"]["score"] is None
    table = sweep_run.format_table(result)
    assert "Trials: 1 finished, 1 stopped early, 1 cut by the budget, 1 not started, 1 failed." in (
        table
    )
    assert f"with the 1 trial stopped early run to the end of their budget: {used + 6144:,}" in (
        table
    )
    assert "| t3 | 0 | - | - | 3,072 | - | cut by the budget |" in table
    assert "| t5 | 0 | - | - | 1,024 | - | failed: RuntimeError: python" in table


def test_the_lines_printed_as_trials_start_and_end():
    line = sweep_run.trial_line
    params = {"ent_coef": 0.0, "clip": 0.2}
    assert line("t1", params, {}, "started") == "  trial t1 started: ent_coef=0, clip=0.2"
    assert line("t1", params, FINISHED.metrics, "finished") == (
        "  trial t1 (ent_coef=0, clip=0.2) finished: score 50 (40..60), 8,192 frames, 1.5 min"
    )
    assert line("t2", params, STOPPED.metrics, "stopped").endswith(
        "stopped early at 2,048 frames (mean-100 9)"
    )
    assert line("t3", params, CUT.metrics, "cut").endswith("cut by the budget at 3,072 frames")
    assert line("t4", params, {}, "not started").endswith("not started: the budget ran out first")
    assert line("t5", params, {}, "failed", FAILED.error).endswith(
        "FAILED: RuntimeError: python -m rapidrl.cli train ppo exited with 1; x.log:"
    )
    states = ["finished", "stopped", "running", "pending", "failed"]
    assert sweep_run.progress_line(states, 6, 12.34) == (
        "  progress: 3 of 6 trials ended (1 finished, 1 stopped early, 1 failed), 1 running; "
        "12.3 min"
    )


@pytest.mark.xdist_group("ray")
def test_tunes_callbacks_print_each_start_and_end_and_the_progress(capsys):
    """The Tune callback the sweep hands Tune, fed Tune's trial objects (stand-ins here)."""
    pytest.importorskip("ray.tune")
    from rapidrl.sweep.tune_hooks import Progress

    def trial(tid, status, last_result, error=None):
        return SimpleNamespace(
            trial_id=tid, status=status, config={"ent_coef": 3.0}, last_result=last_result,
            get_pickled_error=lambda: error, get_error=lambda: None,
        )  # fmt: skip

    a = trial("a", "RUNNING", {"trial_id": "a"})
    b = trial("b", "RUNNING", {"trial_id": "b"})
    c = trial("c", "PENDING", {"trial_id": "c"}, RuntimeError("boom"))
    trials = [a, b, c]
    progress = Progress(total=4)
    progress.setup()
    progress.on_trial_start(0, trials, a)
    a.last_result = dict(STOPPED.metrics, trial_id="a")
    progress.on_trial_complete(1, trials, a)  # the scheduler stopped it
    a.status = "TERMINATED"
    b.last_result = dict(FINISHED.metrics, trial_id="b")
    progress.on_trial_complete(2, trials, b)
    b.status = "TERMINATED"
    c.status = "ERROR"  # Tune marks it before it calls on_trial_error
    progress.on_trial_error(3, trials, c)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "  trial a started: ent_coef=3"
    assert lines[1] == "  trial a (ent_coef=3) stopped early at 2,048 frames (mean-100 9)"
    assert re.fullmatch(
        r"  progress: 1 of 4 trials ended \(1 stopped early\), 1 running; \d+\.\d min", lines[2]
    )
    assert lines[3].startswith("  trial b (ent_coef=3) finished: score 50 (40..60), 8,192")
    assert lines[4].startswith("  progress: 2 of 4 trials ended (1 finished, 1 stopped early);")
    assert lines[5] == "  trial c (ent_coef=3) FAILED: RuntimeError: boom"
    assert lines[6].startswith(
        "  progress: 3 of 4 trials ended (1 finished, 1 stopped early, 1 failed);"
    )


def test_the_outputs_are_written_whole(tmp_path, monkeypatch):
    """sweep.json/.md/.csv, best.json and sweep.png each go to a temp file that replaces the old
    one whole: a crash or a full disk mid-write leaves the previous version, not a torn one."""
    spec = parse_spec(SPEC)
    result = sweep_run.summarize(spec, [FINISHED], TOTAL, 60.0)
    replaced = []
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        replaced.append(Path(dst).name)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    sweep_run.write_outputs(spec, result, tmp_path)
    names = ["sweep.json", "sweep.md", "sweep.csv", "best.json", "sweep.png"]
    assert sorted(set(replaced) & set(names)) == sorted(names), replaced
    assert json.loads((tmp_path / "best.json").read_text())["ent_coef"] == 0.0
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("version", ["2.41.0", "2.60.0", "3.0.0.dev0"])
def test_a_ray_new_enough_is_taken(version):
    sweep_run.check_ray_version(version)


@pytest.mark.parametrize("version", ["2.9.3", "2.40.1"])
def test_an_older_ray_is_refused_by_name(version):
    with pytest.raises(ConfigError, match=rf"Ray >= 2\.41 .*this Python has Ray {version}"):
        sweep_run.check_ray_version(version)


@pytest.mark.xdist_group("ray")
def test_run_sweep_checks_rays_version_before_it_starts_ray(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")

    def start(*args, **kwargs):
        raise AssertionError("Ray was started")

    monkeypatch.setattr(ray, "__version__", "2.40.0")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", start)
    with pytest.raises(ConfigError, match=r"needs Ray >= 2\.41 .*Ray 2\.40\.0"):
        sweep_run.run_sweep(parse_spec(SPEC), tmp_path)


def test_the_sweep_extra_pins_the_ray_the_code_needs_and_it_is_installed():
    """pyproject's ``sweep`` extra asks for the Ray this code needs (RAY_MIN), and the Ray
    installed here is one of those."""
    text = (ROOT / "pyproject.toml").read_text()
    pin = re.search(r'sweep = \[[^\]]*"ray\[tune\]>=([0-9.]+)"', text)
    assert pin, "no ray[tune] pin in the sweep extra"
    assert tuple(int(x) for x in pin.group(1).split(".")) == sweep_run.RAY_MIN
    ray = pytest.importorskip("ray")
    sweep_run.check_ray_version(ray.__version__)


@pytest.mark.xdist_group("ray")
def test_a_small_discrete_space_is_a_grid_and_a_larger_one_tpe():
    """Every combination once when they are no more than the trials (sampling would repeat
    some and miss others); Optuna's TPE otherwise, and for any continuous range."""
    pytest.importorskip("ray.tune")
    pytest.importorskip("optuna")
    from ray.tune.search.variant_generator import generate_variants

    space = {"epochs": {"int": [2, 4]}, "ent_coef": {"choice": [0.0, 0.01]}}
    plan = sweep_run.search_plan(parse_spec({**SPEC, "space": space, "budget": {"trials": 8}}))
    assert (plan.search_alg, plan.num_samples, plan.trials) == (None, 1, 6)
    configs = sorted((c["epochs"], c["ent_coef"]) for _, c in generate_variants(plan.param_space))
    assert configs == [(e, c) for e in (2, 3, 4) for c in (0.0, 0.01)]  # each once
    tpe = sweep_run.search_plan(parse_spec({**SPEC, "space": space, "budget": {"trials": 5}}))
    assert type(tpe.search_alg).__name__ == "OptunaSearch" and tpe.num_samples == 5
    space["clip"] = {"uniform": [0.1, 0.3]}
    cont = sweep_run.search_plan(parse_spec({**SPEC, "space": space, "budget": {"trials": 50}}))
    assert type(cont.search_alg).__name__ == "OptunaSearch" and cont.trials == 50
