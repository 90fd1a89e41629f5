"""benchmarks/ray_sampler.py: a smoke test (tiny: CartPole, 1 worker, a fraction of a second) and
its command line."""

from __future__ import annotations

import json

import pytest

from benchmarks.ray_sampler import RaySamplerConfig, main

pytestmark = pytest.mark.xdist_group("ray")  # Ray tests share one xdist process: scripts/test.sh


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--workers", "1,x"], "--workers needs a comma list of ints >= 1"),
        (["--workers", "0"], "--workers needs a comma list of ints >= 1"),
        (["--seconds", "0"], "--seconds must be > 0"),
        (["--envs-per-worker", "0"], "--envs-per-worker must be >= 1"),
        (["--learner-batch=-1"], "--learner-batch must be >= 0"),
    ],
)
def test_bad_input_is_an_error_message(capsys, argv, message):
    """Checked before Ray is imported: no Ray needed."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "python benchmarks/ray_sampler.py: error:" in err and message in err
    assert "Traceback" not in err


def test_the_flags_and_defaults_of_the_old_command():
    """``rapidrl bench ray``'s flags, spelled as before: comma lists, ``--no-serial``."""
    from rapidrl.config import parse_config

    cfg = parse_config(RaySamplerConfig, {}, [], prog="x")
    assert cfg.worker_counts() == (1, 2, 4) and cfg.serial and cfg.learner_batch == 0
    argv = ["--workers", "1,2", "--no-serial", "--learner-batch", "32", "--json", "r.json"]
    cfg = parse_config(RaySamplerConfig, {}, argv, prog="x")
    assert cfg.worker_counts() == (1, 2) and not cfg.serial
    assert (cfg.learner_batch, cfg.json) == (32, "r.json")


@pytest.mark.timeout(120)
def test_bench_ray_main_writes_records(tmp_path):
    ray = pytest.importorskip("ray")
    out = tmp_path / "ray.json"
    argv = ["--env", "CartPole-v1", "--workers", "1", "--seconds", "0.3", "--envs-per-worker", "2"]
    assert main([*argv, "--steps-per-batch", "8", "--json", str(out)]) == 0
    records = json.loads(out.read_text())
    assert [(r["mode"], r["workers"]) for r in records] == [("serial", 1), ("ray", 1)]
    for r in records:
        assert r["frames_per_s"] > 0 and r["bytes_per_s"] > 0 and r["bytes_per_frame"] > 0
    assert not ray.is_initialized()
