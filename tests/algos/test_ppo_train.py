"""The PPO / PPO-LSTM trainer end to end: short real Pong runs, ragged-rollout GAE, loop == packed
updates, truncation bootstrapping, async rollouts, exact resume, config and CLI, eval, and (slow)
learning CartPole and the memory task CartPole-without-velocities."""

from __future__ import annotations

import copy
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
from rapidrl.algos.ppo.config import PRESETS, PPOConfig
from rapidrl.algos.ppo.gae import gae
from rapidrl.algos.ppo.learner import (
    TrainBatch,
    adapt_lr,
    ent_coef_at,
    make_policy,
    rollout_advantages,
    update_policy,
)
from rapidrl.algos.ppo.train import LSTM_PRESETS, train
from rapidrl.envs.memory import CARTPOLE_NO_VEL, MemoryEnvFactory
from rapidrl.nets.compiled import cpp_compiler
from rapidrl.nets.recurrent import RecurrentActorCritic
from rapidrl.train import config_from_dict, load_latest, read_metrics
from rapidrl.train.testing import assert_same
from rapidrl.train.testing import rollout_ckpt_payload as ckpt_payload

COLUMNS = ("frames", "seconds", "fps", "episodes", "return_mean_100", "policy_loss")
COLUMNS += ("value_loss", "entropy", "approx_kl", "clipfrac", "explained_variance", "lr")
COLUMNS += ("ent_coef",)
COLUMNS += ("steps", "updates", "grad_steps", "rollout_s", "update_s")
LOSSES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")
QUIET = dict(
    log_every_seconds=0,
    checkpoint_every_seconds=1e9,
    no_progress=True,
    tensorboard=False,
    torch_threads=1,  # the test machine is shared: contended OpenMP threads stall
)


# Two updates of 2 envs x 16 agent steps (x frame skip 4 = 256 frames) in this process.
TINY_PONG = dict(
    num_envs=2,
    num_steps=16,
    minibatches=2,
    epochs=2,
    backend="serial",
    max_frames=256,
    log_every_frames=128,
    seed=3,
    **QUIET,
)


def rows_of(run_dir):
    return read_metrics(os.path.join(run_dir, "metrics.csv"))


def strip_time(rows):
    drop = ("seconds", "fps", "rollout_s", "update_s")
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


# --------------------------------------------------------------------------------------------
# Short real runs on Pong
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["ppo", "ppo-lstm"])
def test_short_pong_run(tmp_path, preset):
    run = tmp_path / preset
    cfg = dataclasses.replace(
        LSTM_PRESETS[preset] if preset == "ppo-lstm" else PRESETS[preset],
        run_dir=str(run),
        **TINY_PONG,
    )
    summary = train(cfg)
    assert summary["frames"] == 256 and summary["stop_reason"] == "max_frames"
    assert summary["updates"] == 2 and summary["grad_steps"] == 8
    assert summary["recurrent"] == (preset == "ppo-lstm") and summary["algo"] == "ppo"
    for name in ("config.json", "metrics.csv", "summary.json", "learning_curve.png"):
        assert (run / name).exists(), name
    header, rows = rows_of(run)
    for col in COLUMNS:
        assert col in header, col
    assert [int(r["frames"]) for r in rows] == [128, 256]
    for r in rows:
        for k in LOSSES:
            assert math.isfinite(float(r[k])), (k, r[k])
    assert float(rows[0]["lr"]) == pytest.approx(2.5e-4)  # annealed: full lr at frame 0
    assert float(rows[1]["lr"]) == pytest.approx(2.5e-4 * (1 - 128 / 256))
    saved = json.loads((run / "config.json").read_text())
    assert saved["algo"] == "ppo" and saved["recurrent"] == (preset == "ppo-lstm")
    ckpt = load_latest(run)
    assert ckpt.frames == 256 and ckpt.algo == "ppo"
    net = make_policy(cfg, (4, 84, 84), 6)
    net.load_state_dict(ckpt.state["net"])
    assert isinstance(net, RecurrentActorCritic) == (preset == "ppo-lstm")
    assert ckpt.state["counters"]["updates"] == 2


@pytest.mark.parametrize("recurrent", [False, True])
def test_obs_and_value_norm_run_keeps_its_statistics_and_resumes_exactly(tmp_path, recurrent):
    """--obs-norm --value-norm on Pong at 52x52 with two frames, feed-forward and PPO-LSTM: the
    statistics hold exactly the steps seen, travel in the checkpoint (a stopped and resumed run
    equals the uninterrupted one, statistics included) and drive the policy `rapidrl eval`
    loads."""
    from rapidrl.algos.ppo.train import RecurrentPolicy, eval_policy

    cfg = dataclasses.replace(
        PRESETS["fast"],
        recurrent=recurrent,
        lstm_hidden=16,
        obs_size=52,
        frame_stack=2,
        obs_norm=True,
        value_norm=True,
        precision="fp32",
        checkpoint_every_frames=128,
        keep_checkpoints=4,
        **TINY_PONG,
    )
    full, part, twin = tmp_path / "full", tmp_path / "part", tmp_path / "twin"
    train(dataclasses.replace(cfg, run_dir=str(full)))
    train(dataclasses.replace(cfg, run_dir=str(part), max_frames=128))
    ck = "checkpoints/ckpt-000000000128.pt"
    assert_same(ckpt_payload(full / ck), ckpt_payload(part / ck))
    # Resume restarts the envs, so the resumed run is compared with a second resume of the
    # same checkpoint: the statistics come back from it exactly.
    shutil.copytree(part, twin)
    for d in (part, twin):
        assert train(dataclasses.replace(cfg, resume=str(d)))["frames"] == 256
    end = "checkpoints/ckpt-000000000256.pt"
    assert_same(ckpt_payload(part / end), ckpt_payload(twin / end))
    net_state = load_latest(part).state["net"]
    # 2 updates x 32 agent steps, each merged once (plus the prior's count of 1e-4): the
    # resumed run went on from the saved statistics.
    assert float(net_state["obs_rms.count"]) == pytest.approx(64, abs=1e-3)
    assert float(net_state["value_rms.count"]) == pytest.approx(64, abs=1e-3)
    mean = net_state["obs_rms.mean"]
    assert mean.shape == (2, 52, 52) and 0 < float(mean.mean()) < 255
    assert ("lstm.weight_hh_l0" in net_state) == recurrent
    config = json.loads((full / "config.json").read_text())
    act, _, _ = eval_policy(config, load_latest(full, read_only=True))
    assert isinstance(act, RecurrentPolicy) == recurrent
    frames = np.random.default_rng(0).integers(0, 256, (3, 2, 52, 52), dtype=np.uint8)
    assert act(frames).shape == (3,)


def test_the_default_ppo_command_runs_lean_with_these_exact_fields(monkeypatch):
    """`rapidrl train ppo` with no --preset is lean (the Atari suite's recipe), field for field;
    bench solve, bench atari and sweep take the same default."""
    from rapidrl.algos import DEFAULT_PRESETS
    from rapidrl.algos.ppo.train import main_ppo, parse_ppo_args
    from rapidrl.bench.atari import BenchAtariConfig
    from rapidrl.sweep.spec import parse_spec

    assert DEFAULT_PRESETS["ppo"] == "lean"
    cfg = parse_ppo_args([], "rapidrl train ppo", DEFAULT_PRESETS["ppo"])
    assert cfg == PRESETS["lean"]
    expected = {
        "env": "pong", "num_envs": 64, "num_steps": 128, "minibatches": 4, "epochs": 3,
        "obs_size": 52, "frame_stack": 2, "torso": "nature", "torso_channels": (32, 64, 64),
        "torso_dim": None, "lr": 3e-4, "anneal_lr": False,
        "kl_adaptive_lr": 0.01, "clip": 0.2, "clip_vloss": False, "ent_coef": 0.01,
        "vf_coef": 2.0, "gamma": 0.99, "gae_lambda": 0.95, "max_grad_norm": 1.0,
        "obs_norm": True, "value_norm": True, "recurrent": False, "backend": "auto",
        "precision": "auto", "channels_last": True, "fused_adam": True,
        "max_frames": 30_000_000,
    }  # fmt: skip
    assert {k: getattr(cfg, k) for k in expected} == expected
    ran = []  # what `rapidrl train ppo` would train, stopped before it starts
    monkeypatch.setattr(sys.modules["rapidrl.algos.ppo.train"], "run_from_cli",
                        lambda fn, cfg, *a: ran.append(cfg) or 0)  # fmt: skip
    assert main_ppo(["--env", "breakout"]) == 0
    assert ran == [dataclasses.replace(PRESETS["lean"], env="breakout")]
    assert BenchAtariConfig(games="pong").algo_list() == [("ppo", "lean")]
    assert (
        parse_spec(
            {"algo": "ppo", "space": {"lr": {"loguniform": [1e-4, 1e-3]}}, "budget": {"trials": 2}}
        ).preset
        == "lean"
    )


def test_lean_preset_is_fast_with_the_recipe_and_runs_on_pong(tmp_path):
    """lean changes exactly the fields its comment measures; its Atari path as it is (52x52,
    two frames, input and value normalization, the KL-adaptive rate), only smaller."""
    fast, lean = PRESETS["fast"], PRESETS["lean"]
    changed = {
        f.name
        for f in dataclasses.fields(PPOConfig)
        if getattr(lean, f.name) != getattr(fast, f.name)
    }
    assert changed == {
        "num_envs", "num_steps", "epochs", "obs_size", "frame_stack", "lr", "anneal_lr",
        "kl_adaptive_lr", "clip", "clip_vloss", "vf_coef", "max_grad_norm", "obs_norm",
        "value_norm",
    }  # fmt: skip
    assert lean.rollout_steps == 8192 and lean.rollout_steps // lean.minibatches == 2048
    tiny = {**TINY_PONG, "minibatches": lean.minibatches, "epochs": lean.epochs}
    cfg = dataclasses.replace(lean, precision="fp32", run_dir=str(tmp_path / "pong"), **tiny)
    summary = train(cfg)
    assert summary["updates"] == 2 and summary["grad_steps"] == 2 * 3 * 4
    _, rows = rows_of(tmp_path / "pong")
    assert float(rows[0]["lr"]) != 3e-4  # adapted after every minibatch step
    make_policy(cfg, (2, 52, 52), 6).load_state_dict(load_latest(tmp_path / "pong").state["net"])


def test_ppo_lstm_lean_preset_resolves_and_trains(tmp_path, capsys):
    """`rapidrl train ppo-lstm --preset lean` is lean with the LSTM (input and value
    normalization included), 4 epochs and its adaptive rate capped at 1e-3 (B in
    docs/results/pong_ppo_lstm_lean_zen4), and trains: here two updates of a tiny Pong rollout."""
    from rapidrl.algos.ppo.train import parse_ppo_args

    lean = PRESETS["lean"]
    assert LSTM_PRESETS["lean"] == dataclasses.replace(lean, recurrent=True, lr_max=1e-3, epochs=4)
    cfg = parse_ppo_args(["--preset", "lean"], "rapidrl train ppo-lstm", "ppo-lstm", LSTM_PRESETS)
    assert cfg.recurrent and cfg.obs_norm and cfg.value_norm and cfg.kl_adaptive_lr == 0.01
    assert cfg.lr == 3e-4 and cfg.lr_max == 1e-3
    run = tmp_path / "lean"
    tiny = ["--num-envs", "2", "--num-steps", "16", "--backend", "serial", "--max-frames", "256"]
    tiny += ["--minibatches", "2", "--epochs", "2", "--precision", "fp32", "--seed", "3"]
    tiny += ["--torch-threads", "1", "--no-progress", "--no-tensorboard"]
    argv = ["train", "ppo-lstm", "--preset", "lean", *tiny, "--run-dir", str(run)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["recurrent"] and summary["updates"] == 2 and summary["grad_steps"] == 8
    saved = json.loads((run / "config.json").read_text())
    assert saved["recurrent"] and saved["obs_norm"] and saved["value_norm"]
    assert (saved["obs_size"], saved["frame_stack"]) == (52, 2)
    net = make_policy(config_from_dict(PPOConfig, saved), (2, 52, 52), 6)
    net.load_state_dict(load_latest(run).state["net"])
    assert isinstance(net, RecurrentActorCritic)
    assert float(net.obs_rms.count) == pytest.approx(64, abs=1e-3)  # 2 rollouts x 32 steps
    assert float(net.value_rms.count) == pytest.approx(64, abs=1e-3)


def test_value_norm_trains_on_normalized_returns_after_merging_them():
    """normalize_values: the rollout's returns join the statistics first, then its values and
    returns are both put in the critic's normalized scale; a net without it is unchanged."""
    from rapidrl.algos.ppo.learner import normalize_values

    net = make_policy(dataclasses.replace(PRESETS["cartpole"], value_norm=True), (4,), 2)
    returns = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 99.0]])
    valid = torch.tensor([[True, True], [True, True], [True, False]])
    values = returns - 0.5
    batch = TrainBatch(
        *(torch.zeros(3, 2) for _ in range(3)),
        values,
        values,
        returns,
        valid,
        valid,
        torch.tensor([3, 2]),
        None,
    )
    out = normalize_values(net, batch)
    rms = net.value_rms
    assert float(rms.mean) == pytest.approx(3.0, abs=1e-3)  # 99.0 is padding: not merged
    assert float(rms.var) == pytest.approx(2.0, abs=1e-3)
    torch.testing.assert_close(
        out.returns, (returns - rms.mean.float()) / (rms.var + 1e-5).sqrt().float()
    )
    torch.testing.assert_close(
        out.values, (values - rms.mean.float()) / (rms.var + 1e-5).sqrt().float()
    )
    torch.testing.assert_close(out.advantages, batch.advantages)  # GAE's, untouched
    plain = make_policy(PRESETS["cartpole"], (4,), 2)
    assert normalize_values(plain, batch) is batch


# --------------------------------------------------------------------------------------------
# Pieces: ragged-rollout GAE, loop == packed updates
# --------------------------------------------------------------------------------------------
def reference_advantages(rewards, values, term, trunc, trunc_values, lengths, boot, g, lam):
    """Per env, per step, in plain Python: the definition."""
    t_len, n_env = values.shape
    adv = torch.zeros(t_len, n_env, dtype=torch.float64)
    for n in range(n_env):
        length = int(lengths[n])
        last = 0.0
        for t in reversed(range(length)):
            nv = float(values[t + 1, n]) if t < length - 1 else float(boot[n])
            if trunc[t, n]:
                nv = float(trunc_values[t, n])
            done = bool(term[t, n] or trunc[t, n])
            delta = float(rewards[t, n]) + g * (0.0 if term[t, n] else nv) - float(values[t, n])
            last = delta + (0.0 if done else g * lam * last)
            adv[t, n] = last
    return adv


def test_rollout_advantages_of_ragged_envs_match_the_definition():
    g = torch.Generator().manual_seed(0)
    t_len, n_env = 9, 5
    rewards = torch.randn(t_len, n_env, generator=g)
    values = torch.randn(t_len, n_env, generator=g)
    trunc_values = torch.randn(t_len, n_env, generator=g)
    term = torch.rand(t_len, n_env, generator=g) < 0.15
    trunc = (torch.rand(t_len, n_env, generator=g) < 0.15) & ~term
    lengths = torch.tensor([9, 4, 7, 1, 9])
    boot = torch.randn(n_env, generator=g)
    adv, ret, valid = rollout_advantages(
        rewards, values, term, trunc, trunc_values, lengths, boot, 0.97, 0.9
    )
    want = reference_advantages(
        rewards, values, term, trunc, trunc_values, lengths, boot, 0.97, 0.9
    )
    assert valid.sum() == lengths.sum() and not valid[4:, 1].any() and valid[:4, 1].all()
    torch.testing.assert_close(adv[valid].double(), want[valid], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ret[valid], (adv + values)[valid])
    # Equal lengths: exactly the plain GAE of a synchronous rollout with a bootstrap at the end.
    full = torch.full((n_env,), t_len)
    adv2, _, _ = rollout_advantages(
        rewards, values, term, trunc, trunc_values, full, boot, 0.9, 0.8
    )
    next_values = torch.cat([values[1:], boot[None]])
    next_values = torch.where(trunc, trunc_values, next_values)
    ref, _ = gae(rewards, values, next_values, term, trunc, 0.9, 0.8)
    torch.testing.assert_close(adv2, ref)


def synthetic_batch(net, t_len, n_env, *, ragged: bool, seed: int = 0) -> TrainBatch:
    """A rollout with episode starts inside it, old log-probs/values from ``net`` itself; uint8
    frames for a net that normalizes its input, else float observations."""
    g = torch.Generator().manual_seed(seed)
    if getattr(net, "obs_rms", None) is not None:
        obs = torch.randint(0, 256, (t_len, n_env, *net.obs_shape), dtype=torch.uint8, generator=g)
    else:
        obs = torch.randn(t_len, n_env, *net.obs_shape, generator=g)
    starts = torch.rand(t_len, n_env, generator=g) < 0.2
    actions = torch.randint(net.num_actions, (t_len, n_env), generator=g)
    h0 = torch.randn(net.num_layers, n_env, net.hidden_size, generator=g) * 0.5
    state = (h0, torch.randn(h0.shape, generator=g) * 0.5)
    with torch.no_grad():
        old = net.evaluate(obs, starts, state, actions, mode="loop")
    lengths = torch.full((n_env,), t_len)
    if ragged:
        lengths = torch.randint(t_len // 2, t_len + 1, (n_env,), generator=g)
        lengths[0] = t_len
    valid = torch.arange(t_len)[:, None] < lengths[None]
    adv = torch.randn(t_len, n_env, generator=g)
    return TrainBatch(
        obs, actions, old.logprob, old.values, adv, old.values + adv, starts, valid, lengths, state
    )


@pytest.mark.parametrize("ragged", [False, True])
def test_loop_and_packed_updates_match(ragged):
    torch.manual_seed(0)
    net = RecurrentActorCritic((3,), 4, hidden_size=16, sequence_mode="loop")
    batch = synthetic_batch(net, 24, 6, ragged=ragged)
    cfg = PPOConfig(env="CartPole-v1", recurrent=True, num_envs=6, minibatches=3, epochs=3, lr=3e-3)
    results = {}
    for mode in ("loop", "packed", "packed_sequence"):
        m = copy.deepcopy(net)
        m.sequence_mode = mode
        opt = torch.optim.Adam(m.parameters(), lr=cfg.lr, eps=cfg.adam_eps)
        stats = update_policy(m, opt, batch, cfg, torch.Generator().manual_seed(7))
        results[mode] = (stats, m.state_dict())
    ref_stats, ref_params = results["loop"]
    assert ref_stats["grad_steps"] == 9 and ref_stats["approx_kl"] > 0
    for mode in ("packed", "packed_sequence"):
        stats, params = results[mode]
        for k, v in ref_stats.items():
            assert stats[k] == pytest.approx(v, rel=1e-4, abs=1e-6), (mode, k)
        for k in ref_params:
            torch.testing.assert_close(params[k], ref_params[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ragged", [False, True])
def test_loop_and_packed_updates_match_with_input_and_value_normalization(ragged):
    """The learner's recurrent path with --obs-norm --value-norm (statistics merged from the
    rollout, values and returns normalized, frames normalized before the torso) trains the
    same in every sequence mode: two rollouts through PPOLearner.train_on_rollout, fp32."""
    import time

    from rapidrl.algos.ppo.learner import PPOLearner

    shape = (2, 16, 16)
    cfg = PPOConfig(
        env="pong", recurrent=True, lstm_hidden=16, torso="small", precision="fp32",
        num_envs=6, minibatches=3, epochs=2, lr=3e-3, obs_norm=True, value_norm=True,
    )  # fmt: skip

    def learner(**kw):
        torch.manual_seed(0)
        return PPOLearner(dataclasses.replace(cfg, **kw), shape, 4, torch.device("cpu"))

    ref = learner(sequence_mode="loop")
    g = torch.Generator().manual_seed(1)
    seen = torch.randint(0, 200, (64, *shape), dtype=torch.uint8, generator=g)
    ref.net.obs_rms.update(seen)  # a previous rollout's frames: non-trivial statistics
    batch = synthetic_batch(ref.net, 16, 6, ragged=ragged)
    # Returns far from N(0, 1): the value normalization matters.
    batch = batch._replace(returns=batch.returns * 20.0 + 50.0)
    start = copy.deepcopy(ref.net.state_dict())
    results = {}
    for mode in ("loop", "packed", "packed_sequence"):
        lrn = learner(sequence_mode=mode)
        lrn.net.load_state_dict(start)
        for _ in range(2):
            lrn.train_on_rollout(batch, rollout_s=0.0, t_start=time.perf_counter())
        acc = {k: lrn.counters.acc[k] for k in LOSSES}
        results[mode] = (acc, lrn.counters.grad_steps, lrn.net.state_dict())
    ref_acc, ref_steps, ref_params = results["loop"]
    assert ref_steps == 12 and ref_acc["approx_kl"] > 0
    n_valid = int(batch.valid.sum())
    assert float(ref_params["value_rms.count"]) == pytest.approx(2 * n_valid, abs=1e-3)
    assert float(ref_params["obs_rms.count"]) == pytest.approx(64 + 2 * n_valid, abs=1e-3)
    for mode in ("packed", "packed_sequence"):
        acc, steps, params = results[mode]
        assert steps == ref_steps
        for k, v in ref_acc.items():
            assert acc[k] == pytest.approx(v, rel=1e-4, abs=1e-6), (mode, k)
        for k in ref_params:
            torch.testing.assert_close(params[k], ref_params[k], rtol=1e-5, atol=1e-6)
    # The normalizations are in play: without them the same start trains to other weights.
    plain = learner(sequence_mode="packed", obs_norm=False, value_norm=False)
    plain.net.load_state_dict({k: v for k, v in start.items() if "_rms." not in k})
    plain.train_on_rollout(batch, rollout_s=0.0, t_start=time.perf_counter())
    weight = "lstm.weight_hh_l0"
    assert not torch.allclose(plain.net.state_dict()[weight], ref_params[weight], atol=1e-4)


# --------------------------------------------------------------------------------------------
# Truncation: a time limit bootstraps (feed-forward and LSTM)
# --------------------------------------------------------------------------------------------
class ConstantRewardEnv(gym.Env):
    """Reward 1 every step, a constant observation, never terminates: only the time limit ends an
    episode. With the limit bootstrapped V = 1 / (1 - gamma) at every step; without, V would
    fall towards 1 near the limit."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.ones(2, np.float32), {}

    def step(self, action):
        return np.ones(2, np.float32), 1.0, False, False, {}


CONSTANT_ENV = "rapidrl-test/ConstantReward-v0"
if CONSTANT_ENV not in gym.registry:
    gym.register(CONSTANT_ENV, entry_point=ConstantRewardEnv, max_episode_steps=8)


@pytest.mark.parametrize("recurrent", [False, True])
def test_time_limit_bootstraps_to_the_infinite_horizon_value(tmp_path, recurrent):
    gamma = 0.8  # V = 5
    cfg = PPOConfig(
        env=CONSTANT_ENV,
        recurrent=recurrent,
        lstm_hidden=16,
        num_envs=2,
        backend="serial",
        num_steps=20,
        minibatches=1,
        epochs=4,
        lr=1e-2,
        anneal_lr=False,
        gamma=gamma,
        gae_lambda=0.9,
        clip_vloss=False,
        max_frames=3_000,
        stop_at_score=None,
        run_dir=str(tmp_path / "c"),
        **QUIET,
    )
    train(cfg)
    net = make_policy(cfg, (2,), 2)
    net.load_state_dict(load_latest(tmp_path / "c").state["net"])
    obs = torch.ones(8, 1, 2)
    with torch.no_grad():
        if recurrent:  # every step of one episode, the LSTM state running through it
            starts = torch.zeros(8, 1, dtype=torch.bool)
            starts[0] = True
            values = net(obs, starts, net.initial_state(1)).values.flatten()
        else:
            values = net.value(obs[:, 0])
    # Without the bootstrap the last step's value would be 1 (its reward alone), the first ~4.2.
    assert abs(float(values[-1]) - 1 / (1 - gamma)) < 0.5, values
    assert float(values.min()) > 4.0, values


# --------------------------------------------------------------------------------------------
# Memory env and asynchronous rollouts
# --------------------------------------------------------------------------------------------
def test_cartpole_no_vel_hides_the_velocities():
    env = gym.make(CARTPOLE_NO_VEL)
    full = gym.make("CartPole-v1")
    assert env.observation_space.shape == (2,) and env.spec.max_episode_steps == 500
    o, _ = env.reset(seed=5)
    f, _ = full.reset(seed=5)
    for a in (0, 1, 1, 0, 1):
        np.testing.assert_allclose(o, [f[0] / 2.4, f[2] / (12 * 2 * math.pi / 360)], rtol=1e-6)
        o, *_ = env.step(a)
        f, *_ = full.step(a)
    assert MemoryEnvFactory(CARTPOLE_NO_VEL)().observation_space.shape == (2,)


@pytest.mark.parametrize("recurrent", [False, True])
def test_async_vector_env_rollouts(tmp_path, recurrent):
    """First-ready batches of 2 of 4 envs in 2 worker processes; the memory env is built in the
    workers through its factory. Every update trains on exactly num_steps x num_envs steps."""
    cfg = PPOConfig(
        env=CARTPOLE_NO_VEL,
        recurrent=recurrent,
        lstm_hidden=16,
        num_envs=4,
        backend="async",
        num_workers=2,
        env_batch_size=2,
        num_steps=16,
        minibatches=2,
        epochs=2,
        max_frames=64 * 6,
        log_every_frames=64,
        run_dir=str(tmp_path / "a"),
        **QUIET,
    )
    s = train(cfg)
    assert s["steps"] == 64 * 6 and s["updates"] == 6 and s["episodes"] > 0
    _, rows = rows_of(tmp_path / "a")
    assert [int(r["steps"]) for r in rows] == [64 * k for k in range(1, 7)]
    assert all(math.isfinite(float(r[k])) for r in rows for k in LOSSES)
    assert multiprocessing.active_children() == []


# --------------------------------------------------------------------------------------------
# Resume
# --------------------------------------------------------------------------------------------
RESUME_CFG = PPOConfig(
    env=CARTPOLE_NO_VEL,
    recurrent=True,
    lstm_hidden=16,
    num_envs=4,
    backend="serial",
    num_steps=32,
    minibatches=2,
    epochs=2,
    lr=1e-3,
    lr_anneal_frames=100_000,  # the schedule does not depend on where a session stops
    max_frames=128 * 6,
    checkpoint_every_frames=128 * 3,
    log_every_frames=128,
    keep_checkpoints=4,
    **QUIET,
)


def test_resume_equals_uninterrupted_up_to_the_checkpoint(tmp_path):
    full, part, twin = tmp_path / "full", tmp_path / "part", tmp_path / "twin"
    train(dataclasses.replace(RESUME_CFG, run_dir=str(full)))
    s1 = train(dataclasses.replace(RESUME_CFG, run_dir=str(part), max_frames=128 * 3))
    assert s1["frames"] == 384 and s1["updates"] == 3
    # The stopped run's checkpoint is the uninterrupted run's at the same frame, bit for bit:
    # weights, Adam moments, counters, tracker, every RNG and generator.
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


@pytest.mark.slow  # three compiles (the first cold, ~10-20 s on 2 cores)
@pytest.mark.skipif(cpp_compiler() is None, reason="torch.compile on CPU needs a C++ compiler")
def test_compiled_run_stops_and_resumes_exactly_and_saves_the_eager_net(tmp_path):
    tiny = {**TINY_PONG, "max_frames": 512, "checkpoint_every_frames": 256}
    cfg = dataclasses.replace(PRESETS["lean"], precision="fp32", compile=True, **tiny)
    full, part, twin = tmp_path / "full", tmp_path / "part", tmp_path / "twin"
    train(dataclasses.replace(cfg, run_dir=str(full)))
    train(dataclasses.replace(cfg, run_dir=str(part), max_frames=256))
    ck = "checkpoints/ckpt-000000000256.pt"  # the stopped run's = the uninterrupted run's
    assert_same(ckpt_payload(full / ck), ckpt_payload(part / ck))
    shutil.copytree(part, twin)  # resuming the same checkpoint twice gives the same run
    for d in (part, twin):
        assert train(dataclasses.replace(cfg, resume=str(d)))["frames"] == 512
    end = "checkpoints/ckpt-000000000512.pt"
    assert_same(ckpt_payload(part / end), ckpt_payload(twin / end))
    assert strip_time(rows_of(part)[1]) == strip_time(rows_of(twin)[1])
    make_policy(cfg, (2, 52, 52), 6).load_state_dict(load_latest(full).state["net"])


def test_kl_adaptive_rate_follows_the_minibatch_kl():
    cfg = dataclasses.replace(
        PRESETS["cartpole"], anneal_lr=False, kl_adaptive_lr=0.01, lr=1e-3, lr_min=1e-4, lr_max=2e-3
    )
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=cfg.lr)
    assert adapt_lr(opt, cfg, 0.01) == pytest.approx(1e-3)  # within [target / 2, 2 target]
    assert adapt_lr(opt, cfg, 0.021) == pytest.approx(1e-3 / 1.5)  # above 2 x target: down
    assert adapt_lr(opt, cfg, 0.004) == pytest.approx(1e-3)  # below target / 2: up
    for _ in range(10):
        adapt_lr(opt, cfg, 0.0)
    assert opt.param_groups[0]["lr"] == pytest.approx(2e-3)  # clamped to lr_max
    for _ in range(40):
        adapt_lr(opt, cfg, 1.0)
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-4)  # clamped to lr_min
    off = dataclasses.replace(cfg, kl_adaptive_lr=None)
    assert adapt_lr(opt, off, 1.0) == pytest.approx(1e-4)  # off: unchanged


def test_kl_adaptive_run_moves_the_rate_and_resumes_exactly(tmp_path):
    """The adaptive rate lives in the optimizer's state: the metrics show it moving, and a
    stopped run's checkpoint equals the uninterrupted run's, the rate included."""
    cfg = dataclasses.replace(
        RESUME_CFG, recurrent=False, env="CartPole-v1", anneal_lr=False, kl_adaptive_lr=0.002
    )
    full, part = tmp_path / "full", tmp_path / "part"
    train(dataclasses.replace(cfg, run_dir=str(full)))
    train(dataclasses.replace(cfg, run_dir=str(part), max_frames=128 * 3))
    ck = "checkpoints/ckpt-000000000384.pt"
    assert_same(ckpt_payload(full / ck), ckpt_payload(part / ck))
    saved = ckpt_payload(part / ck)["state"]["optim"]["param_groups"][0]["lr"]
    assert saved != cfg.lr  # the moved rate is what the checkpoint holds
    s = train(dataclasses.replace(cfg, resume=str(part)))
    assert s["frames"] == 768
    _, resumed = rows_of(part)
    assert float(resumed[3]["lr"]) != cfg.lr  # the resumed run goes on from it, not from --lr
    _, rows = rows_of(full)
    rates = [float(r["lr"]) for r in rows]
    assert len(set(rates)) > 1 and all(cfg.lr_min <= r <= cfg.lr_max for r in rates)


def test_entropy_coefficient_schedule():
    base = dataclasses.replace(PRESETS["cartpole"], ent_coef=0.01, max_frames=1000)
    assert [ent_coef_at(base, f) for f in (0, 500, 10**9)] == [0.01] * 3  # off: constant
    cfg = dataclasses.replace(base, ent_coef_end=0.0)  # over max_frames by default
    assert ent_coef_at(cfg, 0) == pytest.approx(0.01)
    assert ent_coef_at(cfg, 250) == pytest.approx(0.0075)
    assert ent_coef_at(cfg, 1000) == ent_coef_at(cfg, 5000) == 0.0
    cfg = dataclasses.replace(cfg, lr_anneal_frames=2000)  # then the learning rate's span
    assert ent_coef_at(cfg, 1000) == pytest.approx(0.005)
    cfg = dataclasses.replace(cfg, ent_coef_end=0.02, ent_anneal_frames=100)  # its own span
    assert ent_coef_at(cfg, 50) == pytest.approx(0.015)
    assert ent_coef_at(cfg, 100) == ent_coef_at(cfg, 1000) == 0.02


def test_entropy_annealed_run_uses_and_logs_the_scheduled_coefficient(tmp_path):
    """Each update uses the coefficient of its frames (the metrics show it falling), the
    coefficient changes the update, and a resumed run goes on along the same schedule."""
    cfg = dataclasses.replace(
        RESUME_CFG,
        recurrent=False,
        env="CartPole-v1",
        ent_coef=0.6,
        ent_coef_end=0.0,
        ent_anneal_frames=128 * 6,
    )
    schedule = [0.5, 0.4, 0.3, 0.2, 0.1, 0.0]  # row i follows the update at frames 128 * i
    full, part = tmp_path / "full", tmp_path / "part"
    train(dataclasses.replace(cfg, run_dir=str(full)))
    _, rows = rows_of(full)
    assert [float(r["ent_coef"]) for r in rows] == pytest.approx(schedule)
    train(dataclasses.replace(cfg, run_dir=str(part), max_frames=128 * 3))
    train(dataclasses.replace(cfg, resume=str(part)))
    _, rows_part = rows_of(part)
    assert [float(r["ent_coef"]) for r in rows_part] == pytest.approx(schedule)
    constant = tmp_path / "constant"
    train(
        dataclasses.replace(cfg, run_dir=str(constant), ent_coef_end=None, ent_anneal_frames=None)
    )
    _, rows_constant = rows_of(constant)
    assert [float(r["ent_coef"]) for r in rows_constant] == [0.6] * 6
    # The same seed: identical first rollout, so the first update differs only by the coefficient.
    assert rows_constant[0]["policy_loss"] != rows[0]["policy_loss"]


def test_resume_refuses_changed_learning_settings(tmp_path):
    from rapidrl.train import CheckpointError

    run = tmp_path / "r"
    train(dataclasses.replace(RESUME_CFG, run_dir=str(run), max_frames=128))
    with pytest.raises(CheckpointError, match="clip"):
        train(dataclasses.replace(RESUME_CFG, resume=str(run), clip=0.3))
    # sequence_mode may change: the modes compute the same function.
    s = train(
        dataclasses.replace(RESUME_CFG, resume=str(run), sequence_mode="loop", max_frames=256)
    )
    assert s["frames"] == 256


# --------------------------------------------------------------------------------------------
# Config, command line, eval
# --------------------------------------------------------------------------------------------
def test_presets_validate_and_document_every_field():
    for presets in (PRESETS, LSTM_PRESETS):
        for cfg in presets.values():
            cfg.validate()
    p = PRESETS["ppo"]
    assert (p.num_envs, p.num_steps, p.minibatches, p.epochs) == (8, 128, 4, 4)
    assert (p.lr, p.clip, p.ent_coef, p.vf_coef, p.max_grad_norm) == (2.5e-4, 0.1, 0.01, 0.5, 0.5)
    assert (p.gamma, p.gae_lambda, p.anneal_lr, p.recurrent) == (0.99, 0.95, True, False)
    lstm = PRESETS["ppo-lstm"]
    assert lstm.recurrent and lstm.sequence_mode == "packed"
    assert dataclasses.replace(lstm, recurrent=False, sequence_mode="packed") == p
    assert all(cfg.recurrent for cfg in LSTM_PRESETS.values())
    # The class and its base (TrainerConfig: the fields every trainer shares).
    lines = [ln for cls in PPOConfig.__mro__[:-1] for ln in inspect.getsource(cls).splitlines()]
    for f in dataclasses.fields(PPOConfig):
        i = next(i for i, ln in enumerate(lines) if ln.strip().startswith(f"{f.name}:"))
        assert lines[i + 1].strip().startswith('"""'), f.name


@pytest.mark.parametrize("command", ["ppo", "ppo-lstm"])
def test_help_lists_every_field(capsys, command):
    with pytest.raises(SystemExit) as e:
        cli.main(["train", command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for f in dataclasses.fields(PPOConfig):
        if f.name != "algo":
            assert f"--{f.name.replace('_', '-')}" in out, f.name
    presets = (
        "cartpole, fast, lean, mujoco, mujoco-ant, mujoco-fast, mujoco-halfcheetah, ppo, ppo-lstm"
        if command == "ppo"
        else None
    )
    assert f"presets: {presets or 'cartpole, fast, lean, ppo, ppo-lstm'}" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--preset", "fsat"], "did you mean 'fast'"),
        (["--recurrent", "--num-envs", "6", "--minibatches", "4"], "multiple of --minibatches"),
        (["--num-envs", "8", "--env-batch-size", "3"], "must divide --num-envs"),
        (["--env", "pongg"], "did you mean"),
        (["--resume", "/nonexistent/run"], "no config.json"),
        (["--clip", "0"], "--clip must be > 0"),
        (["--anneal-lr", "--kl-adaptive-lr", "0.01"], "pass --no-anneal-lr with --kl-adaptive-lr"),
        (["--kl-adaptive-lr", "0.01", "--no-anneal-lr", "--lr", "0.1"], "<= --lr-max (0.01)"),
        (["--ent-coef-end", "-0.1"], "--ent-coef-end must be >= 0"),
        (["--ent-anneal-frames", "1000"], "no effect without --ent-coef-end"),
        (["--obs-size", "32"], "use --torso small for smaller frames"),
        (["--obs-size", "4", "--torso", "small"], "--obs-size must be >= 8"),
        (["--recurrent", "--reward-norm"], "--reward-norm is for the feed-forward net"),
        (["--recurrent", "--compile"], "--compile compiles the feed-forward net"),
        (["--torso-channels", "16", "0", "32"], "--torso-channels needs 3 positive widths"),
        (["--torso", "small", "--torso-channels", "16", "32", "32"], "drop --torso-channels"),
        (["--torso-dim", "0"], "--torso-dim must be >= 1"),
    ],
)
def test_bad_input_gives_a_clear_error(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "ppo", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_compile_without_a_cpp_compiler_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++, c++ or clang++ on it
    monkeypatch.delenv("CXX", raising=False)
    assert cli.main(["train", "ppo", "--compile", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "--compile needs a C++ compiler" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_cli_train_resume_eval(tmp_path, capsys):
    run = str(tmp_path / "c")
    common = ["--preset", "cartpole", "--num-steps", "32", "--no-progress", "--torch-threads", "1"]
    common += ["--no-tensorboard", "--log-every-frames", "128"]
    assert cli.main(["train", "ppo", *common, "--max-frames", "128", "--run-dir", run]) == 0
    assert "max_frames: 128 frames" in capsys.readouterr().out
    assert cli.main(["train", "ppo", "--resume", run, "--max-frames", "256"]) == 0
    assert json.loads(open(os.path.join(run, "summary.json")).read())["frames"] == 256
    saved = json.loads(open(os.path.join(run, "config.json")).read())
    assert saved["clip"] == 0.2 and saved["max_frames"] == 256  # the cartpole preset, resumed
    assert cli.main(["eval", run, "--episodes", "2"]) == 0
    assert "ppo CartPole-v1" in capsys.readouterr().out
    assert cli.main(["eval", run, "--episodes", "2", "--sample"]) == 0
    assert "(actions sampled from the policy)" in capsys.readouterr().out
    lstm = str(tmp_path / "l")
    argv = ["train", "ppo-lstm", *common, "--env", CARTPOLE_NO_VEL, "--lstm-hidden", "16"]
    assert cli.main([*argv, "--max-frames", "128", "--run-dir", lstm]) == 0
    saved = json.loads(open(os.path.join(lstm, "config.json")).read())
    assert saved["recurrent"] and saved["clip"] == 0.2
    # A fresh process: `rapidrl eval` finds the PPO loader without anything importing PPO first.
    out = subprocess.run(
        [sys.executable, "-m", "rapidrl.cli", "eval", lstm, "--episodes", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert f"ppo {CARTPOLE_NO_VEL}" in out.stdout and "mean score" in out.stdout


def test_eval_policy_samples_as_in_training_or_takes_the_argmax(tmp_path):
    """``rapidrl eval --sample``: actions drawn from the policy (reproducibly, by the eval's
    seed), as the training curve's games were played; without it the argmax."""
    from rapidrl.algos.ppo.train import RecurrentPolicy, eval_policy

    run = tmp_path / "c"
    cfg = dataclasses.replace(PRESETS["cartpole"], max_frames=512, run_dir=str(run), **QUIET)
    train(cfg)
    config = json.loads((run / "config.json").read_text())
    ckpt = load_latest(run, read_only=True)
    obs = np.zeros((256, 4), np.float32)  # one observation, 256 times
    greedy, _, _ = eval_policy(config, ckpt)
    assert len(set(greedy(obs).tolist())) == 1
    sampled, _, _ = eval_policy(config, ckpt, sample=True, seed=3)
    drawn = sampled(obs)
    assert set(drawn.tolist()) == {0, 1}  # a barely trained policy: both actions drawn
    again, _, _ = eval_policy(config, ckpt, sample=True, seed=3)
    assert np.array_equal(again(obs), drawn)
    # The LSTM policy alike.
    net = RecurrentActorCritic((2,), 2, hidden_size=8)
    many = np.ones((256, 2), np.float32)
    assert len(set(RecurrentPolicy(net, "cpu")(many).tolist())) == 1
    gen = torch.Generator().manual_seed(0)
    assert set(RecurrentPolicy(net, "cpu", gen)(many).tolist()) == {0, 1}


def test_recurrent_eval_policy_keeps_and_resets_its_state(tmp_path):
    from rapidrl.algos.ppo.train import RecurrentPolicy

    net = RecurrentActorCritic((2,), 2, hidden_size=8)
    policy = RecurrentPolicy(net, "cpu")
    obs = np.ones((1, 2), np.float32)
    policy(obs)
    first = policy.state[0].clone()
    policy(obs)
    assert not torch.equal(policy.state[0], first)  # the state runs on
    policy.reset()
    policy(obs)
    assert torch.equal(policy.state[0], first)  # a new episode starts from zero again


# --------------------------------------------------------------------------------------------
# Learning (slow stage)
# --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_ppo_learns_cartpole(tmp_path):
    cfg = dataclasses.replace(
        PRESETS["cartpole"],
        lr=1e-3,
        anneal_lr=False,
        max_frames=100_000,
        stop_at_score=195.0,
        run_dir=str(tmp_path / "cp"),
        log_every_frames=10_240,
        **QUIET,
    )
    s = train(cfg)
    assert s["solved"], s
    assert s["return_mean_100"] >= 195


# Recurrent-PPO settings for the memory task: 8 envs x 32 steps, 2 minibatches of 4 whole env
# sequences, 8 epochs, lr 1e-3 (no anneal). PPO-LSTM reaches a mean-100 of 195 in about 130k
# frames (seeds 1-3); feed-forward PPO with the same settings plateaus near 45-55.
NO_VEL = dataclasses.replace(
    PRESETS["cartpole"],
    env=CARTPOLE_NO_VEL,
    num_envs=8,
    num_steps=32,
    minibatches=2,
    epochs=8,
    lr=1e-3,
    anneal_lr=False,
    max_frames=200_000,
    log_every_frames=20_480,
    **QUIET,
)


@pytest.mark.slow
def test_ppo_lstm_learns_a_memory_task_feed_forward_cannot(tmp_path):
    lstm = train(
        dataclasses.replace(
            NO_VEL, recurrent=True, stop_at_score=150.0, run_dir=str(tmp_path / "lstm")
        )
    )
    assert lstm["solved"], lstm
    # The same budget (frames) for the feed-forward net: it cannot tell where the pole goes.
    ff = train(
        dataclasses.replace(
            NO_VEL,
            recurrent=False,
            stop_at_score=None,
            max_frames=lstm["frames"],
            run_dir=str(tmp_path / "ff"),
        )
    )
    assert ff["frames"] == lstm["frames"]
    assert ff["best_return_mean_100"] < 100, ff


# --------------------------------------------------------------------------------------------
# The shared loop helpers (rapidrl.train.loop) the trainer builds on
# --------------------------------------------------------------------------------------------
def test_loop_helpers_cadence_and_stop_reasons():
    from rapidrl.train.session import Every, stop_reason

    every = Every(seconds=None, frames=100)
    assert not every.due(99) and every.due(100)
    every.mark(250)
    assert not every.due(299) and every.due(300)
    again = Every(seconds=None, frames=100)
    again.load_state_dict(every.state_dict())  # a resumed run does not repeat a block
    assert not again.due(250) and again.due(300)
    assert Every(seconds=0.0, frames=None).due(10**9) is False  # 0 / None: off
    kw = dict(solved=False, frames=5, max_frames=10, seconds=0.0, max_minutes=None)
    assert stop_reason(interrupted=False, **kw) is None
    assert stop_reason(interrupted=True, **{**kw, "solved": True}) == "interrupted"
    assert stop_reason(interrupted=False, **{**kw, "solved": True}) == "solved"
    assert stop_reason(interrupted=False, **{**kw, "frames": 10}) == "max_frames"
    assert stop_reason(interrupted=False, **{**kw, "seconds": 61.0, "max_minutes": 1.0}) == (
        "max_minutes"
    )
