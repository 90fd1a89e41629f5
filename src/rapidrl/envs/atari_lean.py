"""The fast Atari stack: the whole DQN protocol in one class over ``ale_py.ALEInterface``.

Same protocol, step for step, as the reference chain in ``atari_wrappers`` (read that module's
docstring for the semantics); each private method below names the wrapper it stands for. What
makes it fast, per agent step:

- the screen is fetched only on the skip's last two frames, with ``getScreenGrayscale(buffer)``
  into two preallocated buffers (the wrapper chain fetches, and allocates, on every frame);
- the max-pool is ``np.maximum(..., out=)`` into a preallocated frame;
- ``cv2.resize(..., dst=)`` writes the 84x84 frame straight into the next ring-buffer slot of the
  frame stack, so the stack is never shifted;
- no gymnasium wrapper layers and no per-step allocations, except the returned observation.

The returned observation is a fresh array (``[frame_stack * C, H, W]`` uint8, oldest frame
first): callers may keep it (a replay buffer, a list) without it changing under them. Copying the
28 KB stack costs ~2 µs, nothing next to the ~0.4 ms of emulation per step; the vector envs copy
it into shared memory anyway.
"""

from __future__ import annotations

import operator
from typing import Any

import ale_py
import cv2
import gymnasium as gym
import numpy as np
from ale_py import roms

from rapidrl.envs.atari_common import action_meanings, check_noop, fire_reset_actions, seed_ale
from rapidrl.envs.options import AtariOptions


class LeanAtariEnv(gym.Env[np.ndarray, np.int64]):
    """One Atari game with the DQN preprocessing protocol, driving ALE directly.

    ``info`` has ``lives`` and ``episode_frame_number`` (emulator frames since the game's reset);
    on the step where the real game ends (game over or frame limit) also
    ``info["episode"] = {"r": unclipped game score, "l": agent steps of the game}``.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 60}

    def __init__(self, game: str, options: AtariOptions | None = None) -> None:
        self.options = options = options if options is not None else AtariOptions()
        self.game = game
        self.render_mode = options.render_mode
        rom_path = roms.get_rom_path(game)
        if rom_path is None:
            raise ValueError(f"no ALE ROM named {game!r}")
        self._rom_path = str(rom_path)

        # Same settings, in the same order, as ale_py's AtariEnv, so the same seed gives the
        # same game.
        self.ale = ale = ale_py.ALEInterface()
        ale.setLoggerMode(ale_py.LoggerMode.Error)
        ale.setFloat("repeat_action_probability", float(options.repeat_action_probability))
        ale.setBool("sound_obs", False)
        self._np_random = seed_ale(ale, None)
        ale.loadROM(self._rom_path)

        self._action_set = (
            ale.getLegalActionSet() if options.full_action_space else ale.getMinimalActionSet()
        )
        self._meanings = action_meanings(self._action_set)
        if options.noop_max > 0 or options.episodic_life:
            check_noop(self._meanings)
        self._noop = self._action_set[0]
        fire = fire_reset_actions(self._meanings) if options.fire_reset else ()
        self._fire_actions = [self._action_set[a] for a in fire]
        self.action_space = gym.spaces.Discrete(len(self._action_set))
        self.observation_space = gym.spaces.Box(0, 255, options.obs_shape, np.uint8)

        # Protocol switches, read on every step.
        self._frame_skip = options.frame_skip
        self._max_pool = options.max_pool and options.frame_skip >= 2
        self._max_frames = options.max_episode_frames
        self._episodic_life = options.episodic_life
        self._clip_rewards = options.clip_rewards

        # Preallocated buffers. _screens holds the skip's second-to-last and last frames; _frame
        # the (pooled) frame of the latest step, the one that goes into the stack.
        height, width = ale.getScreenDims()
        screen_shape = (height, width) if options.grayscale else (height, width, 3)
        self._fetch = ale.getScreenGrayscale if options.grayscale else ale.getScreenRGB
        self._screens = np.zeros((2, *screen_shape), np.uint8)
        self._frame = np.zeros(screen_shape, np.uint8)
        out_h, out_w = options.screen_hw
        self._dsize = (out_w, out_h)  # cv2 takes (width, height)
        # Ring buffer of the last k frames; _head is the slot the next frame goes to (= the
        # oldest frame), so the observation is _stack[head:] then _stack[:head].
        self._stack = np.zeros((options.frame_stack, options.channels, out_h, out_w), np.uint8)
        self._head = 0
        self._resized_rgb = None if options.grayscale else np.zeros((out_h, out_w, 3), np.uint8)

        # Game state (GameTracker / EpisodicLife / EpisodeStats of the reference chain).
        self._score = 0.0  # real, unclipped score of the current game, every frame counted
        self._agent_steps = 0  # agent steps in the current game
        self._lives = 0
        self._life_lost = False  # the last step ended a life but not the game

    # --- gymnasium API -------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            # As AtariEnv.reset: reseed ALE and np_random, then reload the ROM to apply it.
            self._np_random = seed_ale(self.ale, seed)
            self.ale.loadROM(self._rom_path)
        self._episodic_reset(force_new_game=seed is not None)
        # FireReset
        for action in self._fire_actions:
            _, terminated, _, _ = self._life_step(action)
            if terminated:
                self._episodic_reset(force_new_game=False)
        # FrameStack: the reset frame fills every slot.
        self._head = 0
        self._write_frame(0)
        self._stack[1:] = self._stack[0]
        return self._stacked_obs(), self._info()

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reward, terminated, truncated, info = self._advance(action)
        return self._stacked_obs(), reward, terminated, truncated, info

    def step_into(self, action: int, out: np.ndarray) -> tuple[float, bool, bool, dict[str, Any]]:
        """``step`` that writes the observation into ``out`` (``observation_space.shape``, uint8)
        and returns the rest: the vector envs write it straight into their shared buffer, one
        28 KB allocation and copy fewer per step."""
        reward, terminated, truncated, info = self._advance(action)
        head, stack = self._head, self._stack
        k = len(stack) - head
        frames = out.reshape(stack.shape)  # a view: ``out`` is a contiguous row
        frames[:k] = stack[head:]
        frames[k:] = stack[:head]
        return reward, terminated, truncated, info

    def _advance(self, action: int) -> tuple[float, bool, bool, dict[str, Any]]:
        """One agent step, the frame written into the stack: what ``step`` returns, less obs."""
        action = operator.index(action)  # ints and numpy ints; a float or array is a TypeError
        n = len(self._action_set)
        if not 0 <= action < n:
            raise ValueError(f"action must be in [0, {n}), got {action!r}")
        reward, terminated, truncated, game_over = self._life_step(self._action_set[action])
        self._write_frame(self._head)
        self._head = (self._head + 1) % len(self._stack)
        self._agent_steps += 1
        info = self._info()
        if game_over or truncated:  # the real game ended (not just a life)
            info["episode"] = {"r": self._score, "l": self._agent_steps}
        if self._clip_rewards:
            reward = float((reward > 0) - (reward < 0))
        return reward, terminated, truncated, info

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array":
            return self.ale.getScreenRGB()
        return None

    def get_action_meanings(self) -> list[str]:
        return list(self._meanings)

    # --- the protocol, layer by layer ----------------------------------------------------
    def _new_game(self) -> None:
        """ALE reset (GameTracker.reset): a new game, new score, new step count."""
        self.ale.reset_game()
        self._score = 0.0
        self._agent_steps = 0

    def _real_reset(self) -> None:
        """NoopReset.reset: new game, then 1..noop_max single no-op frames."""
        ale = self.ale
        self._new_game()
        if self.options.noop_max > 0:
            noops = int(self._np_random.integers(1, self.options.noop_max + 1))
            for _ in range(noops):
                self._score += ale.act(self._noop)
                if ale.game_over(with_truncation=False):
                    self._new_game()
        self._fetch(self._frame)  # the reset observation is the last frame, not pooled

    def _episodic_reset(self, force_new_game: bool) -> None:
        """EpisodicLife.reset: after a life loss continue the game with one no-op step."""
        if self._life_lost and not force_new_game:
            self._skip_step(self._noop)
        else:
            self._real_reset()
        self._life_lost = False
        self._lives = self.ale.lives()

    def _skip_step(self, action: ale_py.Action) -> tuple[float, bool]:
        """MaxAndSkip.step: ``frame_skip`` frames; fills ``_frame``; returns (reward, game over)."""
        ale = self.ale
        skip = self._frame_skip
        reward = 0.0
        game_over = False
        for i in range(skip):
            reward += ale.act(action)
            game_over = ale.game_over(with_truncation=False)
            if game_over and i < skip - 1:
                self._fetch(self._frame)  # ended early: the last frame, not pooled
                break
            if i == skip - 2 and self._max_pool:
                self._fetch(self._screens[0])
        else:
            if self._max_pool:
                self._fetch(self._screens[1])
                np.maximum(self._screens[0], self._screens[1], out=self._frame)
            else:
                self._fetch(self._frame)
        self._score += reward
        return reward, game_over

    def _life_step(self, action: ale_py.Action) -> tuple[float, bool, bool, bool]:
        """MaxAndSkip + FrameLimit + EpisodicLife step: (reward, terminated, truncated, game over)."""
        reward, game_over = self._skip_step(action)
        truncated = (
            self._max_frames is not None
            and not game_over
            and self.ale.getEpisodeFrameNumber() >= self._max_frames
        )
        terminated = game_over
        if self._episodic_life:
            lives = self.ale.lives()
            if 0 < lives < self._lives:
                terminated = True
            self._life_lost = terminated and not (game_over or truncated)
            self._lives = lives
        return reward, terminated, truncated, game_over

    def _write_frame(self, slot: int) -> None:
        """WarpFrame into ring slot ``slot``: resize ``_frame`` straight into the stack."""
        if self._resized_rgb is None:
            cv2.resize(self._frame, self._dsize, dst=self._stack[slot, 0], interpolation=_AREA)
        else:
            cv2.resize(self._frame, self._dsize, dst=self._resized_rgb, interpolation=_AREA)
            self._stack[slot] = self._resized_rgb.transpose(2, 0, 1)

    def _stacked_obs(self) -> np.ndarray:
        head = self._head
        stack = self._stack
        obs = np.concatenate((stack[head:], stack[:head])) if head else stack.copy()
        return obs.reshape(self.observation_space.shape)

    def _info(self) -> dict[str, Any]:
        return {"lives": self.ale.lives(), "episode_frame_number": self.ale.getEpisodeFrameNumber()}


_AREA = cv2.INTER_AREA
