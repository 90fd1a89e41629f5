"""``--config FILE`` for every trainer and ``bench solve`` / ``bench atari``: a YAML, JSON or TOML
file of config fields between the preset and the flags (preset < file < flags); a run's own
config.json works as input, without its run_dir/resume; bad input is a ``rapidrl: error:`` line
and exit 2, before any run directory exists."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rapidrl import cli
from rapidrl.algos.dqn.config import PRESETS as DQN_PRESETS
from rapidrl.algos.dqn.train import parse_dqn_args
from rapidrl.algos.ppo.config import PRESETS as PPO_PRESETS
from rapidrl.algos.ppo.train import parse_ppo_args
from rapidrl.algos.pqn.config import PRESETS as PQN_PRESETS
from rapidrl.algos.pqn.train import parse_pqn_args
from rapidrl.config import ConfigError
from rapidrl.train import config_to_dict

TINY = ["--num-steps", "32", "--max-frames", "128", "--no-progress", "--no-tensorboard"]
TINY += ["--torch-threads", "1"]


def _ppo(argv, preset="fast"):
    return parse_ppo_args(argv, "rapidrl train ppo", preset)


def test_a_run_started_from_another_runs_config_json_has_its_config(tmp_path, monkeypatch):
    """The round trip through a real run: run B (``--config A/config.json`` and nothing else
    but its run dir) resolves to run A's config but for run_dir; A's run_dir is not inherited,
    and a non-default preset under the file changes nothing the file sets."""
    monkeypatch.chdir(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    argv = ["train", "ppo", "--preset", "cartpole", *TINY, "--lr", "1e-3", "--seed", "7"]
    assert cli.main([*argv, "--run-dir", str(a)]) == 0
    saved_a = json.loads((a / "config.json").read_text())
    assert saved_a["run_dir"] == str(a) and saved_a["lr"] == 1e-3 and saved_a["seed"] == 7
    assert cli.main(["train", "ppo", "--config", str(a / "config.json"), "--run-dir", str(b)]) == 0
    saved_b = json.loads((b / "config.json").read_text())
    assert saved_b.pop("run_dir") == str(b)
    saved_a.pop("run_dir")
    assert saved_b == saved_a
    # Without --run-dir: a new run in a new default dir, A untouched (its run_dir not taken).
    cfg = _ppo(["--config", str(a / "config.json")])
    assert cfg.run_dir is None and cfg.resume is None
    assert config_to_dict(cfg) == {**saved_a, "run_dir": None}


@pytest.mark.parametrize(
    "parse, presets, preset",
    [
        (lambda argv: parse_dqn_args(argv, "rapidrl train dqn", "fast"), DQN_PRESETS, "rainbow"),
        (lambda argv: parse_dqn_args(argv, "rapidrl train rainbow", "rainbow"), DQN_PRESETS, "dqn"),
        (lambda argv: _ppo(argv), PPO_PRESETS, "cartpole"),
        (lambda argv: parse_ppo_args(argv, "x", "ppo-lstm"), PPO_PRESETS, "fast"),
        (lambda argv: parse_pqn_args(argv), PQN_PRESETS, "cartpole"),
    ],
    ids=["dqn", "rainbow", "ppo", "ppo-lstm", "pqn"],
)
def test_every_trainer_takes_a_run_config_json(tmp_path, parse, presets, preset):
    """Every trainer's parser: a config.json as a run writes it (every field, run_dir and
    resume set) gives that config back under another default preset, run_dir/resume None."""
    cfg = dataclasses.replace(presets[preset], max_frames=1234, seed=5)
    data = config_to_dict(cfg)
    data.update(run_dir=str(tmp_path / "old"), resume=str(tmp_path / "old"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    assert parse(["--config", str(path)]) == cfg
    assert parse(["--config", str(path), "--seed", "6"]) == dataclasses.replace(cfg, seed=6)


def test_order_preset_then_file_then_flags(tmp_path):
    cartpole, fast = PPO_PRESETS["cartpole"], PPO_PRESETS["fast"]
    assert cartpole.clip != fast.clip and cartpole.num_envs != fast.num_envs
    path = tmp_path / "sweep.yaml"
    path.write_text("env: rapidrl/CartPoleNoVel-v1\nnum_steps: 64\nlr: 1e-3\nnum-envs: 2\n")
    cfg = _ppo(["--preset", "cartpole", "--config", str(path), "--num-steps", "32"])
    assert cfg.clip == cartpole.clip  # the preset's: not in the file nor the flags
    assert cfg.env == "rapidrl/CartPoleNoVel-v1" and cfg.lr == 1e-3  # the file over the preset
    assert cfg.num_envs == 2  # the flag's spelling (num-envs) in the file works too
    assert cfg.num_steps == 32  # the flag over the file
    # The order of the arguments does not matter: --config after the flag loses to it too.
    assert _ppo(["--num-steps", "32", "--config", str(path), "--preset", "cartpole"]) == cfg
    # No --preset: the trainer's default preset under the file.
    assert _ppo([f"--config={path}"]).clip == fast.clip


@pytest.mark.parametrize(
    "name, text",
    [
        ("c.yaml", "max_frames: 4096\nlr: 1e-4\nstop_at_score: null\nmax_minutes: 3\n"),
        ("c.yml", "max_frames: 4_096\nlr: 1.0e-4\nstop_at_score: ~\nmax_minutes: 3.0\n"),
        ("c.json", '{"max_frames": 4096, "lr": 0.0001, "stop_at_score": null, "max_minutes": 3}'),
        ("c.toml", "max_frames = 4096\nlr = 1e-4\nmax_minutes = 3\n"),
    ],
)
def test_yaml_json_toml(tmp_path, name, text):
    """The same fields in each format give the same config; YAML's ``1e-4`` is a float (YAML
    1.1 alone would read a string), an int where a float is declared a float."""
    if name.endswith(".toml"):
        pytest.importorskip("tomllib")  # the standard library from Python 3.11
    path = tmp_path / name
    path.write_text(text)
    cfg = _ppo(["--preset", "cartpole", "--config", str(path)])
    want = dict(max_frames=4096, lr=1e-4, max_minutes=3.0)
    if not name.endswith(".toml"):  # TOML has no null
        want["stop_at_score"] = None
    assert cfg == dataclasses.replace(PPO_PRESETS["cartpole"], **want)
    assert isinstance(cfg.max_minutes, float) and isinstance(cfg.lr, float)


def test_env_kwargs_as_the_zoos_mapping_or_as_the_flags_items(tmp_path):
    """``env_kwargs`` in a file: a mapping (the SB3 zoo's form) or KEY=VALUE items; both give
    the flag's items, whose values read back as written."""
    from rapidrl.config import parse_env_kwargs

    mapping = tmp_path / "zoo.yaml"
    mapping.write_text(
        "env: Ant-v5\nenv_kwargs: {include_cfrc_ext_in_observation: false, "
        "reset_noise_scale: 0.2, xml_file: ./ant.xml}\n"
    )
    items = tmp_path / "items.yaml"
    items.write_text("env: Ant-v5\nenv_kwargs: [include_cfrc_ext_in_observation=false]\n")
    cfg = _ppo(["--preset", "mujoco", "--config", str(mapping)])
    assert parse_env_kwargs(cfg.env_kwargs) == {
        "include_cfrc_ext_in_observation": False,
        "reset_noise_scale": 0.2,
        "xml_file": "./ant.xml",
    }
    assert _ppo(["--preset", "mujoco", "--config", str(items)]).env_kwargs == (
        "include_cfrc_ext_in_observation=false",
    )
    # The flag over the file, as every field.
    flagged = _ppo(["--preset", "mujoco", "--config", str(mapping), "--env-kwargs", "a=1"])
    assert flagged.env_kwargs == ("a=1",)


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BAD = {
    "missing": (lambda t: str(t / "nope.yaml"), "no such file"),
    "directory": (lambda t: str(t), "is a directory"),
    "suffix": (lambda t: _write(t, "c.ini", "lr=1\n"), "unknown file type '.ini'"),
    "yaml syntax": (lambda t: _write(t, "c.yaml", "lr: 1\nmax_frames: [1\n"), "line 3, column 1"),
    "json syntax": (
        lambda t: _write(t, "c.json", '{"lr": 1,\n "max_frames": }'),
        "not valid JSON (Expecting value at line 2, column 16)",
    ),
    "toml syntax": (lambda t: _write(t, "c.toml", "lr = \n"), "not valid TOML"),
    "not a mapping": (lambda t: _write(t, "c.yaml", "- 1\n- 2\n"), "holds a YAML list"),
    "json list": (lambda t: _write(t, "c.json", "[1]"), "holds a JSON list"),
    "empty": (lambda t: _write(t, "c.yaml", "# nothing\n"), "is empty"),
    "unknown field": (
        lambda t: _write(t, "c.yaml", "max_frame: 10\nnum_steps: 8\n"),
        "unknown field 'max_frame' (did you mean max_frames",
    ),
    "wrong type": (lambda t: _write(t, "c.yaml", "lr: fast\n"), "field lr: expected a number"),
    "wrong int": (
        lambda t: _write(t, "c.json", '{"num_steps": 1.5}'),
        "field num_steps: expected an int",
    ),
    "another algo": (
        lambda t: _write(t, "c.json", '{"algo": "dqn"}'),
        "is a config of algo 'dqn', and this trainer's algo is 'ppo'",
    ),
    "twice": (lambda t: _write(t, "c.yaml", "num_steps: 8\nnum-steps: 9\n"), "given twice"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_config_file_is_a_clear_error(tmp_path, monkeypatch, capsys, case):
    monkeypatch.chdir(tmp_path)
    if case == "toml syntax":
        pytest.importorskip("tomllib")  # the standard library from Python 3.11
    make, message = BAD[case]
    path = make(tmp_path)
    run = tmp_path / "run"
    before = sorted(tmp_path.iterdir())
    argv = ["train", "ppo", "--preset", "cartpole", "--config", path, "--run-dir", str(run)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("rapidrl: error: --config ") and path in err, err
    assert message in err, err
    assert "Traceback" not in err and err.count("\n") == 1
    assert not run.exists() and not (tmp_path / "runs").exists()
    assert sorted(tmp_path.iterdir()) == before


def test_config_flag_errors(tmp_path, monkeypatch, capsys):
    """``--config`` without a file, twice, or with ``--resume`` (a resumed run takes its own
    config, as with --preset): refused before anything is read or written."""
    monkeypatch.chdir(tmp_path)
    # max_frames 0 fails validation: were a check here missing, no training would start.
    path = _write(tmp_path, "c.json", '{"max_frames": 0}')
    run = tmp_path / "r"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(config_to_dict(PPO_PRESETS["cartpole"])))
    cases = {
        ("--config",): "--config needs a file",
        ("--config", path, f"--config={path}"): "--config given twice",
        ("--config", path, "--resume", str(run)): "--resume continues a run with its own "
        "config; drop --config",
        ("--resume", str(tmp_path / "gone"), "--config", path): "drop --config",
    }
    for trainer in ("ppo", "pqn", "ppo-lstm"):
        for args, message in cases.items():
            assert cli.main(["train", trainer, *args]) == 2
            err = capsys.readouterr().err
            assert err.startswith("rapidrl: error: ") and message in err, (trainer, args, err)
    # DQN parses --resume itself (it reads the run first), then the shared check refuses.
    dqn_run = tmp_path / "d"
    dqn_run.mkdir()
    (dqn_run / "config.json").write_text(json.dumps(config_to_dict(DQN_PRESETS["fast"])))
    for trainer in ("dqn", "rainbow"):
        assert cli.main(["train", trainer, "--resume", str(dqn_run), "--config", path]) == 2
        assert "drop --config" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "d", "r"]
    assert sorted(p.name for p in run.iterdir()) == ["config.json"]
    with pytest.raises(ConfigError, match="drop --config"):
        _ppo(["--resume", str(run), "--config", path])


def test_help_documents_config_and_the_order(capsys):
    for trainer in ("dqn", "rainbow", "ppo", "ppo-lstm", "pqn"):
        with pytest.raises(SystemExit) as exc:
            cli.main(["train", trainer, "--help"])
        assert exc.value.code == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "--config FILE reads config fields from a YAML (.yaml/.yml), JSON (.json)" in out
        assert "Order: preset defaults < config file < command-line flags." in out
        assert "A file's run_dir and resume are ignored: a run started from another run's " in out
        assert "refuses --config" in out
    for bench in ("solve", "atari"):
        with pytest.raises(SystemExit):
            cli.main(["bench", bench, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "--config FILE" in out and "Order: the defaults < config file < command-line" in out
        assert "run_dir" not in out  # a bench has no run dir to ignore


def test_bench_solve_and_atari_take_config(tmp_path, monkeypatch, capsys):
    """Parse only: the bench functions are replaced by ones that record their config. The
    bench's own ``--preset`` field is a field here (not a preset to pick), file and flag alike;
    what follows ``--`` goes to the trainer as it is (a trainer --config too)."""
    from rapidrl.bench import atari, solve

    monkeypatch.chdir(tmp_path)  # the benches' default out dirs (bench_out/...) land here
    seen = {}

    def fake_solve(b, extra, argv):
        seen["solve"] = (b, list(extra))
        return {"summary": {"failed": 0}}

    def fake_atari(b, extra, argv):
        seen["atari"] = (b, list(extra))
        return {"runs": []}

    monkeypatch.setattr(solve, "bench_solve", fake_solve)
    monkeypatch.setattr(atari, "bench_atari", fake_atari)
    path = _write(
        tmp_path,
        "bench.yaml",
        "algo: pqn\npreset: cartpole\nenv: CartPole-v1\nseeds: '1,2'\nmax_frames: 512\n",
    )
    argv = ["bench", "solve", "--config", path, "--seeds", "3", "--", "--config", "t.yaml"]
    assert cli.main(argv) == 0
    b, extra = seen["solve"]
    want = solve.BenchSolveConfig(
        algo="pqn", preset="cartpole", env="CartPole-v1", seeds="3", max_frames=512
    )
    assert b == want and extra == ["--config", "t.yaml"]
    assert cli.main(["bench", "solve", "--preset", "lean", "--config", path]) == 0
    assert seen["solve"][0] == dataclasses.replace(want, preset="lean", seeds="1,2")
    # Bad input: the message, exit 2, no bench run.
    seen.clear()
    bad = _write(tmp_path, "bad.yaml", "algo: pqn\nseed: 1\n")
    assert cli.main(["bench", "solve", "--config", bad]) == 2
    err = capsys.readouterr().err
    assert "rapidrl: error: --config" in err and "unknown field 'seed' (did you mean seeds?)" in err
    assert cli.main(["bench", "solve", "--config", _write(tmp_path, "a.yaml", "algo: td3\n")]) == 2
    assert "field algo: 'td3' is not one of" in capsys.readouterr().err
    assert seen == {} and not (tmp_path / solve.BenchSolveConfig().out_dir).exists()
    # bench atari alike.
    path = _write(tmp_path, "suite.json", '{"games": "pong", "algos": "pqn:fast", "seeds": "1,2"}')
    assert cli.main(["bench", "atari", "--config", path, "--max-frames", "1000"]) == 0
    b, _ = seen["atari"]
    assert (b.games, b.algos, b.seeds, b.max_frames) == ("pong", "pqn:fast", "1,2", 1000)
    assert atari.main(["--config", str(tmp_path / "none.json")]) == 2
    assert "no such file" in capsys.readouterr().err
