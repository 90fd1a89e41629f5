"""The PQN trainer end to end: a short CartPole run and its run directory, a tiny Pong run (the
Atari path), time limits bootstrap, a first-ready vector env gives the serial run, exact resume,
config validation and the command line, ``rapidrl eval``, and (slow) learning CartPole."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import multiprocessing
import os
import shutil
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from rapidrl import cli
from rapidrl.algos.eval import EvalConfig, evaluate
from rapidrl.algos.pqn.config import PRESETS, PQNConfig
from rapidrl.algos.pqn.learner import epsilon_at, lr_at, make_pqn_network, q_lambda_at
from rapidrl.algos.pqn.train import train
from rapidrl.train import load_latest, read_metrics
from rapidrl.train.testing import assert_same
from rapidrl.train.testing import rollout_ckpt_payload as ckpt_payload

COLUMNS = ("frames", "seconds", "fps", "episodes", "return_mean_100", "length_mean_100")
COLUMNS += ("return_best_mean_100", "td_loss", "q_mean", "epsilon", "lr", "steps", "updates")
COLUMNS += ("grad_steps", "rollout_s", "update_s")
QUIET = dict(
    log_every_seconds=0,
    checkpoint_every_seconds=1e9,
    no_progress=True,
    tensorboard=False,
    torch_threads=1,  # the test machine is shared: contended OpenMP threads stall
)
# 4 CartPole envs x 32 steps = 128 frames per update, in this process.
SMALL = dataclasses.replace(
    PRESETS["cartpole"],
    num_envs=4,
    num_steps=32,
    minibatches=2,
    epochs=2,
    backend="serial",
    schedule_frames=100_000,  # the schedules do not depend on where a session stops
    **QUIET,
)


def rows_of(run_dir):
    return read_metrics(os.path.join(run_dir, "metrics.csv"))


def strip_time(rows):
    drop = ("seconds", "fps", "rollout_s", "update_s")
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


# --------------------------------------------------------------------------------------------
# Short real runs
# --------------------------------------------------------------------------------------------
def test_short_cartpole_run_writes_the_run_directory(tmp_path):
    run = tmp_path / "c"
    cfg = dataclasses.replace(
        SMALL, schedule_frames=None, max_frames=512, log_every_frames=256, run_dir=str(run)
    )
    summary = train(cfg)
    assert summary["frames"] == 512 and summary["stop_reason"] == "max_frames"
    assert summary["algo"] == "pqn" and summary["env"] == "CartPole-v1"
    assert summary["updates"] == 4 and summary["grad_steps"] == 4 * 2 * 2
    assert summary["episodes"] > 0
    for name in ("config.json", "metrics.csv", "summary.json", "learning_curve.png"):
        assert (run / name).exists(), name
    assert json.loads((run / "summary.json").read_text())["frames"] == 512
    header, rows = rows_of(run)
    for col in COLUMNS:
        assert col in header, col
    assert [int(r["frames"]) for r in rows] == [256, 512]
    for r in rows:
        for k in ("td_loss", "q_mean"):
            assert math.isfinite(float(r[k])), (k, r[k])
    # lr annealed over max_frames, set before each update: the last update of a row ran at
    # frames - 128; epsilon 1 -> 0.01 over 20% of 512 frames, so it is at 0.01 by then.
    assert float(rows[0]["lr"]) == pytest.approx(1e-3 * (1 - 128 / 512))
    assert float(rows[1]["lr"]) == pytest.approx(1e-3 * (1 - 384 / 512))
    assert float(rows[1]["epsilon"]) == pytest.approx(0.01)
    saved = json.loads((run / "config.json").read_text())
    assert saved["algo"] == "pqn" and saved["q_lambda"] == 0.9
    ckpt = load_latest(run)
    assert ckpt.frames == 512 and ckpt.algo == "pqn"
    assert ckpt.state["counters"]["updates"] == 4
    net = make_pqn_network(cfg, (4,), 2)
    net.load_state_dict(ckpt.state["net"])
    # rapidrl eval plays the greedy policy of the run's newest checkpoint.
    r = evaluate(EvalConfig(str(run), episodes=2))
    assert r["algo"] == "pqn" and r["frames"] == 512 and len(r["scores"]) == 2


def test_frame_stack_reaches_the_env_the_network_and_eval(tmp_path):
    """``--frame-stack 2``: the options carry it (and only then: a default run's options are
    unchanged), observations are [2, H, W], the network takes 2 channels (a 4-channel one would
    not load the weights), and ``rapidrl eval`` rebuilds the 2-frame env from config.json."""
    from rapidrl.train.loop import env_options

    cfg = dataclasses.replace(
        PRESETS["fast"], num_envs=2, backend="serial", obs_size=42, torso="small",
        frame_stack=2, precision="fp32", num_steps=16, minibatches=2, epochs=1,
        max_frames=512, run_dir=str(tmp_path / "pong"), **QUIET,
    )  # fmt: skip
    assert env_options(cfg, True)["frame_stack"] == 2
    assert "frame_stack" not in env_options(PRESETS["fast"], True)
    assert train(cfg)["updates"] == 4
    assert json.loads((tmp_path / "pong" / "config.json").read_text())["frame_stack"] == 2
    state = load_latest(tmp_path / "pong").state["net"]
    make_pqn_network(cfg, (2, 42, 42), 6).load_state_dict(state)
    with pytest.raises(RuntimeError, match="size mismatch"):
        make_pqn_network(cfg, (4, 42, 42), 6).load_state_dict(state)
    r = evaluate(EvalConfig(str(tmp_path / "pong"), episodes=1, max_steps=20))
    assert r["lengths"] == [20]


def test_lean_preset_runs_on_pong(tmp_path):
    """The lean preset's Atari path as it is (52x52, two frames, the Nature CNN channels-last),
    only fewer envs and frames: observations [2, 52, 52] reach a network that takes them."""
    cfg = dataclasses.replace(
        PRESETS["lean"], num_envs=2, backend="serial", precision="fp32", minibatches=2,
        max_frames=256, run_dir=str(tmp_path / "pong"), **QUIET,
    )  # fmt: skip
    assert train(cfg)["updates"] == 2  # 2 x 2 envs x 16 steps x frame skip 4
    make_pqn_network(cfg, (2, 52, 52), 6).load_state_dict(
        load_latest(tmp_path / "pong").state["net"]
    )


@pytest.mark.parametrize("channels_last", [False, True])
def test_tiny_pong_run(tmp_path, channels_last):
    """The Atari path: frame stacks resized to 42x42, the small conv torso with LayerNorm, in
    both layouts."""
    run = tmp_path / "pong"
    cfg = dataclasses.replace(
        PRESETS["fast"],
        num_envs=2,
        backend="serial",
        obs_size=42,
        torso="small",
        channels_last=channels_last,
        precision="fp32",
        num_steps=32,
        minibatches=2,
        epochs=1,
        max_frames=2_048,  # 8 updates of 2 x 32 agent steps x frame skip 4
        log_every_frames=1_024,
        run_dir=str(run),
        **QUIET,
    )
    s = train(cfg)
    assert s["frames"] == 2_048 and s["steps"] == 512 and s["updates"] == 8
    _, rows = rows_of(run)
    assert [int(r["frames"]) for r in rows] == [1_024, 2_048]
    assert all(math.isfinite(float(r["td_loss"])) for r in rows)
    net = make_pqn_network(cfg, (4, 42, 42), 6)
    net.load_state_dict(load_latest(run).state["net"])
    r = evaluate(EvalConfig(str(run), episodes=1, max_steps=40))
    assert r["algo"] == "pqn" and r["lengths"] == [40]


# --------------------------------------------------------------------------------------------
# Schedules, time limits, first-ready vector envs
# --------------------------------------------------------------------------------------------
def test_schedules():
    cfg = dataclasses.replace(PRESETS["pqn"], max_frames=1_000, start_e=1.0, end_e=0.1)
    assert epsilon_at(cfg, 0) == 1.0 and epsilon_at(cfg, 50) == pytest.approx(0.55)
    assert epsilon_at(cfg, 100) == epsilon_at(cfg, 10**9) == 0.1
    assert lr_at(cfg, 0) == cfg.lr and lr_at(cfg, 500) == pytest.approx(cfg.lr / 2)
    assert lr_at(cfg, 2_000) == 0.0
    longer = dataclasses.replace(cfg, schedule_frames=10_000)
    assert epsilon_at(longer, 500) == pytest.approx(0.55)
    assert lr_at(dataclasses.replace(cfg, anneal_lr=False), 900) == cfg.lr
    # A second decay, end_e -> final_e from 10% to 30% of the schedule, then flat.
    two = dataclasses.replace(cfg, final_e=0.01, final_e_fraction=0.3)
    assert epsilon_at(two, 50) == pytest.approx(0.55) and epsilon_at(two, 100) == 0.1
    assert epsilon_at(two, 200) == pytest.approx(0.055)
    assert epsilon_at(two, 300) == epsilon_at(two, 10**9) == 0.01
    assert epsilon_at(dataclasses.replace(two, final_e_fraction=0.1), 100) == 0.01
    # Lambda: q_lambda throughout, or start_q_lambda -> q_lambda over q_lambda_fraction.
    assert q_lambda_at(cfg, 0) == q_lambda_at(cfg, 10**9) == cfg.q_lambda
    lam = dataclasses.replace(cfg, start_q_lambda=0.9, q_lambda=0.5, q_lambda_fraction=0.2)
    assert q_lambda_at(lam, 0) == 0.9 and q_lambda_at(lam, 100) == pytest.approx(0.7)
    assert q_lambda_at(lam, 200) == q_lambda_at(lam, 10**9) == 0.5


def test_trainer_uses_the_lambda_schedule(tmp_path):
    """The targets follow q_lambda_at, not q_lambda: with a schedule that stays at its start (a
    vast schedule_frames), a run equals one with that lambda fixed, and differs from one with
    the end value (epsilon stays ~1 and the lr is constant in all of them)."""

    def td_losses(name, **kw):
        cfg = dataclasses.replace(
            SMALL, max_frames=256, log_every_frames=128, anneal_lr=False,
            schedule_frames=10**15, run_dir=str(tmp_path / name), **kw,
        )  # fmt: skip
        train(cfg)
        return [r["td_loss"] for r in rows_of(tmp_path / name)[1]]

    fixed = td_losses("fixed", q_lambda=0.9)
    assert td_losses("sched", start_q_lambda=0.9, q_lambda=0.0, q_lambda_fraction=1.0) == fixed
    assert td_losses("end", q_lambda=0.0) != fixed


class ConstantRewardEnv(gym.Env):
    """Reward 1 every step, a constant observation, never terminates: only the time limit ends an
    episode. With the limit bootstrapped Q = 1 / (1 - gamma) for every action; without, the
    targets would fall towards 1 near the limit."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.ones(2, np.float32), {}

    def step(self, action):
        return np.ones(2, np.float32), 1.0, False, False, {}


CONSTANT_ENV = "rapidrl-test/PQNConstantReward-v0"
if CONSTANT_ENV not in gym.registry:
    gym.register(CONSTANT_ENV, entry_point=ConstantRewardEnv, max_episode_steps=8)


def test_time_limit_bootstraps_to_the_infinite_horizon_value(tmp_path):
    gamma = 0.8  # Q = 5
    cfg = dataclasses.replace(
        SMALL,
        env=CONSTANT_ENV,
        num_envs=2,
        num_steps=20,
        minibatches=1,
        epochs=4,
        lr=1e-2,
        anneal_lr=False,
        gamma=gamma,
        reward_scale=1.0,
        max_frames=3_000,
        stop_at_score=None,
        run_dir=str(tmp_path / "c"),
    )
    train(cfg)
    net = make_pqn_network(cfg, (2,), 2)
    net.load_state_dict(load_latest(tmp_path / "c").state["net"])
    with torch.no_grad():
        q = net(torch.ones(1, 2))
    # Treated as an end, the time limit would give targets between 1 and 4.2 (mean ~3.4).
    assert (q - 1 / (1 - gamma)).abs().max() < 0.5, q


def test_first_ready_vector_env_gives_the_serial_run(tmp_path):
    """backend async returns batches of 2 of 4 envs: stepped batch by batch until every env has
    stepped, the run is the serial run, bit for bit (same envs, seeds and actions)."""
    cfg = dataclasses.replace(SMALL, max_frames=128 * 3)
    serial = train(dataclasses.replace(cfg, run_dir=str(tmp_path / "s")))
    first_ready = train(
        dataclasses.replace(cfg, backend="async", num_workers=2, run_dir=str(tmp_path / "a"))
    )
    assert multiprocessing.active_children() == []
    assert serial["episodes"] == first_ready["episodes"] > 0
    ck = "checkpoints/ckpt-000000000384.pt"
    a, b = ckpt_payload(tmp_path / "s" / ck), ckpt_payload(tmp_path / "a" / ck)
    assert_same(a["state"]["net"], b["state"]["net"])
    assert_same(a["state"]["tracker"], b["state"]["tracker"])


# --------------------------------------------------------------------------------------------
# Resume
# --------------------------------------------------------------------------------------------
RESUME_CFG = dataclasses.replace(
    SMALL,
    max_frames=128 * 6,
    checkpoint_every_frames=128 * 3,
    log_every_frames=128,
    keep_checkpoints=4,
)


def test_resume_equals_uninterrupted_up_to_the_checkpoint(tmp_path):
    full, part, twin = tmp_path / "full", tmp_path / "part", tmp_path / "twin"
    train(dataclasses.replace(RESUME_CFG, run_dir=str(full)))
    s1 = train(dataclasses.replace(RESUME_CFG, run_dir=str(part), max_frames=128 * 3))
    assert s1["frames"] == 384 and s1["updates"] == 3
    # The stopped run's checkpoint is the uninterrupted run's at the same frame, bit for bit:
    # weights, RAdam state, counters, tracker, every RNG and generator.
    ck = "checkpoints/ckpt-000000000384.pt"
    assert_same(ckpt_payload(full / ck), ckpt_payload(part / ck))
    # Resuming the same checkpoint twice gives the same run.
    shutil.copytree(part, twin)
    for d in (part, twin):
        s2 = train(dataclasses.replace(RESUME_CFG, resume=str(d)))
        assert s2["frames"] == 768 and s2["updates"] == 6
    end = "checkpoints/ckpt-000000000768.pt"
    assert_same(ckpt_payload(part / end), ckpt_payload(twin / end))
    _, rows_full = rows_of(full)
    _, rows_part = rows_of(part)
    _, rows_twin = rows_of(twin)
    assert [int(r["frames"]) for r in rows_part] == list(range(128, 769, 128))  # no duplicates
    assert strip_time(rows_part) == strip_time(rows_twin)
    assert strip_time(rows_full[:3]) == strip_time(rows_part[:3])


def test_resume_refuses_changed_learning_settings(tmp_path):
    from rapidrl.train import CheckpointError

    run = tmp_path / "r"
    train(dataclasses.replace(RESUME_CFG, run_dir=str(run), max_frames=128))
    with pytest.raises(CheckpointError, match="q_lambda"):
        train(dataclasses.replace(RESUME_CFG, resume=str(run), q_lambda=0.5))
    # The backend may change: the same envs either way.
    s = train(dataclasses.replace(RESUME_CFG, resume=str(run), backend="hybrid", max_frames=256))
    assert s["frames"] == 256


# --------------------------------------------------------------------------------------------
# Config, command line, eval
# --------------------------------------------------------------------------------------------
def test_presets_validate_and_document_every_field():
    for cfg in PRESETS.values():
        cfg.validate()
    p = PRESETS["pqn"]
    assert (p.num_envs, p.num_steps, p.minibatches, p.epochs) == (128, 32, 32, 2)
    assert (p.lr, p.anneal_lr, p.gamma, p.q_lambda, p.max_grad_norm) == (
        2.5e-4, True, 0.99, 0.65, 10.0,
    )  # fmt: skip
    assert (p.start_e, p.end_e, p.exploration_fraction, p.max_frames) == (
        1.0, 0.01, 0.10, 40_000_000,
    )  # fmt: skip
    assert (p.torso, p.obs_size) == ("nature", 84)
    f = PRESETS["fast"]
    assert (f.num_envs, f.num_steps, f.obs_size) == (32, 32, 64)
    # The preset's comment states its epsilon schedule in frames: 0.01 at 1M, 0.001 from 6M.
    assert epsilon_at(f, 1_000_000) == pytest.approx(0.01)
    assert epsilon_at(f, 6_000_000) == epsilon_at(f, 40_000_000) == pytest.approx(0.001)
    assert lr_at(f, 20_000_000) == pytest.approx(f.lr / 2)  # annealed over the 40M frames
    assert f.rollout_steps // f.minibatches == p.rollout_steps // p.minibatches  # minibatch 128
    assert PQNConfig() == p  # the dataclass defaults are the paper's settings
    # lean is fast with the four changes its comment measures, and nothing else.
    lean = PRESETS["lean"]
    assert (lean.num_envs, lean.num_steps, lean.obs_size, lean.frame_stack) == (64, 16, 52, 2)
    assert lean.rollout_steps == f.rollout_steps and lean.minibatches == f.minibatches
    assert q_lambda_at(lean, 0) == pytest.approx(0.9)
    assert q_lambda_at(lean, 4_000_000) == q_lambda_at(lean, 40_000_000) == pytest.approx(0.65)
    changed = {
        fld.name
        for fld in dataclasses.fields(PQNConfig)
        if getattr(lean, fld.name) != getattr(f, fld.name)
    }
    assert changed == {"num_envs", "num_steps", "obs_size", "frame_stack", "start_q_lambda"}
    # The class and its base (TrainerConfig: the fields every trainer shares).
    lines = [ln for cls in PQNConfig.__mro__[:-1] for ln in inspect.getsource(cls).splitlines()]
    for fld in dataclasses.fields(PQNConfig):
        i = next(i for i, ln in enumerate(lines) if ln.strip().startswith(f"{fld.name}:"))
        assert lines[i + 1].strip().startswith('"""'), fld.name


def test_help_lists_every_field(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["train", "pqn", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for fld in dataclasses.fields(PQNConfig):
        if fld.name != "algo":
            assert f"--{fld.name.replace('_', '-')}" in out, fld.name
    assert "presets: cartpole, fast, lean, pqn" in out
    cli.main(["--help"])
    assert "train pqn" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--preset", "fsat"], "did you mean 'fast'"),
        (["--num-envs", "2", "--num-steps", "4", "--minibatches", "9"], "exceeds the rollout"),
        (["--q-lambda", "1.5"], "--q-lambda must be in [0, 1]"),
        (["--end-e", "-0.1"], "--end-e must be in [0, 1]"),
        (["--exploration-fraction", "2"], "--exploration-fraction must be in [0, 1]"),
        (["--reward-scale", "0"], "--reward-scale must be > 0"),
        (["--lr", "0"], "--lr must be > 0"),
        (["--max-grad-norm", "0"], "--max-grad-norm must be > 0"),
        (["--schedule-frames", "0"], "--schedule-frames must be >= 1"),
        (["--obs-size", "32"], "use --torso small"),
        (["--frame-stack", "0"], "--frame-stack must be an int >= 1"),
        (["--backend", "serial", "--num-workers", "2"], "drop --num-workers"),
        (["--env", "pongg"], "did you mean"),
        (["--resume", "/nonexistent/run"], "no config.json"),
    ],
)
def test_bad_input_gives_a_clear_error(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "pqn", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_validate_names_the_field():
    from rapidrl.config import ConfigError

    with pytest.raises(ConfigError, match="--epochs must be an int >= 1"):
        dataclasses.replace(PRESETS["pqn"], epochs=0).validate()
    with pytest.raises(ConfigError, match="--resume .* disagree"):
        dataclasses.replace(PRESETS["pqn"], resume="a", run_dir="b").validate()
    with pytest.raises(ConfigError, match="--final-e-fraction .* must be >= --exploration"):
        dataclasses.replace(PRESETS["pqn"], final_e=0.001, final_e_fraction=0.05).validate()
    with pytest.raises(ConfigError, match="--final-e must be in"):
        dataclasses.replace(PRESETS["pqn"], final_e=1.5).validate()
    with pytest.raises(ConfigError, match="--start-q-lambda must be in"):
        dataclasses.replace(PRESETS["pqn"], start_q_lambda=-0.1).validate()
    with pytest.raises(ConfigError, match="--q-lambda-fraction must be in"):
        dataclasses.replace(PRESETS["pqn"], q_lambda_fraction=1.5).validate()


def test_cli_train_resume_eval(tmp_path, capsys):
    run = str(tmp_path / "c")
    common = ["--preset", "cartpole", "--num-envs", "4", "--num-steps", "32", "--no-progress"]
    common += ["--torch-threads", "1", "--no-tensorboard", "--log-every-frames", "128"]
    assert cli.main(["train", "pqn", *common, "--max-frames", "128", "--run-dir", run]) == 0
    assert "max_frames: 128 frames" in capsys.readouterr().out
    assert cli.main(["train", "pqn", "--resume", run, "--max-frames", "256"]) == 0
    assert json.loads(open(os.path.join(run, "summary.json")).read())["frames"] == 256
    saved = json.loads(open(os.path.join(run, "config.json")).read())
    assert saved["reward_scale"] == 0.1 and saved["max_frames"] == 256  # cartpole, resumed
    # A fresh process: `rapidrl eval` finds the PQN loader without anything importing PQN first.
    out = subprocess.run(
        [sys.executable, "-m", "rapidrl.cli", "eval", run, "--episodes", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "pqn CartPole-v1" in out.stdout and "mean score" in out.stdout


# --------------------------------------------------------------------------------------------
# Learning (slow stage)
# --------------------------------------------------------------------------------------------
# The cartpole preset (torch_threads 1, serial envs: the run is deterministic for a seed): seeds
# 1-4 reached a mean-100 return > 475 after 113k-137k frames; seed 1 after 131,584. The bar is
# CartPole-v1's own threshold (the auto stop score); the budget, 200k frames, bounds the run.
# The schedules span the preset's 500k frames, as measured.
@pytest.mark.slow
def test_pqn_learns_cartpole(tmp_path):
    cfg = dataclasses.replace(
        PRESETS["cartpole"],
        seed=1,
        max_frames=200_000,
        schedule_frames=500_000,
        run_dir=str(tmp_path / "cp"),
        log_every_frames=20_480,
        **QUIET,
    )
    s = train(cfg)
    assert s["solved"], s
    assert s["frames"] < cfg.max_frames and s["return_mean_100"] > 475
    # How fast (in seconds) it gets there is a benchmark's figure, not this test's:
    # rapidrl bench solve --algo pqn --preset cartpole --env CartPole-v1 --seeds 1,2,3
