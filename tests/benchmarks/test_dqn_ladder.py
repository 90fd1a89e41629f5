"""benchmarks/dqn_ladder.py: the ladder's construction, one short measured rung, and the command
line (the project's parse_config: its flags, bad input as an error message)."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.dqn_ladder import BenchDQNConfig, format_table, ladder, main, measure_rung
from rapidrl.config import ConfigError
from rapidrl.nets.torso import native_bf16


def test_bench_ladder_changes_only_how_the_work_is_done(tmp_path):
    rungs = ladder(BenchDQNConfig(env="CartPole-v1"), cuda=False)
    names = [r.name for r in rungs]
    bf16 = ["+bf16"] if native_bf16("cpu") else []
    assert names == [
        "baseline", "k=2", "k=3", "k=4", "k=5", "k=6", "+actor", "+vector", "+layout", *bf16,
        "in-process", "fast",
    ]  # fmt: skip
    same = ("lr", "gamma", "batch_size", "n_step", "buffer_size", "target_sync_steps", "loss")
    base = rungs[0].cfg
    for r in rungs[:-1]:
        assert r.comparable and all(getattr(r.cfg, f) == getattr(base, f) for f in same), r.name
    assert rungs[3].cfg.update_batch == 128 and rungs[6].cfg.actor_processes == 1
    assert rungs[7].cfg.num_envs == 4 and not rungs[-1].comparable
    layout = rungs[8].cfg
    assert layout.channels_last and layout.fused_adam and layout.num_envs == 4
    assert rungs[-2].cfg.actor_processes == 0 and rungs[-2].cfg.channels_last
    assert rungs[-2].cfg.precision == ("bf16" if bf16 else "fp32")
    small = dataclasses.replace(rungs[1], cfg=dataclasses.replace(rungs[1].cfg, torch_threads=1))
    rec = measure_rung(small, seconds=1.0, warmup=0.5, log=lambda *a: None)
    assert rec["frames_per_s"] > 0 and rec["batch"] == 64 and rec["updates_per_s"] > 0
    table = format_table([{**rec, "rung": "baseline"}, rec])
    assert "1.00x" in table and "k=2" in table


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--ks", "1,x"], "--ks must be comma-separated ints"),
        (["--ks", "0,2"], "--ks needs ints >= 1"),
        (["--rungs", "baseline,warp"], "--rungs: unknown ['warp']"),
        (["--seconds", "0"], "--seconds must be > 0"),
    ],
)
def test_bad_input_is_an_error_message(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "python benchmarks/dqn_ladder.py: error:" in err and message in err
    assert "Traceback" not in err


def test_help_names_the_script_and_every_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "python benchmarks/dqn_ladder.py" in out
    for flag in ("--env", "--seconds", "--warmup", "--ks", "--rungs", "--json", "--png"):
        assert flag in out


def test_config_validates_as_parse_config_would():
    with pytest.raises(ConfigError, match="--k, --num-envs"):
        BenchDQNConfig(num_envs=0).validate()
