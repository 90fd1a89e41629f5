"""benchmarks/lstm_phase.py: its command line (the project's parse_config: the flags of the old
``rapidrl bench lstm``, bad input as an error message) and one tiny run of each scope."""

from __future__ import annotations

import json

import pytest

from benchmarks.lstm_phase import COLUMNS, LstmPhaseConfig, main, run_lstm_bench
from rapidrl.config import parse_config


def test_the_flags_and_defaults_of_the_old_command():
    cfg = parse_config(LstmPhaseConfig, {}, [], prog="x")
    assert cfg.size_list() == [(8, 128), (64, 128)] and cfg.mean_segment_list() == [5, 20, 128]
    assert cfg.mode_list() == ["loop", "packed", "jax"] and cfg.scope_list() == ["core", "train"]
    assert cfg.memory and not cfg.channels_last and cfg.precision == "fp32"
    argv = ["--sizes", "4x16", "--mean-segments", "2.5,16", "--modes", "loop,pad_single"]
    argv += ["--scope", "core", "--no-memory", "--channels-last", "--precision", "bf16"]
    cfg = parse_config(LstmPhaseConfig, {}, [*argv, "--threads", "1", "--json", "r.json"], "x")
    assert cfg.size_list() == [(4, 16)] and cfg.mean_segment_list() == [2.5, 16]
    assert cfg.mode_list() == ["loop", "pad_single"] and cfg.scope_list() == ["core"]
    assert not cfg.memory and cfg.channels_last and cfg.precision == "bf16"
    assert (cfg.threads, cfg.json) == (1, "r.json")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--sizes", "8by128"], "--sizes needs NUM_ENVSxNUM_STEPS pairs"),
        (["--sizes", "0x128"], "--sizes needs NUM_ENVSxNUM_STEPS pairs"),
        (["--sizes", "6x128"], "NUM_ENVS of 6x128 is not a multiple of 4"),
        (["--mean-segments", "5,a"], "--mean-segments needs numbers >= 1"),
        (["--mean-segments", "0.5"], "--mean-segments needs numbers >= 1"),
        (["--modes", "loop,scan"], "--modes: unknown scan"),
        (["--scope", "core,eval"], "--scope must be core, train or core,train"),
        (["--repeats", "0"], "--repeats must be >= 1"),
    ],
)
def test_bad_input_is_an_error_message(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "python benchmarks/lstm_phase.py: error:" in err and message in err
    assert "Traceback" not in err


def test_a_tiny_run_of_both_scopes(tmp_path, capsys):
    out = tmp_path / "lstm.json"
    argv = ["--sizes", "4x8", "--mean-segments", "3", "--modes", "loop,packed", "--repeats", "1"]
    assert main([*argv, "--no-memory", "--json", str(out)]) == 0
    records = json.loads(out.read_text())
    assert [(r["scope"], r["mode"]) for r in records] == [
        ("core", "loop"), ("core", "packed"), ("train", "loop"), ("train", "packed"),
    ]  # fmt: skip
    # Every record carries what the printed table shows; --no-memory measures no memory.
    shown = {key for _, _, key in COLUMNS if key not in (None, "mem_ratio", "compile_seconds")}
    assert all(shown <= r.keys() for r in records)
    assert all(r["peak_mem_mb"] is None for r in records)
    assert all(r["max_abs_err"] < 1e-4 for r in records if r["scope"] == "core")
    assert "speedup" in capsys.readouterr().out


def test_the_jax_mode_matches_the_loop():
    pytest.importorskip("jax")
    (loop, jax_rec) = run_lstm_bench(
        sizes=[(4, 8)], mean_segments=[3], modes=["loop", "jax"], repeats=1, scope="core",
        measure_memory=False, verbose=False,
    )  # fmt: skip
    assert jax_rec["mode"] == "jax" and "compile_seconds" in jax_rec
    assert jax_rec["max_abs_err"] < 1e-4
