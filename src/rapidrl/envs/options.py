"""The options of the rapidrl Atari stack: the DQN preprocessing protocol, one switch per step.

The defaults are the protocol of the Nature DQN paper as implemented by OpenAI baselines
(``make_atari`` + ``wrap_deepmind``): up to 30 no-ops at reset, 4-frame skip with a max over the
last two frames, end of life = end of episode for the learner, FIRE at reset, 84x84 grey frames,
4 of them stacked, rewards clipped to their sign, no sticky actions, minimal action set, and a
30-minute (108,000 emulator frames) limit per game.

Both implementations (``"lean"`` and ``"wrappers"``) read the same ``AtariOptions``, so an option
means exactly the same thing in either.
"""

from __future__ import annotations

import dataclasses
import difflib
import numbers
from dataclasses import dataclass, field
from typing import Any, Literal

from rapidrl.envs.errors import InvalidOptionError

IMPLEMENTATIONS = ("lean", "wrappers")
RENDER_MODES = (None, "rgb_array")


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True)
class AtariOptions:
    """Options of ``make_env`` for Atari games. Each field documents one protocol step."""

    noop_max: int = field(
        default=30,
        metadata=_doc(
            "NoopReset: after each real game reset, do 1..noop_max single-frame no-ops, the "
            "number drawn from the env's np_random (seeded by reset(seed=...)). 0 disables it."
        ),
    )
    frame_skip: int = field(
        default=4,
        metadata=_doc(
            "MaxAndSkip: repeat each agent action for this many emulator frames, summing rewards."
        ),
    )
    max_pool: bool = field(
        default=True,
        metadata=_doc(
            "MaxAndSkip: the observed frame is the pixel-wise max of the skip's last two frames "
            "(removes Atari sprite flicker). If the game ends before the skip's last frame, the "
            "frame where it ended is used as is. No effect when frame_skip == 1."
        ),
    )
    episodic_life: bool = field(
        default=True,
        metadata=_doc(
            "EpisodicLife: losing a life returns terminated=True; the reset() that follows does "
            "not restart the game but plays one no-op step. The game really restarts only after "
            "game over, the frame limit, a seeded reset, or a reset() not following a life loss."
        ),
    )
    fire_reset: bool = field(
        default=True,
        metadata=_doc(
            "FireReset: after every reset (real or after a life loss) press FIRE then action 2, "
            "only in games whose action set has FIRE (Pong, Breakout, ...)."
        ),
    )
    screen_size: int | tuple[int, int] = field(
        default=84,
        metadata=_doc(
            "WarpFrame: frames are resized to screen_size x screen_size (or (height, width)) with "
            "cv2.resize INTER_AREA."
        ),
    )
    grayscale: bool = field(
        default=True,
        metadata=_doc(
            "Grey frames from ALE's own palette (getScreenGrayscale). False: RGB frames; each "
            "stacked frame then takes 3 channels, obs [frame_stack * 3, H, W] ordered "
            "(oldest R, G, B, ..., newest R, G, B)."
        ),
    )
    frame_stack: int = field(
        default=4,
        metadata=_doc(
            "FrameStack: the last frame_stack frames are stacked as channels, oldest first: "
            "obs uint8 [frame_stack * channels, H, W]. At reset every slot holds the reset frame."
        ),
    )
    clip_rewards: bool = field(
        default=True,
        metadata=_doc(
            "ClipReward: the reward returned by step() is sign(reward) in {-1, 0, 1}. Episode "
            "statistics always use the real, unclipped score."
        ),
    )
    repeat_action_probability: float = field(
        default=0.0,
        metadata=_doc(
            "Sticky actions (Machado et al. 2018): per emulator frame, the probability that ALE "
            "repeats the previous action instead. 0.0 = the deterministic DQN protocol."
        ),
    )
    full_action_space: bool = field(
        default=False,
        metadata=_doc("Use all 18 ALE actions instead of the game's minimal action set."),
    )
    max_episode_frames: int | None = field(
        default=108_000,
        metadata=_doc(
            "Frame limit: when a game has run this many emulator frames (counted from the game's "
            "reset, no-ops included) an agent step returns truncated=True and the game really "
            "ends. Checked after each agent step, so a game may overshoot by < frame_skip frames. "
            "None disables it."
        ),
    )
    render_mode: Literal["rgb_array"] | None = field(
        default=None,
        metadata=_doc('None or "rgb_array": render() returns the RGB screen [210, 160, 3].'),
    )
    implementation: Literal["lean", "wrappers"] = field(
        default="lean",
        metadata=_doc(
            '"lean": one class driving ale_py.ALEInterface with preallocated buffers (fast, the '
            'default). "wrappers": the readable wrapper chain (the reference). Same protocol, '
            "identical outputs frame for frame for the same seed and actions."
        ),
    )

    def __post_init__(self) -> None:
        self.validate()

    # --- construction & description ------------------------------------------------------
    @classmethod
    def from_kwargs(cls, **options: Any) -> AtariOptions:
        """Build from keyword options, naming close matches for an unknown option."""
        names = cls.option_names()
        for name in options:
            if name not in names:
                raise InvalidOptionError(unknown_option_message(name, names, "Atari envs"))
        return cls(**options)

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Option name -> default value."""
        return {f.name: f.default for f in dataclasses.fields(cls)}

    @classmethod
    def describe(cls) -> str:
        """One line per option: name, default and what it does."""
        lines = []
        for f in dataclasses.fields(cls):
            lines.append(f"{f.name}={f.default!r}: {f.metadata.get('doc', '')}")
        return "\n".join(lines)

    @property
    def screen_hw(self) -> tuple[int, int]:
        """``(height, width)`` of one resized frame."""
        if isinstance(self.screen_size, tuple):
            return self.screen_size
        return (self.screen_size, self.screen_size)

    @property
    def channels(self) -> int:
        """Channels of one frame: 1 grey, 3 RGB."""
        return 1 if self.grayscale else 3

    @property
    def obs_shape(self) -> tuple[int, int, int]:
        """Shape of the stacked observation, channels first."""
        return (self.frame_stack * self.channels, *self.screen_hw)

    # --- validation ----------------------------------------------------------------------
    def validate(self) -> None:
        """Raise ``InvalidOptionError`` naming the option, the bad value and what is allowed."""
        _check_int("noop_max", self.noop_max, minimum=0)
        _check_int("frame_skip", self.frame_skip, minimum=1)
        _check_int("frame_stack", self.frame_stack, minimum=1)
        for name in (
            "max_pool",
            "episodic_life",
            "fire_reset",
            "grayscale",
            "clip_rewards",
            "full_action_space",
        ):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise InvalidOptionError(f"option {name} must be True or False, got {value!r}")
        size = self.screen_size
        if isinstance(size, tuple | list):
            if len(size) != 2 or not all(_is_int(s) and s >= 1 for s in size):
                raise InvalidOptionError(
                    f"option screen_size must be an int >= 1 or a (height, width) pair of ints "
                    f">= 1, got {size!r}"
                )
            object.__setattr__(self, "screen_size", (int(size[0]), int(size[1])))
        else:
            _check_int("screen_size", size, minimum=1)
        rap = self.repeat_action_probability
        if isinstance(rap, bool) or not isinstance(rap, numbers.Real) or not 0.0 <= rap <= 1.0:
            raise InvalidOptionError(
                f"option repeat_action_probability must be a float in [0, 1], got {rap!r}"
            )
        if self.max_episode_frames is not None:
            _check_int("max_episode_frames", self.max_episode_frames, minimum=1, allow_none=True)
        if self.render_mode not in RENDER_MODES:
            raise InvalidOptionError(
                f"option render_mode must be None or 'rgb_array', got {self.render_mode!r} "
                "(the Atari stack has no 'human' mode; record rgb_array frames instead)"
            )
        if self.implementation not in IMPLEMENTATIONS:
            raise InvalidOptionError(
                f"option implementation must be one of {IMPLEMENTATIONS}, got "
                f"{self.implementation!r}"
            )


def _is_int(value: Any) -> bool:
    # bool is an int subclass; True as a frame count is almost surely a mistake.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_int(name: str, value: Any, minimum: int, allow_none: bool = False) -> None:
    if not _is_int(value) or value < minimum:
        none = " or None" if allow_none else ""
        raise InvalidOptionError(f"option {name} must be an int >= {minimum}{none}, got {value!r}")


def unknown_option_message(name: str, valid: tuple[str, ...] | list[str], where: str) -> str:
    close = difflib.get_close_matches(name, valid, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else "."
    return f"unknown option {name!r} for {where}{hint} Valid options: {', '.join(valid)}."
