"""The sweep spec: a good one read from each file format, trial configs built from it, and
every bad spec refused with a message naming the key and the fix."""

from __future__ import annotations

import json

import pytest

from rapidrl.config import ConfigError
from rapidrl.sweep import Range, load_spec, parse_spec, trial_config

GOOD = {
    "name": "ppo-cartpole",
    "algo": "ppo",
    "preset": "cartpole",
    "env": "CartPole-v1",
    "fields": {"max_frames": 50000},
    "space": {
        "lr": {"loguniform": [1.0e-4, 3.0e-3]},
        "clip": {"choice": [0.1, 0.2, 0.3]},
        "epochs": {"int": [2, 6]},
        "ent_coef": {"uniform": [0.0, 0.02]},
    },
    "seeds": [1, 2],
    "objective": {"metric": "return_mean_100", "mode": "max"},
    "budget": {"trials": 8, "hours": 2},
    "early_stop": {"scheduler": "asha", "grace_frames": 10000, "reduction_factor": 2},
    "cpus_per_trial": 1,
}

YAML = """\
algo: pqn
preset: cartpole
env: [CartPole-v1, rapidrl/CartPoleNoVel-v1]
fields: {max-frames: 20000}
space:
  lr: {loguniform: [1.0e-4, 1.0e-3]}
  q_lambda: {uniform: [0.5, 0.9]}
seeds: [3]
objective: {frames_to_score: 475}
budget: {trials: 4}
"""


def test_a_good_spec_and_its_trial_configs(tmp_path):
    path = tmp_path / "lr.json"
    path.write_text(json.dumps(GOOD))
    spec = load_spec(path)
    assert spec.name == "ppo-cartpole" and spec.algo == "ppo" and spec.envs == ("CartPole-v1",)
    assert spec.space["epochs"] == Range("int", (2, 6)) and spec.seeds == (1, 2)
    assert (spec.scheduler, spec.grace_frames, spec.trials) == ("asha", 10000, 8)
    cfg = trial_config(
        spec, {"lr": 1e-3, "clip": 0.3, "epochs": 3, "ent_coef": 0.0}, "CartPole-v1", 2
    )
    assert (cfg.lr, cfg.clip, cfg.epochs, cfg.seed, cfg.max_frames) == (1e-3, 0.3, 3, 2, 50000)
    assert cfg.num_envs == 4 and cfg.run_dir is None  # the rest is the cartpole preset's


def test_yaml_with_a_list_of_envs_and_frames_to_score(tmp_path):
    path = tmp_path / "pqn-lambda.yaml"
    path.write_text(YAML)
    spec = load_spec(path)
    assert spec.name == "pqn-lambda"  # the file's name when the spec has none
    assert spec.envs == ("CartPole-v1", "rapidrl/CartPoleNoVel-v1")
    assert (spec.metric, spec.mode, spec.frames_to_score) == ("return_mean_100", "min", 475.0)
    assert spec.fields == {"max_frames": 20000} and spec.scheduler == "none"


BAD = {
    "unknown key": ({"serch": {}}, "unknown key 'serch'"),
    "algo": ({"algo": "a2c"}, "algo must be one of ppo, ppo-lstm, dqn, rainbow, pqn"),
    "preset": ({"preset": "cartpol"}, "ppo has no preset 'cartpol' (did you mean cartpole"),
    "env": ({"env": "NoSuchGame-v9"}, "sweep spec: env:"),
    "unknown field": (
        {"space": {"ent_coeff": {"uniform": [0.0, 0.1]}}},
        "no such config field (did you mean ent_coef",
    ),
    "seed searched": ({"space": {"seed": {"int": [1, 5]}}}, "the sweep sets seed itself"),
    "both": ({"space": {"max_frames": {"int": [1000, 2000]}}}, "both in fields and in space"),
    "range kind": ({"space": {"lr": {"normal": [0, 1]}}}, "space.lr must be one of"),
    "lo >= hi": ({"space": {"lr": {"uniform": [0.1, 0.01]}}}, "needs lo < hi"),
    "log of 0": ({"space": {"lr": {"loguniform": [0, 0.1]}}}, "loguniform needs lo > 0"),
    "int of floats": ({"space": {"epochs": {"int": [1.5, 4]}}}, "int needs two integers"),
    "wrong type": ({"space": {"epochs": {"choice": ["many"]}}}, "epochs"),
    "refused value": ({"space": {"clip": {"choice": [-1.0]}}}, "with clip=-1.0"),
    "no space": ({"space": {}}, "space needs at least one field"),
    "seeds": ({"seeds": [1, 1]}, "seeds must be distinct integers"),
    "metric never logged": (
        {"objective": {"metric": "reward"}},
        "is not a column this trainer logs",
    ),
    "mode": ({"objective": {"metric": "return_mean_100", "mode": "up"}}, "mode must be max or min"),
    "eval without episodes": (
        {"objective": {"metric": "eval_mean"}},
        "add fields: {eval_episodes: N}",
    ),
    "trials": ({"budget": {"trials": 0}}, "budget.trials must be an int >= 1"),
    "hours": ({"budget": {"trials": 2, "hours": -1}}, "budget.hours must be > 0"),
    "scheduler": ({"early_stop": {"scheduler": "hyperband"}}, "scheduler must be one of asha"),
    "no grace": ({"early_stop": {"scheduler": "asha"}}, "grace_frames (frames every trial runs"),
    "grace too long": (
        {"early_stop": {"scheduler": "median", "grace_frames": 50000}},
        "must be below the runs' max_frames (50000)",
    ),
    "cpus": ({"cpus_per_trial": 0}, "cpus_per_trial must be > 0"),
    "minutes without a time budget": (
        {"objective": {"minutes_to_score": 475}},
        "minutes_to_score needs a time budget for every run",
    ),
    "two objectives": (
        {"objective": {"minutes_to_score": 475, "mode": "min"}},
        "objective.minutes_to_score stands alone",
    ),
    "a score that is not a number": (
        {"objective": {"minutes_to_score": "soon"}},
        "objective.minutes_to_score must be a number",
    ),
}


def test_minutes_to_score_is_a_wall_time_objective():
    data = {**GOOD, "fields": {"max_frames": 50000, "max_minutes": 3}}
    spec = parse_spec({**data, "objective": {"minutes_to_score": 475}})
    assert (spec.metric, spec.mode) == ("return_mean_100", "min")
    assert (spec.minutes_to_score, spec.frames_to_score, spec.to_score) == (475.0, None, 475.0)
    assert parse_spec({**data, "objective": {"frames_to_score": 400}}).to_score == 400.0
    assert parse_spec(data).to_score is None


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_spec_is_a_clear_error(case):
    change, message = BAD[case]
    data = {**GOOD, **change}
    with pytest.raises(ConfigError, match="sweep") as e:
        parse_spec(data)
    assert message in str(e.value), str(e.value)


def test_a_spec_file_that_cannot_be_read(tmp_path):
    bad = tmp_path / "s.yaml"
    bad.write_text("algo: ppo\nspace: [1\n")
    with pytest.raises(ConfigError, match=r"sweep spec .*s\.yaml.*line"):
        load_spec(bad)
    with pytest.raises(ConfigError, match="sweep spec .*missing"):
        load_spec(tmp_path / "missing.yaml")
