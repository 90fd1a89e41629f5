"""Holes found while making the vector envs a drop-in for gymnasium users: bad observations
accepted silently, per-env seed lists, unknown env ids, stale autotune entries, and scripts
without a ``__main__`` guard under the spawn start method."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import rapidrl.vector.make as vector_make
from rapidrl.envs import UnknownEnvError
from rapidrl.vector import EnvWorkerError, make_vec
from rapidrl.vector.autotune_cache import autotune_path, cache_key, save_autotune
from rapidrl.vector.testing import BadObsEnv, CountingEnv, counting_env_fns

pytestmark = pytest.mark.timeout(60)


def _bad_env_fns(n: int, bad: int, **kwargs) -> list:
    """``n`` factories; env ``bad`` is a :class:`BadObsEnv` with ``kwargs``, the others conform."""
    dtype = kwargs.get("space_dtype", np.float32)
    return [
        functools.partial(BadObsEnv, **kwargs)
        if i == bad
        else functools.partial(BadObsEnv, space_dtype=dtype)
        for i in range(n)
    ]


# --- hole 1: observations of the wrong shape or dtype ---------------------------------------------
@pytest.mark.parametrize(
    "kwargs, expect",
    [
        # (1,) broadcasts into a (4,) row: numpy would have written it four times
        ({"bad_obs": np.ones(1, np.float32)}, r"env 1 .*shape \(1,\).*shape \(4,\)"),
        ({"bad_obs": np.ones((4, 1), np.float32)}, r"env 1 .*shape \(4, 1\).*shape \(4,\)"),
        # 300.7 into uint8 would become 44
        (
            {"bad_obs": np.full(4, 300.7), "space_dtype": np.uint8},
            r"env 1 .*dtype float64.*dtype uint8",
        ),
    ],
    ids=["broadcastable-shape", "extra-dim", "float-into-uint8"],
)
@pytest.mark.parametrize("bad_from", [0, 3], ids=["at-reset", "at-step"])
def test_wrong_observation_is_a_clear_error(kwargs, expect, bad_from):
    venv = make_vec(_bad_env_fns(3, 1, bad_from=bad_from, **kwargs), 3)
    with pytest.raises(EnvWorkerError, match=expect) as info:
        venv.reset(seed=0)
        for _ in range(5):
            venv.step(np.zeros(3, np.int64))
    assert "observation_space" in str(info.value)
    assert venv.closed


def test_wrong_observation_on_autoreset_and_in_a_worker_process():
    # Episodes end at step 2: the bad observation comes from the autoreset's env.reset().
    # Env 0 runs in the worker process, env 1 in this one (inline).
    fns = _bad_env_fns(2, 0, bad_obs=np.ones(1, np.float32), bad_from=2, episode_len=2)
    venv = make_vec(fns, 2, "hybrid", num_workers=2, inline=True)
    venv.reset(seed=0)
    venv.step(np.zeros(2, np.int64))
    with pytest.raises(EnvWorkerError, match=r"(?s)env 0 \(worker 0.*shape \(1,\).*\(4,\)"):
        venv.step(np.zeros(2, np.int64))
    assert venv.closed


def test_castable_observations_are_still_accepted():
    # float64 for a float32 Box (many gymnasium envs do this) and int64 for a float32 Box fit.
    for bad in (np.array([0.5, 1.5, 2.5, 3.5]), np.arange(4)):
        with make_vec(_bad_env_fns(2, 0, bad_obs=bad), 2) as venv:
            obs, _ = venv.reset(seed=0)
            np.testing.assert_array_equal(obs[0], bad.astype(np.float32))
            obs, *_ = venv.step(np.zeros(2, np.int64))
            assert obs.dtype == np.float32
            np.testing.assert_array_equal(obs[0], bad.astype(np.float32))


# --- hole 8: per-env seed lists ---------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["serial", "hybrid"])
def test_reset_with_a_seed_list(backend):
    kwargs = {"num_workers": 2, "inline": True} if backend == "hybrid" else {}
    with make_vec(counting_env_fns(4), 4, backend, **kwargs) as venv:
        # CountingEnv's obs[0] is drawn from the env's seeded RNG at each reset
        by_int, _ = venv.reset(seed=10)
        same, _ = venv.reset(seed=[10, 11, 12, 13])  # the list form of seed=10
        np.testing.assert_array_equal(same[:, 0], by_int[:, 0])
        mixed, _ = venv.reset(seed=[13, 0, None, 11])
        expected = [CountingEnv().reset(seed=s)[0][0] for s in (13, 0)]
        assert mixed[0, 0] == expected[0] and mixed[1, 0] == expected[1]
        assert mixed[3, 0] == by_int[1, 0]  # env 3 seeded 11, as env 1 was above
        with pytest.raises(ValueError, match=r"3 seeds for num_envs=4"):
            venv.reset(seed=[1, 2, 3])
        with pytest.raises(TypeError, match=r"seed\[1\].*'x'"):
            venv.reset(seed=[1, "x", 3, 4])
        # refused up front: the vector env is still usable
        assert not venv.closed
        obs, *_ = venv.step(np.zeros(4, np.int64))
        assert obs.shape == (4, 4)


def _counting_stream(seed: int, steps: int) -> np.ndarray:
    """A :class:`CountingEnv` reset with ``seed`` and stepped ``steps`` times with action 0, reset
    in the same step an episode ends (as the vector envs do): the ``steps + 1`` observations."""
    env = CountingEnv()
    out = [env.reset(seed=seed)[0]]
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            obs, _ = env.reset()
        out.append(obs)
    return np.array(out)


@pytest.mark.parametrize(
    "seed, env_seeds, width",
    # an int seeds env i with seed + i; a crash in a step restarts the env with its seed of the
    # last reset + width * restarts, width being that of the last reset's seeds (num_envs for an
    # int, max - min + 1 for a list: 5 for [7, 3], whose envs would otherwise meet at 7 = 3 + 2 * 2
    # after two restarts), so it can replay neither its episode nor another env's.
    [(10, (10, 11), 2), ([7, 3], (7, 3), 5)],
    ids=["int", "list"],
)
@pytest.mark.parametrize("crashing", [0, 1], ids=["in-worker-process", "inline"])
def test_restart_after_a_crash_keeps_per_env_seeds_distinct(seed, env_seeds, width, crashing):
    steps = 6  # three crashes of the crashing env
    # CountingEnv(crash_at=2) crashes at every 2nd step since it was made (restarts included).
    n = len(env_seeds)
    fns = [functools.partial(CountingEnv, crash_at=2 if i == crashing else None) for i in range(n)]
    with make_vec(fns, n, "hybrid", num_workers=2, inline=True, restart_on_crash=True) as venv:
        obs, _ = venv.reset(seed=seed)
        seen = [obs]
        for k in range(1, steps + 1):
            obs, _, _, truncated, infos = venv.step(np.zeros(n, np.int64))
            seen.append(obs)
            crashed = k % 2 == 0
            assert infos["worker_restarted"][crashing] == truncated[crashing] == crashed, k
    seen = np.array(seen)  # [steps + 1, n, 4]
    restart_seeds = [env_seeds[crashing] + width * r for r in range(1, steps // 2 + 1)]
    all_seeds = [*env_seeds, *restart_seeds]
    first_obs = [_counting_stream(s, 0)[0] for s in all_seeds]
    # every seed gives a different first observation, so each check below tells seeds apart
    assert len({tuple(o) for o in first_obs}) == len(all_seeds), all_seeds
    for i, s in enumerate(env_seeds):
        if i != crashing:  # the other env is not disturbed: its whole stream from its own seed
            np.testing.assert_array_equal(
                seen[:, i], _counting_stream(s, steps), err_msg=f"env {i}"
            )
    # the crashing env: its seed's stream until the crash, then the stream of each restart seed
    expected = [_counting_stream(s, 1) for s in (env_seeds[crashing], *restart_seeds)]
    np.testing.assert_array_equal(
        seen[:, crashing],
        np.concatenate(expected)[: steps + 1],
        err_msg=f"env {crashing} seeds {all_seeds}",
    )


# --- hole 9: unknown env ids -----------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["serial", "subprocess", "hybrid", "async", "auto"])
def test_unknown_env_id_is_the_registry_error_before_any_worker(backend, monkeypatch):
    from rapidrl.vector import process

    def no_worker(*args, **kwargs):
        raise AssertionError("a worker was started for an unknown env id")

    monkeypatch.setattr(process.ProcessWorker, "__init__", no_worker)
    with pytest.raises(UnknownEnvError, match="did you mean 'CartPole-v1'"):
        make_vec("CartPol-v1", 2, backend)


# --- hole 11: stale or hand-edited autotune entries -------------------------------------------------
@pytest.mark.parametrize(
    "entry",
    [
        {"backend": "async", "num_workers": 3, "batch_size": 1},  # more workers than envs
        {"backend": "hybrid", "num_workers": "two"},
        {"backend": "ale"},  # an Atari-only backend for CartPole
        {"backend": "async", "num_workers": 2, "batch_size": 3},
        {"backend": "serial", "spin": "fast"},
        {"backend": "subprocess", "inline": True},
        {"backend": "hybrid", "num_workers": 1, "inline": True},
        {"backend": "bogus"},
        {"backend": "serial", "batch_size": -1},
    ],
    ids=str,
)
def test_stale_autotune_entry_falls_back_with_a_warning(entry, tmp_path, monkeypatch):
    monkeypatch.setenv("RAPIDRL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(vector_make, "default_layout", lambda n: {"num_workers": 1})  # 1 process
    save_autotune("CartPole-v1", 2, {"backend": "serial"})
    data = json.loads(autotune_path().read_text())  # hand-edit it, as a user might
    data["entries"][cache_key("CartPole-v1", 2)].update(entry)
    autotune_path().write_text(json.dumps(data))
    with pytest.warns(RuntimeWarning, match="autotune entry .* unusable"):
        venv = make_vec("CartPole-v1", 2, "auto")
    with venv:
        assert venv.name == "hybrid vector env"
        obs, _ = venv.reset(seed=0)
        assert venv.step(np.zeros(2, np.int64))[0].shape == obs.shape == (2, 4)


def test_env_errors_are_not_hidden_by_the_autotune_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv("RAPIDRL_CACHE_DIR", str(tmp_path))
    save_autotune("CartPole-v1", 2, {"backend": "serial"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: the options are the user's fault
        with pytest.raises(Exception, match="no_such_option"):
            make_vec("CartPole-v1", 2, "auto", env_options={"no_such_option": 1})


# --- spawn guard ----------------------------------------------------------------------------------
_SCRIPT = """
import numpy as np
from rapidrl.vector import make_vec

def main():
    with make_vec("CartPole-v1", 2, "{backend}") as venv:
        venv.reset(seed=0)
        venv.step(np.zeros(2, np.int64))
    print("RAN OK")

{call}
"""


def _run_script(tmp_path, name: str, backend: str, guarded: bool):
    call = 'if __name__ == "__main__":\n    main()' if guarded else "main()"
    path = tmp_path / name
    path.write_text(textwrap.dedent(_SCRIPT).format(backend=backend, call=call))
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=50, cwd=tmp_path
    )
    return proc, time.monotonic() - t0


def test_script_without_main_guard_fails_fast_with_one_clear_message(tmp_path):
    proc, took = _run_script(tmp_path, "train_unguarded.py", "hybrid", guarded=False)
    err = proc.stderr
    assert proc.returncode != 0 and "RAN OK" not in proc.stdout
    assert 'if __name__ == "__main__":' in err and "train_unguarded.py" in err
    assert "bootstrapping phase" not in err and "freeze_support" not in err  # no wall of errors
    assert err.count("Traceback") == 1  # the parent's, not one per worker
    assert took < 25, f"took {took:.1f}s"
    # the same script with the guard runs
    proc, _ = _run_script(tmp_path, "train_guarded.py", "subprocess", guarded=True)
    assert proc.returncode == 0 and "RAN OK" in proc.stdout, proc.stderr
