"""What every trainer shares before and around its loop: the env probe (spaces, options, frame
skip, stop score, a clear error for continuous actions) and the rollout learners' counters
(their checkpoint form is the dict earlier checkpoints hold, so those still resume)."""

from __future__ import annotations

import dataclasses

import pytest

from rapidrl.algos.dqn.config import PRESETS as DQN_PRESETS
from rapidrl.algos.ppo.config import PRESETS as PPO_PRESETS
from rapidrl.algos.pqn.config import PRESETS as PQN_PRESETS
from rapidrl.config import ConfigError
from rapidrl.train.learner import RolloutCounters
from rapidrl.train.loop import probe_env


def test_probe_of_cartpole():
    probe = probe_env(PPO_PRESETS["cartpole"], "PPO")
    assert probe.info.env_id == "CartPole-v1" and not probe.info.is_atari
    assert probe.options == {} and probe.frame_skip == 1
    assert probe.stop_score == 475.0  # CartPole-v1's registered reward_threshold
    assert probe.obs_shape == (4,) and probe.n_actions == 2


@pytest.mark.parametrize("presets", [DQN_PRESETS, PPO_PRESETS, PQN_PRESETS])
def test_probe_of_pong_follows_the_config(presets):
    cfg = dataclasses.replace(presets["fast"], env="pong", stop_at_score="auto")
    probe = probe_env(cfg, "X")
    size = getattr(cfg, "obs_size", 84)
    assert probe.info.is_atari and probe.info.game == "pong"
    assert probe.frame_skip == 4 and probe.stop_score == 18.0 and probe.n_actions == 6
    assert probe.obs_shape[-2:] == (size, size)
    assert probe.options["episodic_life"] == cfg.episodic_life
    assert ("screen_size" in probe.options) == (size != 84)


def test_protocol_options_reach_the_env_only_when_changed():
    cfg = PPO_PRESETS["fast"]
    assert not {"fire_reset", "full_action_space", "max_episode_frames"} & set(
        probe_env(dataclasses.replace(cfg, env="pong"), "PPO").options
    )  # the defaults: the options (and autotune keys) of earlier runs
    changed = dataclasses.replace(
        cfg, env="pong", fire_reset=False, full_action_space=True, max_episode_frames=27_000
    )
    probe = probe_env(changed, "PPO")
    assert probe.options["fire_reset"] is False and probe.options["max_episode_frames"] == 27_000
    assert probe.n_actions == 18  # all ALE actions instead of Pong's 6


def test_max_episode_frames_is_checked():
    with pytest.raises(ConfigError, match="--max-episode-frames must be >= 1 or None"):
        dataclasses.replace(PPO_PRESETS["fast"], max_episode_frames=0).validate()


def test_probe_refuses_continuous_actions():
    cfg = dataclasses.replace(PQN_PRESETS["cartpole"], env="Pendulum-v1")
    with pytest.raises(ConfigError, match="PQN needs a discrete action space; Pendulum-v1"):
        probe_env(cfg, "PQN")


def test_rollout_counters_checkpoint_form():
    c = RolloutCounters(steps=7, updates=2, grad_steps=16, acc={"n": 2, "loss": 0.5})
    state = c.state_dict()
    # The dict of earlier checkpoints: these keys, this order (the loop adds the cadences).
    assert list(state) == ["steps", "updates", "grad_steps", "acc"]
    state["acc"]["loss"] = 9.0  # a copy: the live sums are not the saved ones
    assert c.acc["loss"] == 0.5
    back = RolloutCounters()
    back.load_state_dict({**state, "log_every": {"blocks": 3}, "ckpt_every": {"blocks": 1}})
    assert (back.steps, back.updates, back.grad_steps) == (7, 2, 16)
    assert back.acc == {"n": 2, "loss": 9.0} and back.pending == 0
    # A replay learner's agent steps not yet trained on (SAC) travel only where there are some.
    c.pending = 3
    state = c.state_dict()
    assert list(state) == ["steps", "updates", "grad_steps", "pending", "acc"]
    back.load_state_dict({**state, "log_every": {"blocks": 3}, "ckpt_every": {"blocks": 1}})
    assert back.pending == 3
