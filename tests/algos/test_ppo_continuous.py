"""PPO on continuous (Box) actions: the return-based reward scaling against a per-step
reference, actions clipped where they are sent and stored as sampled, clear errors for action
spaces that are not supported, MuJoCo vector envs on every backend against serial, and a tiny
Hopper run that trains, evaluates and resumes exactly."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import subprocess
import sys
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from rapidrl import cli
from rapidrl.algos.eval import EvalConfig, evaluate
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.train import eval_policy, train
from rapidrl.nets.normalize import RunningMeanStd, scale_rewards
from rapidrl.train import load_latest, read_metrics
from rapidrl.train.rollout import VectorRollout
from rapidrl.train.testing import assert_same, rollout_ckpt_payload
from rapidrl.vector import make_vec
from rapidrl.vector.testing import assert_trajectories_equal, collect_trajectories

QUIET = dict(
    log_every_seconds=0,
    checkpoint_every_seconds=1e9,
    no_progress=True,
    tensorboard=False,
    torch_threads=1,
)


# --------------------------------------------------------------------------------------------
# Reward scaling
# --------------------------------------------------------------------------------------------
def test_scale_rewards_follows_the_discounted_return_per_env_across_rollouts():
    """Two rollouts of 3 envs, episode ends and a ragged (first-ready) env: the returns run on
    across the rollouts, restart after an end, skip the padding; each rollout's valid returns
    enter the statistics at once and every reward is divided by their std, clamped."""
    gamma = 0.9
    rng = np.random.default_rng(0)
    rms, ref_rms = RunningMeanStd(()), RunningMeanStd(())
    running = torch.zeros(3, dtype=torch.float64)
    ref_running = np.zeros(3)
    for rollout in range(2):
        rewards = rng.normal(0, 50, size=(5, 3)).astype(np.float32)
        rewards[4, 2] = 1e5  # padding in the first rollout: not in the statistics, clamped
        ends = np.zeros((5, 3), bool)
        ends[1, 0] = ends[3, 2] = True
        lengths = np.array([5, 5, 3 if rollout == 0 else 5])
        valid = np.arange(5)[:, None] < lengths[None]
        got = scale_rewards(
            torch.from_numpy(rewards), torch.from_numpy(ends), torch.from_numpy(valid),
            running, gamma, rms,
        )  # fmt: skip
        # The per-step reference (SB3's VecNormalize order for the returns).
        returns = []
        for i in range(3):
            for t in range(lengths[i]):
                ref_running[i] = ref_running[i] * gamma + rewards[t, i]
                returns.append(ref_running[i])
                if ends[t, i]:
                    ref_running[i] = 0.0
        ref_rms.update(torch.tensor(returns, dtype=torch.float64))
        std = float(np.sqrt(float(ref_rms.var) + 1e-5))
        want = np.clip(rewards / std, -10, 10)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(running.numpy(), ref_running)
        if rollout == 0:
            assert float(got[4, 2]) == 10.0
        assert float(rms.count) == pytest.approx(float(ref_rms.count))


# --------------------------------------------------------------------------------------------
# Actions: clipped where sent, stored as sampled
# --------------------------------------------------------------------------------------------
class _RecordingBoxEnv(gym.Env):
    """Box(-1, 1, (2,)) actions; the observation is the action it received."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.asarray(action, np.float32), 0.0, False, False, {}


gym.register("rapidrl-test/RecordingBox-v0", entry_point=_RecordingBoxEnv)


def test_actions_are_stored_as_sampled_and_sent_clipped_to_the_bounds():
    cfg = SimpleNamespace(
        env="rapidrl-test/RecordingBox-v0", num_envs=2, num_steps=3, backend="serial",
        num_workers=None, act_threads=1, env_batch_size=None,
    )  # fmt: skip
    space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    rollout = VectorRollout(cfg, {}, space, torch.device("cpu"), (), lockstep=False)
    sampled = torch.tensor([[3.0, -0.5], [-7.0, 0.25]])

    def act(obs, ids, starts):
        return sampled[ids], {}

    try:
        rollout.reset(seed=0)
        rollout.collect(act, lambda obs, ids: torch.zeros(len(ids)), lambda n, infos: None)
        assert rollout.actions.dtype == torch.float32
        assert torch.equal(rollout.actions[0], sampled)  # as the policy sampled them
        # What the envs received (their observations): clipped to [-1, 1].
        assert torch.equal(rollout.obs[1], torch.tensor([[1.0, -0.5], [-1.0, 0.25]]))
    finally:
        rollout.close()


# --------------------------------------------------------------------------------------------
# Action spaces that are not supported: a clear error, nothing written
# --------------------------------------------------------------------------------------------
class _SpaceEnv(gym.Env):
    def __init__(self, space):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.action_space = space

    def reset(self, *, seed=None, options=None):
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, True, False, {}


_SPACES = {
    "MultiDiscrete": gym.spaces.MultiDiscrete([2, 3]),
    "Dict": gym.spaces.Dict({"a": gym.spaces.Discrete(2)}),
    "Discrete": gym.spaces.Discrete(3),
    "Unbounded": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
    "Box2D": gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32),
    "Box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
}
for _name, _space in _SPACES.items():
    gym.register(f"rapidrl-test/{_name}-v0", entry_point=_SpaceEnv, kwargs={"space": _space})


@pytest.mark.parametrize(
    "algo, name, message",
    [
        ("ppo", "MultiDiscrete", "supported: Discrete or a bounded 1-D Box"),
        ("ppo", "Dict", "supported: Discrete or a bounded 1-D Box"),
        ("ppo", "Unbounded", "is unbounded"),
        ("ppo", "Box2D", "is not one-dimensional"),
        ("ppo-lstm", "Box", "`rapidrl train ppo` (feed-forward, local or --ray) and `rapidrl"),
        ("dqn", "Box", "and `rapidrl train sac` take them"),
        ("pqn", "Box", "and `rapidrl train sac` take them"),
        ("dqn", "MultiDiscrete", "not supported; supported: Discrete"),
        ("sac", "Discrete", "SAC needs continuous actions (a bounded 1-D Box)"),
        ("sac", "MultiDiscrete", "not supported; supported: a bounded 1-D Box"),
        ("sac", "Unbounded", "is unbounded"),
    ],
)
def test_unsupported_action_spaces_are_refused_by_name(
    tmp_path, monkeypatch, capsys, algo, name, message
):
    monkeypatch.chdir(tmp_path)
    argv = ["train", algo, "--env", f"rapidrl-test/{name}-v0", "--no-progress"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


# --------------------------------------------------------------------------------------------
# MuJoCo (the mujoco extra)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "backend, kwargs",
    [
        ("subprocess", {}),
        ("hybrid", {"num_workers": 2, "inline": True}),
        ("async", {"num_workers": 2, "batch_size": 2}),
    ],
    ids=["subprocess", "hybrid-inline", "async-b2"],
)
def test_mujoco_vector_envs_equal_serial(backend, kwargs):
    pytest.importorskip("mujoco")  # the mujoco extra: pip install -e '.[mujoco]'
    n, steps = 4, 40
    actions = np.random.default_rng(5).uniform(-1, 1, size=(n, steps, 3)).astype(np.float32)
    options = {"max_episode_steps": 15}  # time limits as well as falls
    with make_vec("Hopper-v5", n, "serial", env_options=options) as venv:
        reference = collect_trajectories(venv, actions, seed=11)
    steps_seen = [s for t in reference[1] for s in t]
    assert any(s["truncated"] for s in steps_seen)
    with make_vec("Hopper-v5", n, backend, env_options=options, **kwargs) as venv:
        got = collect_trajectories(venv, actions, seed=11)
    assert_trajectories_equal(reference, got, f"{backend} {kwargs}")


TINY_HOPPER = dataclasses.replace(
    PRESETS["mujoco"],
    env="Hopper-v5",
    num_envs=2,
    num_steps=64,
    minibatches=4,
    epochs=2,
    backend="serial",
    max_frames=512,
    lr_anneal_frames=512,  # the schedule does not depend on where a session stops
    log_every_frames=128,
    checkpoint_every_frames=256,
    keep_checkpoints=4,
    seed=4,
    **QUIET,
)


def test_a_tiny_hopper_run_trains_evaluates_and_resumes_exactly(tmp_path, capsys):
    pytest.importorskip("mujoco")
    full, part, twin = tmp_path / "full", tmp_path / "part", tmp_path / "twin"
    s = train(dataclasses.replace(TINY_HOPPER, run_dir=str(full), eval_episodes=2))
    assert s["frames"] == 512 and s["updates"] == 4
    # --eval-episodes: the final policy's mean action, as `rapidrl eval` plays it (the SB3 zoo's
    # protocol for MuJoCo).
    assert s["eval_mean"] == evaluate(EvalConfig(str(full), episodes=2))["mean"]
    _, rows = read_metrics(str(full / "metrics.csv"))
    assert len(rows) == 4 and all(np.isfinite(float(r["policy_loss"])) for r in rows)
    ckpt = load_latest(str(full / "checkpoints"))
    net = ckpt.state["net"]
    assert net["log_std"].shape == (3,) and not torch.equal(net["log_std"], torch.zeros(3))
    # The normalizers' statistics travel with the net: observations and discounted returns.
    assert float(net["obs_rms.count"]) == pytest.approx(512, abs=1e-3)
    assert float(net["reward_rms.count"]) == pytest.approx(512, abs=1e-3)
    # A stopped run's checkpoint is the uninterrupted run's; resuming it twice gives one run.
    train(dataclasses.replace(TINY_HOPPER, run_dir=str(part), max_frames=256))
    ck = "checkpoints/ckpt-000000000256.pt"
    assert_same(rollout_ckpt_payload(full / ck), rollout_ckpt_payload(part / ck))
    shutil.copytree(part, twin)
    for d in (part, twin):
        assert train(dataclasses.replace(TINY_HOPPER, resume=str(d)))["frames"] == 512
    end = "checkpoints/ckpt-000000000512.pt"
    assert_same(rollout_ckpt_payload(part / end), rollout_ckpt_payload(twin / end))
    # eval: the mean action (or a sample), clipped to the bounds.
    config = json.loads((full / "config.json").read_text())
    act, env_id, _ = eval_policy(config, ckpt, sample=True, seed=0)
    a = act(np.random.default_rng(0).normal(0, 100, size=(64, 11)))
    assert env_id == "Hopper-v5" and a.shape == (64, 3)
    assert float(a.max()) <= 1.0 and float(a.min()) >= -1.0
    # rapidrl eval plays it (the mean action); --epsilon has no meaning for torques.
    assert cli.main(["eval", str(full), "--episodes", "2", "--max-steps", "30"]) == 0
    assert "mean" in capsys.readouterr().out
    assert cli.main(["eval", str(full), "--episodes", "1", "--epsilon", "0.1"]) == 2
    assert "--epsilon mixes in random discrete actions" in capsys.readouterr().err
    # --video: an mp4 where MuJoCo can render (an OpenGL library), else a clear error naming
    # the fix, before any episode. Both in their own processes: a second MuJoCo renderer after
    # a failed one aborts its process (as a user's one `rapidrl eval` never meets).
    video = tmp_path / "hopper.mp4"
    eval_cmd = [sys.executable, "-m", "rapidrl.cli", "eval", str(full), "--episodes", "1"]
    eval_cmd += ["--max-steps", "30", "--video", str(video)]
    done = subprocess.run(eval_cmd, capture_output=True, text=True, timeout=300)
    if _mujoco_renders():
        import cv2

        cap = cv2.VideoCapture(str(video))
        frames = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        cap.release()
        assert done.returncode == 0 and frames == 31, done.stderr  # a frame a step, and the last
    else:
        assert done.returncode == 2 and not video.exists(), done.stderr
        assert "--video: Hopper-v5 cannot render on this machine" in done.stderr
        assert "MUJOCO_GL" in done.stderr


def _mujoco_renders() -> bool:
    """Whether gymnasium's Hopper-v5 renders a frame on this machine (asked in a fresh process)."""
    code = (
        "import gymnasium as gym\n"
        "env = gym.make('Hopper-v5', render_mode='rgb_array')\n"
        "env.reset(seed=0)\n"
        "assert env.render() is not None\n"
    )
    return (
        subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120).returncode
        == 0
    )


def test_an_env_with_continuous_actions_defaults_to_the_mujoco_preset():
    from rapidrl.algos.ppo.train import default_ppo_preset

    assert default_ppo_preset(["--env", "rapidrl-test/Box-v0"]) == "mujoco"
    assert default_ppo_preset(["--env=rapidrl-test/Box-v0", "--seed", "2"]) == "mujoco"
    for argv in (
        ["--env", "rapidrl-test/Box-v0", "--preset", "cartpole"],
        ["--env", "rapidrl-test/Box-v0", "--resume", "runs/x"],
        ["--env", "CartPole-v1"],
        ["--env", "pong"],
        ["--env", "no-such-env"],
        [],
    ):
        assert default_ppo_preset(argv) == "lean", argv


def test_env_benchmarks_step_continuous_action_spaces():
    """bench envs and the autotuner step any env with random actions of its own space."""
    pytest.importorskip("mujoco")
    from rapidrl.bench.envs import measure
    from rapidrl.vector.autotune import Layout, measure_layout, random_actions

    rng = np.random.default_rng(0)
    box = gym.spaces.Box(np.array([-1.0, 0.0]), np.array([1.0, 3.0]), dtype=np.float32)
    a = random_actions(box, rng, 500)
    assert a.shape == (500, 2) and a.dtype == np.float32
    assert (a >= box.low).all() and (a <= box.high).all() and a[:, 1].max() > 1.0
    assert random_actions(gym.spaces.Discrete(4), rng, 3).shape == (3,)
    rec = measure_layout("Hopper-v5", Layout("serial", 2), seconds=0.2, warmup=0.05)
    assert rec["steps_per_s"] > 0
    rec = measure("Hopper-v5", Layout("ceiling", 1), seconds=0.2, warmup=0.05)
    assert rec["steps_per_s"] > 0


def test_mujoco_fast_is_the_measured_flags_on_mujoco():
    """`--preset mujoco-fast` is what docs/results/mujoco_ppo_rlgames_screen_zen4 ran: `mujoco`
    with rl_games' flags, 20M steps or 10 minutes, and nothing else."""
    from rapidrl.algos.ppo.train import parse_ppo_args

    measured = "--num-envs 64 --num-steps 128 --minibatches 4 --epochs 5 --lr 3e-4 --no-anneal-lr"
    measured += " --kl-adaptive-lr 0.008 --clip 0.2 --no-clip-vloss --vf-coef 2.0"
    measured += " --max-grad-norm 1.0 --ent-coef 0 --obs-norm --value-norm --no-reward-norm"
    measured += " --shared-torso --mlp-widths 256 128 64 --mlp-activation elu"
    measured += " --max-frames 20000000 --max-minutes 10 --env HalfCheetah-v5"
    prog = "rapidrl train ppo"
    as_run = parse_ppo_args(["--preset", "mujoco", *measured.split()], prog, "mujoco")
    assert parse_ppo_args(["--preset", "mujoco-fast"], prog, "mujoco") == as_run
    assert as_run == PRESETS["mujoco-fast"] and as_run.torch_threads == 1


def test_mujoco_ant_is_the_measured_flags_on_mujoco():
    """`--preset mujoco-ant` is what docs/results/mujoco_ppo_ant_logstd_zen4 ran as F: `mujoco`
    with `--target-kl 0.05 --lr 1e-4 --log-std-init -2` on Ant-v5, and nothing else."""
    from rapidrl.algos.ppo.train import parse_ppo_args

    prog = "rapidrl train ppo"
    measured = ["--target-kl", "0.05", "--lr", "1e-4", "--log-std-init", "-2", "--env", "Ant-v5"]
    as_run = parse_ppo_args(["--preset", "mujoco", *measured], prog, "mujoco")
    assert parse_ppo_args(["--preset", "mujoco-ant"], prog, "mujoco") == as_run
    assert as_run == PRESETS["mujoco-ant"] and as_run.max_frames == 1_000_000


def test_mujoco_halfcheetah_is_the_measured_flag_on_mujoco():
    """`--preset mujoco-halfcheetah` is what docs/results/mujoco_ppo_ant_logstd_zen4 ran on
    HalfCheetah-v5: `mujoco` with `--log-std-init -2`, and nothing else."""
    from rapidrl.algos.ppo.train import parse_ppo_args

    prog = "rapidrl train ppo"
    measured = ["--log-std-init", "-2", "--env", "HalfCheetah-v5"]
    as_run = parse_ppo_args(["--preset", "mujoco", *measured], prog, "mujoco")
    assert parse_ppo_args(["--preset", "mujoco-halfcheetah"], prog, "mujoco") == as_run
    assert as_run == PRESETS["mujoco-halfcheetah"] and as_run.log_std_init == -2.0
    assert PRESETS["mujoco"].log_std_init == 0.0  # Hopper's (docs/results: 503.4 with -2)


def test_mlp_widths_and_activation_shape_the_policy_and_survive_the_config_file(tmp_path):
    from torch import nn

    from rapidrl.algos.ppo.config import PPOConfig
    from rapidrl.algos.ppo.learner import make_policy
    from rapidrl.config import ConfigError
    from rapidrl.train import load_config, save_config

    cfg = dataclasses.replace(
        PRESETS["mujoco"], mlp_widths=(256, 128, 64), mlp_activation="elu", shared_torso=True
    )
    net = make_policy(cfg, (11,), 3, continuous=True)
    linears = [m for m in net.torso.net if isinstance(m, nn.Linear)]
    assert [m.out_features for m in linears] == [256, 128, 64]
    assert isinstance(net.torso.net[1], nn.ELU) and net.critic_torso is None
    assert net.actor.in_features == 64 and net.critic.in_features == 64
    # The separate critic (the preset's) gets the same widths.
    sep = make_policy(dataclasses.replace(cfg, shared_torso=False), (11,), 3, continuous=True)
    assert [m.out_features for m in sep.critic_torso.net if isinstance(m, nn.Linear)] == [
        256,
        128,
        64,
    ]
    # config.json holds a list; the config read back as resume and eval read it is the same net.
    back = load_config(PPOConfig, save_config(cfg, tmp_path / "config.json"))
    assert back.mlp_widths == (256, 128, 64) and back == cfg
    same = make_policy(back, (11,), 3, continuous=True)
    assert {k: v.shape for k, v in same.state_dict().items()} == {
        k: v.shape for k, v in net.state_dict().items()
    }
    # Bad input names the flag; an image env refuses the MLP's flags instead of ignoring them.
    with pytest.raises(ConfigError, match="--mlp-widths needs one or more positive widths"):
        dataclasses.replace(cfg, mlp_widths=(64, 0)).validate()
    with pytest.raises(ConfigError, match="--mlp-widths and --mlp-activation shape the MLP"):
        make_policy(dataclasses.replace(PRESETS["lean"], mlp_activation="elu"), (2, 52, 52), 6)


def test_log_std_init_sets_the_gaussian_policys_starting_noise():
    import math

    from rapidrl.algos.ppo.learner import make_policy
    from rapidrl.config import ConfigError

    torch.manual_seed(0)
    cfg = dataclasses.replace(PRESETS["mujoco"], log_std_init=-2.0)
    net = make_policy(cfg, (11,), 3, "cpu", continuous=True)
    assert torch.equal(net.log_std.detach(), torch.full((3,), -2.0))
    # The sampled noise is the std's: 20,000 draws around the mean spread by exp(-2) per dim.
    obs = torch.zeros(20_000, 11)
    with torch.no_grad():
        out = net.act(obs)
    spread = (out.action - out.logits).std(0)
    assert torch.allclose(spread, torch.full((3,), math.exp(-2.0)), rtol=0.03)
    # The entropy follows: a Gaussian's per dim is log std + 0.5 log(2 pi e).
    entropy = net.evaluate(obs[:4], out.action[:4]).entropy
    per_dim = -2.0 + 0.5 * math.log(2 * math.pi * math.e)
    assert torch.allclose(entropy, torch.full((4,), 3 * per_dim))
    # The default stays CleanRL's std 1; a discrete policy and out-of-range values are refused.
    default = make_policy(PRESETS["mujoco"], (11,), 3, "cpu", continuous=True)
    assert torch.equal(default.log_std.detach(), torch.zeros(3))
    with pytest.raises(ConfigError, match="--log-std-init sets a Gaussian policy's starting"):
        make_policy(dataclasses.replace(PRESETS["lean"], log_std_init=-1.0), (2, 52, 52), 6)
    with pytest.raises(ConfigError, match=r"--log-std-init is a log std, in \[-10, 2\]"):
        dataclasses.replace(PRESETS["mujoco"], log_std_init=5.0).validate()


def test_ortho_init_off_keeps_pytorchs_default_init_with_its_own_critic_draw():
    from torch import nn

    from rapidrl.algos.ppo.learner import make_policy
    from rapidrl.config import ConfigError

    def singular_values(layer: nn.Linear) -> torch.Tensor:
        return torch.linalg.svdvals(layer.weight.detach())

    torch.manual_seed(0)
    ortho = make_policy(PRESETS["mujoco"], (17,), 6, continuous=True)
    # CleanRL's init: orthogonal heads, every singular value the gain (0.01 policy, 1 value).
    assert torch.allclose(singular_values(ortho.actor), torch.full((6,), 0.01), rtol=1e-4)
    assert torch.allclose(singular_values(ortho.critic), torch.ones(1), rtol=1e-4)
    assert not ortho.actor.bias.any()

    torch.manual_seed(0)
    cfg = dataclasses.replace(PRESETS["mujoco"], ortho_init=False)
    plain = make_policy(cfg, (17,), 6, continuous=True)
    # PyTorch's default Linear init: uniform in +-1/sqrt(fan_in), biases too, not orthogonal.
    for layer in (plain.actor, plain.critic, plain.torso.net[0], plain.critic_torso.net[0]):
        bound = 1 / math.sqrt(layer.in_features)
        assert layer.weight.abs().max() <= bound and layer.bias.abs().max() <= bound
        assert layer.bias.abs().max() > 0
    assert singular_values(plain.actor).max() > 0.1  # 0.01 gain would be orthogonal init
    # The separate critic's torso is its own draw, not a copy of the actor's.
    assert not torch.equal(plain.torso.net[0].weight, plain.critic_torso.net[0].weight)
    with pytest.raises(ConfigError, match="--no-ortho-init applies to the feed-forward net"):
        dataclasses.replace(PRESETS["lean"], recurrent=True, ortho_init=False).validate()


def test_env_kwargs_reach_the_env_on_every_path_and_bad_ones_are_named(tmp_path):
    pytest.importorskip("mujoco")
    from rapidrl.config import ConfigError, parse_env_kwargs
    from rapidrl.train.loop import probe_env

    assert parse_env_kwargs(["a=false", "b=0.5", "c=abc", "d=None", "e=[1, 2]"]) == {
        "a": False,
        "b": 0.5,
        "c": "abc",
        "d": None,
        "e": [1, 2],
    }
    with pytest.raises(ConfigError, match="takes KEY=VALUE items"):
        parse_env_kwargs(["include_cfrc_ext_in_observation"])
    with pytest.raises(ConfigError, match="gives 'a' twice"):
        parse_env_kwargs(["a=1", "a=2"])
    no_contacts = ("include_cfrc_ext_in_observation=false",)
    cfg = dataclasses.replace(PRESETS["mujoco"], env="Ant-v5", env_kwargs=no_contacts)
    cfg.validate()
    # Ant-v5 without its contact forces: 27 dims (Ant-v4's and EnvPool's), not 105.
    assert probe_env(cfg, "ppo", continuous=True).obs_shape == (27,)
    assert probe_env(dataclasses.replace(cfg, env_kwargs=()), "ppo", continuous=True).obs_shape == (
        105,
    )
    options = {"include_cfrc_ext_in_observation": False}
    with make_vec("Ant-v5", 2, "hybrid", num_workers=1, env_options=options) as venv:
        assert venv.single_observation_space.shape == (27,)
    # A run trains on it, and eval rebuilds the same env from the run's config.
    run = dataclasses.replace(
        TINY_HOPPER, env="Ant-v5", env_kwargs=no_contacts, max_frames=128, run_dir=str(tmp_path)
    )
    summary = train(run)
    assert summary["stop_reason"] == "max_frames"
    result = evaluate(EvalConfig(run_dir=str(tmp_path), episodes=1, max_steps=20))
    assert len(result["scores"]) == 1
    # On Atari the constructor's arguments are refused by name (its flags apply there).
    with pytest.raises(ConfigError, match="Atari envs take rapidrl's Atari flags"):
        probe_env(dataclasses.replace(PRESETS["lean"], env_kwargs=("a=1",)), "ppo")
