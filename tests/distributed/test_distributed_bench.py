"""Smoke test of ``rapidrl bench ray`` (tiny: CartPole, 1 worker, a fraction of a second)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.xdist_group("ray")  # Ray tests share one xdist process: scripts/test.sh

ray = pytest.importorskip("ray")


@pytest.mark.timeout(120)
def test_bench_ray_main_writes_records(tmp_path):
    from rapidrl.bench.ray import main

    out = tmp_path / "ray.json"
    argv = ["--env", "CartPole-v1", "--workers", "1", "--seconds", "0.3", "--envs-per-worker", "2"]
    assert main([*argv, "--steps-per-batch", "8", "--json", str(out)]) == 0
    records = json.loads(out.read_text())
    assert [(r["mode"], r["workers"]) for r in records] == [("serial", 1), ("ray", 1)]
    for r in records:
        assert r["frames_per_s"] > 0 and r["bytes_per_s"] > 0 and r["bytes_per_frame"] > 0
    assert not ray.is_initialized()
