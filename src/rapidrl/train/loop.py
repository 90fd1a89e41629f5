"""Small pieces every training loop needs, the same for each algorithm.

Stop conditions (:func:`stop_reason`), the "every N seconds and/or every N frames" cadence of
metrics rows and checkpoints (:class:`Every`), the stop score ``"auto"`` (:func:`resolve_stop_score`),
devices and thread counts, the env seeds of a (re)start, and the command-line rule for
``--resume RUN_DIR`` (:func:`parse_with_resume`: the run's own config.json gives the defaults).

Extracted from the DQN trainer's conventions so that PPO follows them exactly; the DQN trainer
keeps private copies for now.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from rapidrl.config import ConfigError, parse_config

__all__ = [
    "Every",
    "atari_env_options",
    "cpu_count",
    "flag_value",
    "load_run_config",
    "parse_with_resume",
    "resolve_device",
    "resolve_stop_score",
    "restart_env_seed",
    "stop_reason",
]

T = TypeVar("T")


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def resolve_device(name: str) -> torch.device:
    """``"auto"`` -> cuda if available, else cpu; ``"cuda"`` without CUDA is a ``ConfigError``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda, but torch sees no CUDA device; use --device cpu")
    return torch.device(name)


def restart_env_seed(seed: int, steps: int) -> int:
    """Env seed of a (re)start: ``seed`` for a fresh run, else one derived from the step counter
    (a resumed run restarts its envs; resuming the same checkpoint twice gives the same seeds)."""
    if steps == 0:
        return seed
    return int(np.random.SeedSequence([seed, steps]).generate_state(1)[0] % (2**31 - 2**16))


def resolve_stop_score(stop_at_score: float | str | None, env_info: Any) -> float | None:
    """``stop_at_score`` with ``"auto"`` resolved: 18 on Pong, the env's registered
    ``reward_threshold`` (CartPole-v1: 475), else None (never)."""
    if stop_at_score != "auto":
        return None if stop_at_score is None else float(stop_at_score)
    if env_info.is_atari:
        return 18.0 if env_info.game == "pong" else None
    import gymnasium as gym

    threshold = gym.spec(env_info.gym_id).reward_threshold
    return None if threshold is None else float(threshold)


def atari_env_options(
    is_atari: bool,
    *,
    episodic_life: bool,
    clip_rewards: bool,
    noop_max: int,
    sticky_actions: float,
) -> dict[str, Any]:
    """The ``make_env`` options of a trainer config (the Atari switches apply to Atari only)."""
    if not is_atari:
        return {}
    return {
        "episodic_life": episodic_life,
        "clip_rewards": clip_rewards,
        "noop_max": noop_max,
        "repeat_action_probability": sticky_actions,
    }


def stop_reason(
    *,
    interrupted: bool,
    solved: bool,
    frames: int,
    max_frames: int,
    seconds: float,
    max_minutes: float | None,
) -> str | None:
    """Why a run stops now (checked in this order), or None to go on."""
    if interrupted:
        return "interrupted"
    if solved:
        return "solved"
    if frames >= max_frames:
        return "max_frames"
    if max_minutes is not None and seconds >= 60 * max_minutes:
        return "max_minutes"
    return None


class Every:
    """True every ``seconds`` of wall time and/or every ``frames`` frames, whichever comes first.

    The frame cadence is deterministic (``frames // every`` blocks done, saved through
    ``state_dict`` so a resumed run does not repeat a block); the time cadence is not saved.
    """

    def __init__(self, seconds: float | None = None, frames: int | None = None):
        self.seconds = seconds or None
        self.frames = frames or None
        self.blocks = 0
        self.last_time = time.monotonic()

    def due(self, frames: int, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        by_frames = self.frames is not None and frames // self.frames > self.blocks
        by_time = self.seconds is not None and now - self.last_time >= self.seconds
        return bool(by_frames or by_time)

    def mark(self, frames: int, now: float | None = None) -> None:
        """Record that the action was done at ``frames``."""
        if self.frames is not None:
            self.blocks = frames // self.frames
        self.last_time = time.monotonic() if now is None else now

    def state_dict(self) -> dict[str, int]:
        return {"blocks": self.blocks}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.blocks = int(state["blocks"])
        self.last_time = time.monotonic()


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of ``--flag VALUE`` or ``--flag=VALUE`` in ``argv`` (None if absent)."""
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def load_run_config(cls: type[T], run_dir: str | os.PathLike, algo: str) -> T:
    """The ``cls`` config saved in ``run_dir/config.json`` (``ConfigError`` if absent/foreign)."""
    from rapidrl.train.run import config_from_dict

    path = Path(run_dir) / "config.json"
    if not path.exists():
        raise ConfigError(f"nothing to resume in {run_dir}: no config.json there")
    data = json.loads(path.read_text())
    if data.get("algo", algo) != algo:
        raise ConfigError(f"{run_dir} is a {data['algo']!r} run, not a {algo} run")
    try:
        return config_from_dict(cls, data)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path} does not hold a {cls.__name__}: {exc}") from exc


def parse_with_resume(
    cls: type[T],
    presets: dict[str, T],
    argv: Sequence[str],
    *,
    prog: str,
    default_preset: str,
    algo: str,
) -> T:
    """``--preset NAME`` + field flags -> config. With ``--resume RUN_DIR`` the run's own
    config.json gives the defaults (flags still override; the checkpoint check then rejects
    changes that would alter what the checkpoint means)."""
    import dataclasses

    argv = list(argv)
    resume = flag_value(argv, "--resume")
    if resume and resume != "None":
        if flag_value(argv, "--preset") is not None:
            raise ConfigError("--resume continues a run with its own config; drop --preset")
        saved = load_run_config(cls, resume, algo)
        saved = dataclasses.replace(saved, resume=resume, run_dir=None)
        return parse_config(cls, {"resumed": saved}, argv, prog=prog, default_preset="resumed")
    return parse_config(cls, presets, argv, prog=prog, default_preset=default_preset)
