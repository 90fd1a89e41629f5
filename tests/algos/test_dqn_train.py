"""The DQN trainer end to end: presets on Pong, exact resume, reproducibility, actor processes,
errors, the CLI, and (slow) learning CartPole."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import multiprocessing
import os
import shutil
import signal

import gymnasium as gym
import numpy as np
import pytest
import torch

from rapidrl import cli
from rapidrl.algos.dqn.actor import ActorDiedError
from rapidrl.algos.dqn.config import PRESETS, DQNConfig
from rapidrl.algos.dqn.learner import make_q_network
from rapidrl.algos.dqn.train import train
from rapidrl.train import CheckpointError, load_latest, read_metrics
from rapidrl.train.testing import assert_same

COLUMNS = ("frames", "seconds", "fps", "episodes", "return_mean_100", "loss", "q_mean")
COLUMNS += ("epsilon", "policy_lag", "steps", "updates", "buffer", "update_ms")

# A small CartPole config exercising every RNG consumer: noisy nets, PER, C51, n-step, double.
CARTPOLE_ALL = DQNConfig(
    env="CartPole-v1",
    num_envs=2,
    backend="serial",
    n_step=3,
    double=True,
    dueling=True,
    noisy=True,
    prioritized=True,
    distributional=True,
    v_min=0.0,
    v_max=50.0,
    num_atoms=11,
    batch_size=8,
    steps_per_update=2,
    buffer_size=1_000,
    learning_starts=100,
    target_sync_steps=60,
    epsilon_decay_steps=300,
    max_grad_norm=10.0,
    max_frames=600,
    checkpoint_every_frames=300,
    checkpoint_every_seconds=1e9,
    log_every_frames=50,
    log_every_seconds=0,
    keep_checkpoints=3,
    save_replay=True,
    torch_threads=1,
    tensorboard=False,
    no_progress=True,
)


def tiny_pong(preset: str, run_dir, **kw) -> DQNConfig:
    """A preset shrunk to a few thousand frames: real Pong, real updates."""
    base = dict(
        buffer_size=2_000,
        learning_starts=440,
        max_frames=1_920,
        log_every_frames=640,
        log_every_seconds=0,
        checkpoint_every_seconds=1e9,
        no_progress=True,
        run_dir=str(run_dir),
        seed=3,
        torch_threads=1,  # the test machine is shared: contended OpenMP threads stall
    )
    base.update(kw)
    return dataclasses.replace(PRESETS[preset], **base)


def rows_of(run_dir):
    header, rows = read_metrics(os.path.join(run_dir, "metrics.csv"))
    return header, rows


def strip_time(rows):
    return [{k: v for k, v in r.items() if k not in ("seconds", "fps", "update_ms")} for r in rows]


def ckpt_payload(path):
    """A checkpoint's deterministic content: state (minus wall-clock parts), RNG, arrays."""
    p = torch.load(path, weights_only=True)
    state = dict(p["state"])
    state.pop("clock")
    counters = dict(state["counters"])
    counters["acc"] = counters["acc"][:3]  # [3] is update wall time
    state["counters"] = counters
    arrays = {}
    npz = str(path).replace(".pt", ".npz")
    if os.path.exists(npz):
        with np.load(npz) as z:
            arrays = {k: z[k] for k in z.files}
        # The frame store is np.empty: compare only the slots each stream has written.
        frames = arrays.pop("frames")
        arrays["frames"] = [f[:n] for f, n in zip(frames, arrays["f_count"])]
    return {"state": state, "rng": p["rng"], "arrays": arrays}


# --------------------------------------------------------------------------------------------
# Every preset, for real, on Pong
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["dqn", "rainbow", "fast", "lean"])
def test_preset_short_pong_run(tmp_path, preset):
    cfg = tiny_pong(preset, tmp_path / preset)
    summary = train(cfg)
    run = tmp_path / preset
    assert summary["frames"] == 1_920 and summary["stop_reason"] == "max_frames"
    assert summary["updates"] > 0
    for name in ("config.json", "metrics.csv", "summary.json", "learning_curve.png"):
        assert (run / name).exists(), name
    header, rows = rows_of(run)
    for col in COLUMNS:
        assert col in header, col
    losses = [float(r["loss"]) for r in rows if r["loss"]]
    assert losses and all(math.isfinite(x) for x in losses)
    assert all(math.isfinite(float(r["q_mean"])) for r in rows if r["q_mean"])
    assert [int(r["frames"]) for r in rows] == [640, 1_280, 1_920]
    # The config round-trips and the checkpoint reloads into a fresh network.
    saved = json.loads((run / "config.json").read_text())
    assert saved["algo"] == "dqn" and saved["n_step"] == cfg.n_step
    ckpt = load_latest(run)
    assert ckpt.frames == 1_920 and ckpt.algo == "dqn"
    net = make_q_network(cfg, (cfg.frame_stack, cfg.obs_size, cfg.obs_size), 6)
    net.load_state_dict(ckpt.state["q"])
    assert ckpt.state["counters"]["updates"] == summary["updates"]


def test_obs_norm_learns_its_statistics_from_the_replayed_batches(tmp_path):
    """--obs-norm: every update merges its sampled frames into the online net's statistics
    before the loss (count = the prior's 1e-4 + update_batch x updates), the checkpoint carries
    them; off Atari the flag changes nothing."""
    cfg = tiny_pong("fast", tmp_path / "on", obs_size=52, frame_stack=2, obs_norm=True)
    summary = train(cfg)
    assert summary["updates"] > 0
    q = load_latest(tmp_path / "on").state["q"]
    expected = 1e-4 + cfg.update_batch * summary["updates"]
    assert q["obs_rms.count"].item() == pytest.approx(expected)
    mean = q["obs_rms.mean"]
    assert mean.shape == (2, 52, 52) and 0 < mean.mean().item() < 255
    # Off Atari the flag does nothing (the default preset has it on): the same run as without.
    on = train(dataclasses.replace(CARTPOLE_ALL, run_dir=str(tmp_path / "cp_on"), obs_norm=True))
    off = train(dataclasses.replace(CARTPOLE_ALL, run_dir=str(tmp_path / "cp_off")))
    assert "obs_rms.mean" not in load_latest(tmp_path / "cp_on").state["q"]
    assert strip_time(rows_of(tmp_path / "cp_on")[1]) == strip_time(rows_of(tmp_path / "cp_off")[1])
    assert on["updates"] == off["updates"]


def test_async_backend_first_ready_batches(tmp_path, monkeypatch):
    """backend='auto' may resolve to first-ready batches (env_ids subsets): the loop must pair
    each env's own obs and action with its result, and the replay must accept the subsets."""
    from rapidrl.vector.autotune_cache import save_autotune

    monkeypatch.setenv("RAPIDRL_CACHE_DIR", str(tmp_path / "cache"))
    save_autotune("pong", 4, {"backend": "async", "num_workers": 2, "batch_size": 2})
    cfg = tiny_pong("fast", tmp_path / "run", num_envs=4, backend="auto")
    summary = train(cfg)
    assert summary["frames"] == 1_920 and summary["updates"] > 0
    _, rows = rows_of(tmp_path / "run")
    losses = [float(r["loss"]) for r in rows if r["loss"]]
    assert losses and all(math.isfinite(x) for x in losses)


# --------------------------------------------------------------------------------------------
# Resume, reproducibility, corrupt checkpoints
# --------------------------------------------------------------------------------------------
def test_resume_equals_uninterrupted_up_to_the_checkpoint(tmp_path, capsys):
    full = tmp_path / "full"
    train(dataclasses.replace(CARTPOLE_ALL, run_dir=str(full)))
    part = tmp_path / "part"
    s1 = train(dataclasses.replace(CARTPOLE_ALL, run_dir=str(part), max_frames=300))
    assert s1["frames"] == 300 and s1["stop_reason"] == "max_frames"
    ck = "checkpoints/ckpt-000000000300.pt"
    # The stopped run's checkpoint is the uninterrupted run's at the same frame, bit for bit:
    # weights, target, Adam moments, counters, tracker, every RNG, the replay with priorities.
    assert_same(ckpt_payload(full / ck), ckpt_payload(part / ck))
    # Resuming the same checkpoint twice gives the same run.
    twin = tmp_path / "twin"
    shutil.copytree(part, twin)
    for d in (part, twin):
        capsys.readouterr()
        s2 = train(dataclasses.replace(CARTPOLE_ALL, resume=str(d)))
        assert s2["frames"] == 600 and s2["updates"] > s1["updates"]
        assert "holds no replay" not in capsys.readouterr().err  # it held one
    end = "checkpoints/ckpt-000000000600.pt"
    assert_same(ckpt_payload(part / end), ckpt_payload(twin / end))
    _, rows_full = rows_of(full)
    _, rows_part = rows_of(part)
    _, rows_twin = rows_of(twin)
    assert [int(r["frames"]) for r in rows_part] == list(range(50, 601, 50))  # no duplicates
    assert strip_time(rows_part) == strip_time(rows_twin)
    upto = [r for r in rows_full if int(r["frames"]) <= 300]
    assert strip_time(upto) == strip_time(rows_part[: len(upto)])


def test_ctrl_c_saves_and_stops_then_resume_continues(tmp_path):
    run = tmp_path / "r"

    def ctrl_c(ev):
        if ev.frames == 200:
            os.kill(os.getpid(), signal.SIGINT)  # what a Ctrl-C in the terminal does

    s = train(dataclasses.replace(CARTPOLE_ALL, run_dir=str(run)), on_log=ctrl_c)
    assert s["stop_reason"] == "interrupted" and s["frames"] == 200
    assert load_latest(run).frames == 200
    s = train(dataclasses.replace(CARTPOLE_ALL, resume=str(run)))
    assert s["stop_reason"] == "max_frames" and s["frames"] == 600


def test_seeded_runs_reproducible(tmp_path):
    cfg = dataclasses.replace(
        CARTPOLE_ALL, save_replay=False, max_frames=400, checkpoint_every_frames=None
    )
    a = train(dataclasses.replace(cfg, run_dir=str(tmp_path / "a")))
    b = train(dataclasses.replace(cfg, run_dir=str(tmp_path / "b")))
    c = train(dataclasses.replace(cfg, run_dir=str(tmp_path / "c"), seed=2))
    assert a["updates"] == b["updates"] == c["updates"] > 0
    pa, pb, pc = (load_latest(tmp_path / n).state["q"] for n in "abc")
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert not all(torch.equal(pa[k], pc[k]) for k in pa)
    assert strip_time(rows_of(tmp_path / "a")[1]) == strip_time(rows_of(tmp_path / "b")[1])


def test_replay_window_trains_as_the_small_replay_then_grows(tmp_path):
    """--buffer-size-early W in a large replay trains exactly as a replay of capacity W (the same
    losses and weights) until --buffer-grow-step; then the window gains one transition per agent
    step, up to --buffer-size (the metrics column says which)."""
    cfg = dataclasses.replace(
        CARTPOLE_ALL,
        prioritized=False,
        save_replay=False,
        max_frames=500,
        buffer_size=150,
        checkpoint_every_frames=None,
    )
    small = train(dataclasses.replace(cfg, run_dir=str(tmp_path / "small")))
    windowed = dataclasses.replace(
        cfg, buffer_size=1_000, buffer_size_early=150, buffer_grow_step=10**9
    )
    train(dataclasses.replace(windowed, run_dir=str(tmp_path / "win")))
    ps, pw = (load_latest(tmp_path / n).state["q"] for n in ("small", "win"))
    assert small["updates"] > 0 and all(torch.equal(ps[k], pw[k]) for k in ps)
    rows_s, rows_w = rows_of(tmp_path / "small")[1], rows_of(tmp_path / "win")[1]
    key = ("loss", "q_mean", "return_mean_100", "updates")
    assert [[r[k] for k in key] for r in rows_s] == [[r[k] for k in key] for r in rows_w]
    assert {int(r["replay_window"]) for r in rows_w} == {150}
    # A window at least the replay's size is the whole replay (lean's window with a small
    # --buffer-size): the same weights as no window.
    wide = dataclasses.replace(cfg, buffer_size_early=1_000, run_dir=str(tmp_path / "wide"))
    train(wide)
    pwide = load_latest(tmp_path / "wide").state["q"]
    assert all(torch.equal(ps[k], pwide[k]) for k in ps)
    # Growing from agent step 200: 150 + (steps - 200), at most 400.
    grow = dataclasses.replace(windowed, buffer_size=400, buffer_grow_step=200)
    train(dataclasses.replace(grow, run_dir=str(tmp_path / "grow")))
    window = [(int(r["steps"]), int(r["replay_window"])) for r in rows_of(tmp_path / "grow")[1]]
    assert [w for _, w in window] == [min(400, 150 + max(0, s - 200)) for s, _ in window]
    assert window[0][1] == 150 and window[-1][1] == 400
    pg = load_latest(tmp_path / "grow").state["q"]
    assert not all(torch.equal(pg[k], pw[k]) for k in pg)  # the older transitions were drawn


def test_resume_without_replay_refills_then_learns(tmp_path, capsys):
    cfg = dataclasses.replace(CARTPOLE_ALL, save_replay=False, checkpoint_every_frames=None)
    run = tmp_path / "r"
    s1 = train(dataclasses.replace(cfg, run_dir=str(run), max_frames=300))
    capsys.readouterr()
    s2 = train(dataclasses.replace(cfg, resume=str(run), max_frames=600))
    assert "the checkpoint holds no replay (--save-replay was off)" in capsys.readouterr().err
    assert s2["frames"] == 600 and s2["updates"] > s1["updates"]
    # 100 transitions of refill (50 vector steps x 2 envs) before the updates go on.
    _, rows = rows_of(run)
    after = {int(r["frames"]): r for r in rows}
    assert int(after[400]["updates"]) == s1["updates"]
    assert int(after[450]["updates"]) > s1["updates"]


def test_corrupt_checkpoint_gives_a_clear_error(tmp_path, capsys):
    run = tmp_path / "r"
    cfg = dataclasses.replace(CARTPOLE_ALL, max_frames=200, run_dir=str(run))
    train(cfg)
    ckpts = sorted((run / "checkpoints").glob("ckpt-*.pt"))
    assert len(ckpts) == 1
    ckpts[0].write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="is readable"):
        train(dataclasses.replace(CARTPOLE_ALL, resume=str(run), max_frames=400))
    capsys.readouterr()
    # The CLI turns it into a message and exit status 2, not a traceback.
    assert cli.main(["train", "dqn", "--resume", str(run), "--max-frames", "400"]) == 2
    err = capsys.readouterr().err
    assert "rapidrl: error:" in err and "readable" in err and "Traceback" not in err


def test_truncated_replay_arrays_fall_back_to_previous_checkpoint(tmp_path):
    run = tmp_path / "r"
    train(dataclasses.replace(CARTPOLE_ALL, run_dir=str(run), max_frames=400,
                              checkpoint_every_frames=200))  # fmt: skip
    npz = run / "checkpoints" / "ckpt-000000000400.npz"
    npz.write_bytes(npz.read_bytes()[:100])
    with pytest.warns(RuntimeWarning, match="skipped 1 unreadable"):
        s = train(dataclasses.replace(CARTPOLE_ALL, resume=str(run), max_frames=600))
    assert s["frames"] == 600


def test_resume_refuses_changed_learning_settings(tmp_path):
    run = tmp_path / "r"
    train(dataclasses.replace(CARTPOLE_ALL, run_dir=str(run), max_frames=200))
    with pytest.raises(CheckpointError, match="lr"):
        train(dataclasses.replace(CARTPOLE_ALL, resume=str(run), lr=0.5))


class ConstantRewardEnv(gym.Env):
    """Reward 1 forever; only a time limit ends an episode (truncated, never terminated)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 1.0, False, False, {}


def test_truncation_bootstraps_end_to_end(tmp_path):
    """With time-limit ends bootstrapped, Q -> 1 / (1 - gamma) = 10 (4.1 if they ended it)."""
    if "RapidrlConstantReward-v0" not in gym.registry:
        gym.register("RapidrlConstantReward-v0", ConstantRewardEnv, max_episode_steps=5)
    cfg = DQNConfig(
        env="RapidrlConstantReward-v0",
        gamma=0.9,
        n_step=3,
        lr=3e-3,
        batch_size=32,
        buffer_size=1_000,
        learning_starts=200,
        target_sync_steps=100,
        max_frames=2_500,
        stop_at_score=None,
        log_every_frames=500,
        log_every_seconds=0,
        run_dir=str(tmp_path / "c"),
        torch_threads=1,
        tensorboard=False,
        no_progress=True,
    )
    train(cfg)
    net = make_q_network(cfg, (1,), 2)
    net.load_state_dict(load_latest(tmp_path / "c").state["q"])
    q0 = net(torch.zeros(1, 1)).detach()
    assert torch.allclose(q0, torch.full_like(q0, 10.0), atol=1.0), q0


# --------------------------------------------------------------------------------------------
# Actor processes
# --------------------------------------------------------------------------------------------
ACTOR_CFG = dataclasses.replace(
    CARTPOLE_ALL,
    actor_processes=1,
    save_replay=False,
    max_frames=1_200,
    checkpoint_every_frames=None,
    log_every_frames=200,
    actor_timeout_s=60,
)


def test_actor_process_mode_runs_and_logs_policy_lag(tmp_path):
    s = train(dataclasses.replace(ACTOR_CFG, run_dir=str(tmp_path / "a")))
    assert s["frames"] == 1_200 and s["updates"] > 0
    header, rows = rows_of(tmp_path / "a")
    lags = [float(r["policy_lag"]) for r in rows if int(r["updates"]) > 0]
    assert lags and all(0 <= x < 50 for x in lags)
    assert all(math.isfinite(float(r["loss"])) for r in rows if r["loss"])
    assert multiprocessing.active_children() == []


def test_actor_killed_gives_a_clear_error(tmp_path):
    killed = []

    def kill_actor(ev):
        if not killed:
            os.kill(ev.actor_pids[0], signal.SIGKILL)
            killed.append(ev.actor_pids[0])

    cfg = dataclasses.replace(ACTOR_CFG, run_dir=str(tmp_path / "k"), max_frames=100_000)
    with pytest.raises(
        ActorDiedError, match=r"actor process 0 \(pid \d+\) died: killed by SIGKILL"
    ):
        train(cfg, on_log=kill_actor)
    assert killed
    assert multiprocessing.active_children() == []


def test_actor_exception_arrives_with_its_traceback():
    from rapidrl.algos.dqn.actor import ActorError, ActorPool

    q = make_q_network(DQNConfig(), (4,), 2)
    pool = ActorPool(
        1,
        env="CartPole-v1",
        env_options={"no_such_option": 1},  # the actor's make_vec raises
        num_envs=1,
        backend="serial",
        num_workers=None,
        obs_shape=(4,),
        obs_dtype=np.float32,
        q=q,
        net_kwargs={"obs_shape": (4,), "n_actions": 2},
        slots=2,
        env_seed=0,
        rng_seed=0,
        start_steps=0,
        epsilon=(1.0, 0.1, 100),
        noisy=False,
        version=0,
        timeout=60,
    )
    try:
        with pytest.raises(ActorError, match=r"(?s)actor process 0 .*failed:.*no_such_option"):
            pool.next()
    finally:
        pool.close()
    assert multiprocessing.active_children() == []


# --------------------------------------------------------------------------------------------
# Config and command line
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, changed",
    [
        ("n-step", {"n_step"}),
        ("double", {"double"}),
        ("dueling", {"dueling"}),
        ("noisy", {"noisy", "epsilon_start", "epsilon_end", "epsilon_decay_steps"}),
        ("per", {"prioritized", "per_alpha", "per_beta_steps"}),
        ("c51", {"distributional"}),
    ],
)
def test_the_eight_systems_are_base_plus_one_component(name, changed):
    """The side-by-side presets differ from ``base`` in their component's fields only, and
    ``base`` is plain DQN on the machinery of ``fast``."""
    base, fast = PRESETS["base"], PRESETS["fast"]
    assert (base.n_step, base.double, base.dueling, base.noisy) == (1, False, False, False)
    assert not base.prioritized and not base.distributional
    assert {f.name for f in dataclasses.fields(DQNConfig)} - {"n_step", "double", "dueling"} == {
        f.name
        for f in dataclasses.fields(DQNConfig)
        if getattr(base, f.name) == getattr(fast, f.name)
    }
    diff = {
        f.name
        for f in dataclasses.fields(DQNConfig)
        if getattr(PRESETS[name], f.name) != getattr(base, f.name)
    }
    assert diff == changed
    rainbow = PRESETS["rainbow-fast"]
    assert rainbow.n_step == 3 and rainbow.double and rainbow.dueling and rainbow.noisy
    assert rainbow.prioritized and rainbow.distributional and rainbow.epsilon_end == 0.0


def test_presets_validate_and_document_every_field():
    for cfg in PRESETS.values():
        cfg.validate()
    assert PRESETS["dqn"].update_batch == 32 and PRESETS["dqn"].loss == "mse"
    r = PRESETS["rainbow"]
    assert r.n_step == 3 and r.double and r.dueling and r.noisy and r.prioritized
    assert r.distributional and r.update_batch == 32
    # rainbow-lean (the default of rapidrl train rainbow) is lean and two of Rainbow's parts.
    from rapidrl.algos import DEFAULT_PRESETS

    assert DEFAULT_PRESETS["rainbow"] == "rainbow-lean"
    lean_100k = dataclasses.replace(
        PRESETS["lean"], buffer_size=100_000, buffer_size_early=0, buffer_grow_step=0
    )
    assert PRESETS["rainbow-lean"] == dataclasses.replace(
        lean_100k, double=True, distributional=True
    )
    # lean-long is lean with all of its 1M replay from the start, and nothing else.
    assert PRESETS["lean-long"] == dataclasses.replace(lean_100k, buffer_size=1_000_000)
    # rainbow-long is rainbow-lean at 84x84x4 with a 1M prioritized replay, no double DQN and
    # half its replay ratio (Rainbow R3 in docs/results/dopamine_rainbow_lean_zen4).
    assert PRESETS["rainbow-long"] == dataclasses.replace(
        PRESETS["rainbow-lean"],
        buffer_size=1_000_000,
        prioritized=True,
        per_alpha=0.5,
        per_beta0=0.4,
        per_beta_steps=2_500_000,
        obs_size=84,
        frame_stack=4,
        double=False,
        batch_size=4,
        steps_per_update=64,
    )
    # The class and its base (TrainerConfig: the fields every trainer shares).
    lines = [ln for cls in DQNConfig.__mro__[:-1] for ln in inspect.getsource(cls).splitlines()]
    for f in dataclasses.fields(DQNConfig):
        # A docstring right under every field.
        i = next(i for i, ln in enumerate(lines) if ln.strip().startswith(f"{f.name}:"))
        assert lines[i + 1].strip().startswith('"""'), f.name


def test_lean_is_the_default_and_changes_exactly_its_recipe():
    """rapidrl train dqn takes lean; lean is fast with the fields its comment names."""
    from rapidrl.algos import DEFAULT_PRESETS
    from rapidrl.algos.dqn.train import parse_dqn_args

    assert DEFAULT_PRESETS["dqn"] == "lean"
    assert parse_dqn_args([], "rapidrl train dqn", DEFAULT_PRESETS["dqn"]) == PRESETS["lean"]
    fast, lean = PRESETS["fast"], PRESETS["lean"]
    changed = {
        f.name: getattr(lean, f.name)
        for f in dataclasses.fields(DQNConfig)
        if getattr(lean, f.name) != getattr(fast, f.name)
    }
    assert changed == {
        "obs_size": 52, "frame_stack": 2, "obs_norm": True, "torso_channels": (16, 32, 32),
        "torso_dim": 256, "double": False, "num_envs": 16, "steps_per_update": 32, "lr": 5e-4,
        "buffer_size": 1_000_000, "buffer_size_early": 100_000, "buffer_grow_step": 750_000,
    }  # fmt: skip
    assert lean.update_batch == 256 and lean.batch_size == fast.batch_size  # the same ratio


def test_help_lists_every_field(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["train", "dqn", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for f in dataclasses.fields(DQNConfig):
        if f.name != "algo":
            assert f"--{f.name.replace('_', '-')}" in out, f.name
    assert (
        "presets: base, c51, double, dqn, dueling, fast, lean, lean-long, n-step, noisy, per, rainbow"
        in " ".join(out.split())
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--preset", "fsat"], "did you mean 'fast'"),
        (["--learning-starts", "500", "--buffer-size", "100"], "--learning-starts (500) exceeds"),
        (["--num-envs", "4", "--actor-processes", "3"], "multiple of --actor-processes"),
        (["--env", "pongg"], "did you mean"),
        (["--resume", "/nonexistent/run"], "no config.json"),
        (["--obs-size", "32"], "use --torso small for smaller frames"),
        (["--obs-size", "4", "--torso", "small"], "--obs-size must be >= 8"),
        (["--torso-channels", "16", "0", "32"], "--torso-channels needs 3 positive widths"),
        (["--torso", "small", "--torso-channels", "16", "32", "32"], "drop --torso-channels"),
        (["--torso-dim", "0"], "--torso-dim must be >= 1"),
        (["--prioritized"], "add --buffer-size-early 0"),  # lean's window
        (["--prioritized", "--buffer-size-early", "5000"], "windows uniform replay only"),
        (["--buffer-grow-step", "-1"], "--buffer-grow-step must be >= 0"),
    ],
)
def test_bad_input_gives_a_clear_error(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "dqn", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_a_replay_larger_than_memory_is_a_clear_error_before_training(
    tmp_path, monkeypatch, capsys
):
    from rapidrl import hardware

    monkeypatch.setattr(hardware, "available_memory", lambda *a: 10_000)
    argv = ["train", "dqn", "--preset", "dqn", "--env", "CartPole-v1", "--learning-starts", "100"]
    assert cli.main([*argv, "--buffer-size", "1000", "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "the replay (--buffer-size 1000 of (4,) observations) needs" in err
    assert "lower --buffer-size" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()  # refused before the run directory is made


def test_per_weights_choice_is_checked_and_older_runs_resume_as_they_ran():
    from rapidrl.config import ConfigError
    from rapidrl.train.run import config_from_dict, config_to_dict

    assert DQNConfig().per_weights == "batch"
    with pytest.raises(ConfigError, match="--per-weights must be batch or buffer"):
        dataclasses.replace(PRESETS["per"], per_weights="max").validate()
    saved = config_to_dict(PRESETS["per"])
    assert config_from_dict(DQNConfig, saved).per_weights == "batch"
    del saved["per_weights"]  # a config.json from before the field: buffer-normalized weights
    assert config_from_dict(DQNConfig, saved).per_weights == "buffer"


def test_cli_train_resume_and_rainbow(tmp_path, capsys):
    run = str(tmp_path / "c")
    common = ["--env", "CartPole-v1", "--learning-starts", "100", "--no-progress"]
    common += ["--torch-threads", "1", "--no-tensorboard", "--log-every-frames", "100"]
    assert cli.main(["train", "dqn", "--preset", "dqn", *common, "--max-frames", "300",
                     "--run-dir", run]) == 0  # fmt: skip
    assert "max_frames: 300 frames" in capsys.readouterr().out
    assert cli.main(["train", "dqn", "--resume", run, "--max-frames", "500"]) == 0
    assert json.loads(open(os.path.join(run, "summary.json")).read())["frames"] == 500
    saved = json.loads(open(os.path.join(run, "config.json")).read())
    assert saved["loss"] == "mse" and saved["max_frames"] == 500  # the dqn preset, resumed
    rb = str(tmp_path / "rb")
    assert cli.main(["train", "rainbow", *common, "--max-frames", "200", "--run-dir", rb]) == 0
    saved = json.loads(open(os.path.join(rb, "config.json")).read())
    # rainbow-lean: lean with double DQN and C51, epsilon-greedy, uniform replay.
    assert saved["distributional"] and saved["double"] and saved["n_step"] == 3
    assert not saved["noisy"] and not saved["prioritized"] and saved["obs_norm"]


# --------------------------------------------------------------------------------------------
# Learning (slow stage)
# --------------------------------------------------------------------------------------------
# What learns CartPole here; Rainbow below adds its components to it.
DQN_LEARNS_CARTPOLE = DQNConfig(
    env="CartPole-v1",
    n_step=3,
    double=True,
    dueling=True,
    lr=1e-3,
    batch_size=64,
    buffer_size=20_000,
    learning_starts=1_000,
    target_sync_steps=500,
    epsilon_end=0.05,
    epsilon_decay_steps=8_000,
    max_frames=50_000,
    stop_at_score=195.0,
    score_window=20,
    tensorboard=False,
    no_progress=True,
    torch_threads=1,
    seed=1,
)


@pytest.mark.slow
def test_dqn_learns_cartpole(tmp_path):
    s = train(dataclasses.replace(DQN_LEARNS_CARTPOLE, run_dir=str(tmp_path / "cp")))
    assert s["solved"], s
    assert s["return_mean_100"] >= 195


@pytest.mark.slow
def test_rainbow_learns_cartpole(tmp_path):
    """All six components at once (n-step, double, dueling, noisy exploration with epsilon off,
    prioritized replay, C51 on CartPole's return range)."""
    cfg = dataclasses.replace(
        DQN_LEARNS_CARTPOLE,
        noisy=True,
        prioritized=True,
        distributional=True,
        v_min=0.0,
        v_max=100.0,
        per_alpha=0.5,
        per_beta_steps=30_000,
        epsilon_start=0.0,
        epsilon_end=0.0,
        epsilon_decay_steps=0,
        max_frames=60_000,
        run_dir=str(tmp_path / "rainbow"),
    )
    s = train(cfg)
    assert s["solved"], s
    assert s["return_mean_100"] >= 195
