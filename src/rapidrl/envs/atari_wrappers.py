"""The reference Atari stack: one small gymnasium wrapper per DQN preprocessing step.

This is the readable definition of the protocol; ``atari_lean.LeanAtariEnv`` must produce exactly
the same observations, rewards, flags and infos (tests/envs check it frame for frame). The chain,
innermost first (the switch that removes each step in brackets)::

    gym.make("ALE/<Game>-v5", frameskip=1, ...)   one emulator frame per step
    GameTracker    real game score and real game end, frame by frame (feeds EpisodeStats)
    NoopReset      1..noop_max single-frame no-ops after a real reset          [noop_max=0]
    MaxAndSkip     frame_skip frames per step, max over the last two        [frame_skip=1]
    FrameLimit     truncated once the game has run max_episode_frames [max_episode_frames=None]
    EpisodicLife   life loss => terminated; the next reset continues the game  [episodic_life]
    FireReset      FIRE then action 2 after every reset, if the game has FIRE     [fire_reset]
    WarpFrame      resize to screen_size, channels first
    ClipReward     reward -> sign(reward)                                       [clip_rewards]
    FrameStack     the last frame_stack frames as channels
    EpisodeStats   info["lives"], and info["episode"] at the real game end

Why this order: NoopReset sits below MaxAndSkip so no-ops are single frames (baselines);
FrameLimit sits above MaxAndSkip so truncation happens on step boundaries and is seen by
EpisodicLife as a real end; FireReset sits above EpisodicLife so it also fires after a life-loss
reset; EpisodeStats sits on top to count agent steps, and reads the real score from GameTracker
at the bottom, so clipping, life losses and the internal no-op/FIRE steps cannot distort it.

Internal steps (no-ops, FIRE, the life-loss no-op) never end the game as seen by the agent:
the frame limit is checked on agent steps only (a limit crossed during an internal step truncates
the next agent step), and the emulator keeps reporting game over until reset, so such an end
surfaces on the next agent step. The one exception: a game over caused by FireReset's own
presses restarts the game inside reset() (as baselines) and that game reports no statistics —
it needs a game lost within the 2 steps after a reset, which the supported games cannot do.

Every wrapper records its constructor arguments (``gymnasium.utils.RecordConstructorArgs``), so
``env.spec`` describes the whole chain and ``gymnasium.make(env.spec)`` rebuilds it, as
``gymnasium.utils.env_checker.check_env`` and spec-based tooling expect.
"""

from __future__ import annotations

import operator
from collections import deque
from typing import Any, SupportsFloat

import cv2
import gymnasium as gym
import numpy as np

from rapidrl.envs.atari_common import action_meanings, check_noop, fire_reset_actions
from rapidrl.envs.options import AtariOptions

StepResult = tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]


class GameTracker(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Bottom layer: the real game's score (every emulator frame's reward, unclipped, internal
    no-op/FIRE steps included) and whether the latest emulator frame ended the game."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self.score = 0.0
        self.game_over = False
        self.game_id = 0  # +1 per real reset: tells EpisodeStats a new game began

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.score = 0.0
        self.game_over = False
        self.game_id += 1
        return obs, info

    def step(self, action: int) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.score += float(reward)
        self.game_over = bool(terminated)
        return obs, reward, terminated, truncated, info


class NoopReset(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """After a real reset, play 1..noop_max no-op frames so episodes start in varied states.

    The count comes from the env's ``np_random``, seeded by ``reset(seed=...)``. A game over
    during the no-ops (not possible in practice) starts a new game and the no-ops go on.
    """

    def __init__(self, env: gym.Env, noop_max: int) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, noop_max=noop_max)
        gym.Wrapper.__init__(self, env)
        self.noop_max = noop_max

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        noops = int(self.env.unwrapped.np_random.integers(1, self.noop_max + 1))
        for _ in range(noops):
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


class MaxAndSkip(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Repeat the action ``skip`` frames, sum the rewards, observe the max of the last two frames.

    Max-pooling removes the flicker of sprites drawn only every other frame. If the game ends
    before the skip's last frame, the observation is the frame where it ended, not pooled.
    """

    def __init__(self, env: gym.Env, skip: int, max_pool: bool) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, skip=skip, max_pool=max_pool)
        gym.Wrapper.__init__(self, env)
        self.skip = skip
        self.max_pool = max_pool and skip >= 2

    def step(self, action: int) -> StepResult:
        total_reward = 0.0
        second_last: np.ndarray | None = None
        for i in range(self.skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total_reward += float(reward)
            if terminated or truncated:
                break
            if i == self.skip - 2:
                second_last = obs
        ran_all_frames = i == self.skip - 1
        if self.max_pool and ran_all_frames:
            obs = np.maximum(second_last, obs)
        return obs, total_reward, terminated, truncated, info


class FrameLimit(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """``truncated=True`` once the game has run ``max_frames`` emulator frames.

    Counted by ALE from the game's reset (no-ops and FIRE presses included), the same clock as
    the classic 108,000-frame (30 minute) limit. Not set when the game ended by itself.
    """

    def __init__(self, env: gym.Env, max_frames: int) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, max_frames=max_frames)
        gym.Wrapper.__init__(self, env)
        self.max_frames = max_frames

    def step(self, action: int) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if not terminated and info["episode_frame_number"] >= self.max_frames:
            truncated = True
        return obs, reward, terminated, truncated, info


class EpisodicLife(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """A lost life ends the learner's episode (``terminated=True``) but not the game.

    The reset() right after such a step plays one no-op step instead of restarting the game
    (baselines). Any other reset — after game over or truncation, with a seed, or one not
    following a life loss — restarts the game, so ``reset(seed=s)`` is always reproducible.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self._lives = 0
        self._life_lost = False  # the last step ended a life but not the game

    def step(self, action: int) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        real_end = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        # lives == 0 on the last life loss is game over itself; games without lives report 0.
        if 0 < lives < self._lives:
            terminated = True
        self._life_lost = terminated and not real_end
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self._life_lost and seed is None:
            # The no-op step moves the emulator past the frame where the life was lost.
            obs, _, _, _, info = self.env.step(0)
        else:
            obs, info = self.env.reset(seed=seed, options=options)
        self._life_lost = False
        self._lives = self.env.unwrapped.ale.lives()
        return obs, info


class FireReset(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Press FIRE, then action 2, after every reset: games like Breakout wait for FIRE to serve,
    and an agent that never learned to press it would stall. Rewards of these presses count in
    the game score (GameTracker) but are not returned to the agent."""

    def __init__(self, env: gym.Env, actions: tuple[int, ...]) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, actions=actions)
        gym.Wrapper.__init__(self, env)
        self.actions = actions

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        for action in self.actions:
            obs, _, terminated, _, info = self.env.step(action)
            if terminated:  # a press lost a life or the game: reset again, as baselines
                obs, info = self.env.reset()
        return obs, info


class WarpFrame(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Resize a frame to (height, width) with INTER_AREA (the DQN protocol), channels first."""

    def __init__(self, env: gym.Env, height: int, width: int, channels: int) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, height=height, width=width, channels=channels
        )
        gym.ObservationWrapper.__init__(self, env)
        self.size = (width, height)  # cv2 takes (width, height)
        self.observation_space = gym.spaces.Box(0, 255, (channels, height, width), np.uint8)

    def observation(self, frame: np.ndarray) -> np.ndarray:
        frame = cv2.resize(frame, self.size, interpolation=cv2.INTER_AREA)
        return frame[None] if frame.ndim == 2 else frame.transpose(2, 0, 1)


class ClipReward(gym.RewardWrapper, gym.utils.RecordConstructorArgs):
    """Reward -> its sign, so one learning rate fits games scoring 1 or 1,000 per event."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.RewardWrapper.__init__(self, env)

    def reward(self, reward: SupportsFloat) -> float:
        return float(np.sign(float(reward)))


class FrameStack(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Stack the last ``k`` frames along the channel axis, oldest first; the reset frame fills
    every slot. Gives a feed-forward network motion (ball direction and speed)."""

    def __init__(self, env: gym.Env, k: int) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, k=k)
        gym.Wrapper.__init__(self, env)
        self.k = k
        channels, height, width = env.observation_space.shape
        self.observation_space = gym.spaces.Box(0, 255, (k * channels, height, width), np.uint8)
        self._frames: deque[np.ndarray] = deque(maxlen=k)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._frames.extend([obs] * self.k)
        return np.concatenate(self._frames), info

    def step(self, action: int) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._frames.append(obs)
        return np.concatenate(self._frames), reward, terminated, truncated, info


class EpisodeStats(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Outermost layer: counts agent steps and reports the real game.

    Every info has ``lives`` and ``episode_frame_number``. On the agent step where the real game
    ends (game over, or the frame limit), ``info["episode"] = {"r": score, "l": steps}``: the
    unclipped game score and the agent steps of the whole game (all lives). This is what the
    "mean score of the last 100 games" is computed on.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        # ALE's AtariEnv also declares "human"; AtariOptions rejects it (it needs a display), so
        # the chain declares what make_env accepts: check_env rebuilds the env in every declared
        # mode.
        self.metadata = {**env.metadata, "render_modes": ["rgb_array"]}
        self._game = _find_wrapper(env, GameTracker)
        self._game_id = -1
        self._steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        if self._game.game_id != self._game_id:  # a real reset happened: a new game
            self._game_id = self._game.game_id
            self._steps = 0
        return obs, _clean_info(info)

    def step(self, action: int) -> StepResult:
        action = operator.index(action)  # ints and numpy ints; a float or array is a TypeError
        n = self.action_space.n
        if not 0 <= action < n:
            raise ValueError(f"action must be in [0, {n}), got {action!r}")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        info = _clean_info(info)
        if self._game.game_over or truncated:
            info["episode"] = {"r": self._game.score, "l": self._steps}
        return obs, reward, terminated, truncated, info


def _clean_info(info: dict[str, Any]) -> dict[str, Any]:
    # Only the keys both implementations promise; ALE's global frame_number and seeds are dropped.
    return {"lives": int(info["lives"]), "episode_frame_number": int(info["episode_frame_number"])}


def _find_wrapper(env: gym.Env, kind: type[gym.Wrapper]) -> Any:
    while isinstance(env, gym.Wrapper):
        if isinstance(env, kind):
            return env
        env = env.env
    raise ValueError(f"no {kind.__name__} in the wrapper chain")


def make_atari_wrappers(game: str, options: AtariOptions) -> gym.Env:
    """The reference chain for ALE ROM ``game`` (e.g. ``"pong"``) with ``options``."""
    from ale_py.registration import rom_id_to_name

    env = gym.make(
        f"ALE/{rom_id_to_name(game)}-v5",
        frameskip=1,
        repeat_action_probability=float(options.repeat_action_probability),
        full_action_space=options.full_action_space,
        obs_type="grayscale" if options.grayscale else "rgb",
        # Our FrameLimit does this on step boundaries; ALE's own limit would cut mid-skip.
        max_num_frames_per_episode=None,
        render_mode=options.render_mode,
    )
    meanings = action_meanings(env.unwrapped._action_set)
    if options.noop_max > 0 or options.episodic_life:
        check_noop(meanings)
    env = GameTracker(env)
    if options.noop_max > 0:
        env = NoopReset(env, options.noop_max)
    if options.frame_skip > 1:
        env = MaxAndSkip(env, options.frame_skip, options.max_pool)
    if options.max_episode_frames is not None:
        env = FrameLimit(env, options.max_episode_frames)
    if options.episodic_life:
        env = EpisodicLife(env)
    fire_actions = fire_reset_actions(meanings) if options.fire_reset else ()
    if fire_actions:
        env = FireReset(env, fire_actions)
    env = WarpFrame(env, *options.screen_hw, channels=options.channels)
    if options.clip_rewards:
        env = ClipReward(env)
    env = FrameStack(env, options.frame_stack)
    return EpisodeStats(env)
