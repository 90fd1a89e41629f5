"""The autotune cache and ``backend="auto"``."""

from __future__ import annotations

import importlib.util
import json
import logging

import numpy as np
import pytest

from rapidrl.vector import make_vec
from rapidrl.vector.autotune_cache import autotune_path, cache_key, load_autotune, save_autotune

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RAPIDRL_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_save_load_roundtrip(cache_dir):
    assert load_autotune("pong", 8) is None
    path = save_autotune("pong", 8, {"backend": "async", "num_workers": 2, "batch_size": 4})
    assert path == autotune_path() == cache_dir / "autotune.json"
    save_autotune(
        "pong", 16, {"backend": "ale", "num_workers": 0, "batch_size": None}, steps_per_s=1
    )
    got = load_autotune("pong", 8)
    assert (got["backend"], got["num_workers"], got["batch_size"]) == ("async", 2, 4)
    assert load_autotune("pong", 16)["backend"] == "ale"
    assert load_autotune("breakout", 8) is None
    data = json.loads(path.read_text())
    assert cache_key("pong", 8) in data["entries"]


@pytest.mark.parametrize(
    "content",
    [b"{not json", bytes(range(256)) + bytes(range(44)), b"[1, 2]", b'{"entries": 3}'],
    ids=["bad-json", "random-bytes", "a-list", "bad-entries"],
)
def test_corrupt_cache_is_ignored(cache_dir, content):
    # Any file that cannot be read or parsed (300 bytes that are not UTF-8 raised
    # UnicodeDecodeError) falls back to the default layout with a warning naming the file.
    autotune_path().write_bytes(content)
    with pytest.warns(RuntimeWarning, match="autotune cache .* is unusable"):
        assert load_autotune("pong", 8) is None
    with pytest.warns(RuntimeWarning, match="is unusable"):
        with make_vec("CartPole-v1", 2, "auto") as venv:
            assert venv.reset(seed=0)[0].shape == (2, 4)
    with pytest.warns(RuntimeWarning, match="is unusable"):  # rewritten whole
        save_autotune("pong", 8, {"backend": "serial"})
    assert load_autotune("pong", 8)["backend"] == "serial"


def test_cache_write_that_fails_does_not_fail(cache_dir, monkeypatch):
    import errno
    import tempfile

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    with pytest.warns(RuntimeWarning, match="could not write the autotune cache"):
        assert save_autotune("pong", 8, {"backend": "serial"}) is None
    assert not autotune_path().exists()


def test_auto_uses_cache_entry(cache_dir):
    save_autotune("CartPole-v1", 2, {"backend": "serial", "num_workers": 1, "batch_size": None})
    with make_vec("CartPole-v1", 2, "auto") as venv:
        assert venv.name == "serial vector env"
        obs, _ = venv.reset(seed=0)
        assert obs.shape == (2, 4)


def test_auto_builds_an_inline_layout(cache_dir):
    choice = {"backend": "async", "num_workers": 2, "batch_size": 1, "inline": True, "spin": 1e-3}
    save_autotune("CartPole-v1", 2, choice)
    assert load_autotune("CartPole-v1", 2)["inline"] is True
    with make_vec("CartPole-v1", 2, "auto") as venv:
        assert venv.name == "async vector env" and venv.batch_size == 1 and venv.spin == 1e-3
        assert venv.worker_pids[0] is not None and venv.worker_pids[1] is None  # group 1 here
        _, infos = venv.reset(seed=0)
        venv.send(np.zeros(2, np.int64), infos["env_id"])
        assert len(venv.recv()[0]) == 1


def test_auto_falls_back_to_the_default_layout_with_a_message(cache_dir, caplog, monkeypatch):
    import rapidrl.vector as vector
    from rapidrl import hardware

    monkeypatch.setattr(hardware, "cpu_count", lambda: 2)
    assert vector.default_layout(8) == {"num_workers": 2, "inline": True, "spin": 0.002}
    assert vector.default_layout(1) == {"num_workers": 1}
    with caplog.at_level(logging.INFO, logger="rapidrl.vector"):
        venv = make_vec("CartPole-v1", 2, "auto")
    with venv:
        # The inline spin hybrid: one group in a worker process, the other in this process.
        assert venv.name == "hybrid vector env" and venv.spin == 0.002
        assert venv.worker_pids[0] is not None and venv.worker_pids[1] is None
        assert "no autotune entry" in caplog.text
        venv.reset(seed=0)
        venv.step(np.zeros(2, np.int64))


def test_auto_honours_a_layout_the_caller_gives(cache_dir):
    """An autotuned entry says serial, but the caller asks for workers or first-ready batches:
    what the caller gave wins (it was silently dropped before)."""
    save_autotune("CartPole-v1", 4, {"backend": "serial"})
    with make_vec("CartPole-v1", 4, "auto") as venv:
        assert venv.name == "serial vector env"  # nothing given: the entry
    with make_vec("CartPole-v1", 4, "auto", num_workers=2) as venv:
        assert venv.name == "hybrid vector env" and len(venv.worker_pids) == 2  # one a group
    with make_vec("CartPole-v1", 4, "auto", num_workers=2, batch_size=2) as venv:
        assert venv.name == "async vector env" and venv.batch_size == 2
        venv.reset(seed=0)


def test_candidate_layouts_of_a_2_core_machine():
    """Every rapidrl layout of 4 envs on 2 cores, in the order they are measured; no baseline
    (those are `rapidrl bench envs`'), and `backends` filters."""
    from rapidrl.vector.autotune import candidate_layouts, envpool_available

    names = [lay.name for lay in candidate_layouts("CartPole-v1", 4, cpus=2)]
    assert names == [
        "serial", "hybrid[2x2]", "subprocess[4x1]", "async[2x2] b=2", "async[4x1] b=2",
        "hybrid[2x2, 1 inline]", "async[2x2, 1 inline] b=2",
        # spin only where every waiting side has a core: 1 worker process + the caller
        "hybrid[2x2, 1 inline] spin", "async[2x2, 1 inline] b=2 spin",
    ]  # fmt: skip
    atari = {lay.backend for lay in candidate_layouts("pong", 4, cpus=2)}
    assert {"ale"} <= atari and not atari & {"ale-raw", "ceiling", "gym-sync", "gym-async"}
    only = candidate_layouts("CartPole-v1", 4, backends=("serial",), cpus=2)
    assert [lay.name for lay in only] == ["serial"]
    # envpool hosts Atari and Gymnasium's MuJoCo tasks (not CartPole, which it also has, but
    # not under this backend); ale only Atari.
    if envpool_available() and importlib.util.find_spec("mujoco") is not None:
        hopper = [lay.name for lay in candidate_layouts("Hopper-v5", 4, cpus=2)]
        assert hopper[-2:] == ["envpool", "envpool b=2"] and not any("ale" in n for n in hopper)


def test_autotune_measures_stores_and_make_vec_takes_the_fastest(cache_dir):
    """autotune() measures each candidate (interleaved repeats), stores the fastest median in
    the cache and make_vec(backend="auto") builds that layout; a layout that fails is left out."""
    from rapidrl.vector import autotune as at

    logs: list[str] = []
    real = at.measure_layout

    def measure(env_id, layout, seconds, warmup=1.0, seed=0):
        if layout.backend == "async":
            raise RuntimeError("cannot start workers here")
        rec = real(env_id, layout, seconds, warmup=0.0, seed=seed)
        # a deterministic ranking (timings on a shared machine are not): serial wins
        return {**rec, "steps_per_s": 1000.0 if layout.backend == "serial" else 10.0 + seed}

    at_measure = pytest.MonkeyPatch()
    at_measure.setattr(at, "measure_layout", measure)
    try:
        result = at.autotune(
            "CartPole-v1", 2, seconds=0.05, repeats=2, backends=("serial", "subprocess", "async"),
            log=logs.append,
        )  # fmt: skip
    finally:
        at_measure.undo()
    assert [r["layout"] for r in result["rows"]] == ["serial", "subprocess[2x1]"]
    assert [r["repeats"] for r in result["rows"]] == [2, 2]
    assert result["rows"][1]["steps_per_s"] == 10.5  # the median of 10 and 11
    assert result["best"]["layout"] == "serial" and result["path"] == autotune_path()
    assert any("FAILED: RuntimeError: cannot start workers" in line for line in logs)
    assert load_autotune("CartPole-v1", 2)["backend"] == "serial"
    with make_vec("CartPole-v1", 2, "auto") as venv:
        assert venv.name == "serial vector env"


def test_a_real_measurement_counts_steps():
    from rapidrl.vector.autotune import Layout, measure_layout

    rec = measure_layout("CartPole-v1", Layout("serial", 2), seconds=0.05, warmup=0.0)
    assert rec["steps"] > 0 and rec["steps"] % 2 == 0
    assert rec["steps_per_s"] == pytest.approx(rec["steps"] / rec["seconds"])
    assert rec["layout"] == "serial" and rec["frames_per_s"] == rec["steps_per_s"]
