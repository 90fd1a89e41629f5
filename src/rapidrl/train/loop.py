"""What every trainer needs before and around its loop, the same for each algorithm: the device,
torch thread counts, malloc's heap kept (:func:`keep_freed_memory`), the env probe (spaces,
make_env options, frame skip, the stop score ``"auto"``), the env seeds of a (re)start, and
:func:`start_run` (the run dir made or reopened, the learner started on it). The session around
the loop is :mod:`rapidrl.train.session`, the command line :mod:`rapidrl.train.cli`, the loop
itself :mod:`rapidrl.train.runner`.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import sys
from typing import Any, TypeVar

import numpy as np
import torch

from rapidrl.config import ConfigError, parse_env_kwargs
from rapidrl.hardware import cpu_count
from rapidrl.train.run import RunDir

__all__ = [
    "EnvProbe",
    "atari_env_options",
    "cpu_count",
    "env_options",
    "keep_freed_memory",
    "num_threads",
    "probe_env",
    "resolve_device",
    "resolve_stop_score",
    "restart_env_seed",
    "start_run",
]

T = TypeVar("T")


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
    screen_size: int = 84,
    fire_reset: bool = True,
    full_action_space: bool = False,
    max_episode_frames: int | None = 108_000,
    frame_stack: int = 4,
) -> dict[str, Any]:
    """The ``make_env`` options of a trainer config (the Atari switches apply to Atari only).
    ``screen_size``, ``fire_reset``, ``full_action_space``, ``max_episode_frames`` and
    ``frame_stack`` are passed only where they differ from the protocol's defaults, so the
    options (and the configs and autotune entries keyed on them) of default runs stay as they
    were."""
    if not is_atari:
        return {}
    options: dict[str, Any] = {
        "episodic_life": episodic_life,
        "clip_rewards": clip_rewards,
        "noop_max": noop_max,
        "repeat_action_probability": sticky_actions,
    }
    for key, value, default in (
        ("screen_size", screen_size, 84),
        ("fire_reset", fire_reset, True),
        ("full_action_space", full_action_space, False),
        ("max_episode_frames", max_episode_frames, 108_000),
        ("frame_stack", frame_stack, 4),
    ):
        if value != default:
            options[key] = value
    return options


def env_options(cfg: Any, is_atari: bool) -> dict[str, Any]:
    """The ``make_env`` options of a trainer config: on Atari its ``episodic_life``,
    ``clip_rewards``, ``noop_max``, ``sticky_actions``, ``obs_size``, ``fire_reset``,
    ``full_action_space``, ``max_episode_frames`` and ``frame_stack`` fields; elsewhere its
    ``env_kwargs`` (the env constructor's arguments; ``ConfigError`` on Atari)."""
    if not is_atari:
        return parse_env_kwargs(cfg.env_kwargs)
    if cfg.env_kwargs:
        raise ConfigError(
            f"--env-kwargs {' '.join(cfg.env_kwargs)}: Atari envs take rapidrl's Atari flags "
            "(--sticky-actions, --obs-size, ...; --help lists them), not constructor arguments; "
            "drop --env-kwargs"
        )
    return atari_env_options(
        is_atari,
        episodic_life=cfg.episodic_life,
        clip_rewards=cfg.clip_rewards,
        noop_max=cfg.noop_max,
        sticky_actions=cfg.sticky_actions,
        screen_size=getattr(cfg, "obs_size", 84),
        fire_reset=getattr(cfg, "fire_reset", True),
        full_action_space=getattr(cfg, "full_action_space", False),
        max_episode_frames=getattr(cfg, "max_episode_frames", 108_000),
        frame_stack=getattr(cfg, "frame_stack", 4),
    )


@dataclasses.dataclass(frozen=True)
class EnvProbe:
    """What a trainer learns about its env before anything goes on disk (:func:`probe_env`)."""

    info: Any
    """The resolved env (:func:`rapidrl.envs.resolve_env`): ids, is_atari, game."""
    options: dict[str, Any]
    """The ``make_env`` options of the config (:func:`env_options`)."""
    frame_skip: int
    """Emulator frames per agent step (4 on Atari, 1 elsewhere): frames = steps x frame_skip."""
    stop_score: float | None
    """The config's ``stop_at_score`` with ``"auto"`` resolved (:func:`resolve_stop_score`)."""
    obs_space: Any
    n_actions: int
    """Discrete actions; continuous: the action's dims."""
    continuous: bool = False
    """A bounded ``Box`` action space (only where the trainer asked for it: PPO)."""
    action_space: Any = None
    """The env's action space (its bounds, where continuous)."""

    @property
    def obs_shape(self) -> tuple[int, ...]:
        return tuple(self.obs_space.shape)


def probe_env(cfg: Any, algo: str, *, continuous: bool = False, discrete: bool = True) -> EnvProbe:
    """Resolve ``cfg.env``, build one env with the config's options to read its spaces, close it.
    The action space must be ``Discrete``, or with ``continuous`` (the trainer takes them: PPO)
    also a bounded one-dimensional ``Box``; anything else is a ``ConfigError`` naming ``algo``
    and what it supports."""
    from rapidrl.envs import make_env, resolve_env

    info = resolve_env(cfg.env)
    options = env_options(cfg, info.is_atari)
    probe = make_env(cfg.env, **options)
    obs_space, act_space = probe.observation_space, probe.action_space
    probe.close()
    n_actions, is_box = check_action_space(
        act_space, cfg.env, algo, continuous=continuous, discrete=discrete
    )
    return EnvProbe(
        info=info,
        options=options,
        frame_skip=options.get("frame_skip", 4) if info.is_atari else 1,
        stop_score=resolve_stop_score(cfg.stop_at_score, info),
        obs_space=obs_space,
        n_actions=n_actions,
        continuous=is_box,
        action_space=act_space,
    )


def check_action_space(
    space: Any, env_id: str, algo: str, *, continuous: bool, discrete: bool = True
) -> tuple[int, bool]:
    """``(n_actions, is_box)`` of an action space a trainer accepts: ``Discrete(n)`` ->
    ``(n, False)``; with ``continuous``, a bounded ``Box`` of shape ``(A,)`` -> ``(A, True)``.
    Anything else (multi-discrete, dict, unbounded or multi-dimensional boxes, or a box for a
    discrete-only trainer, or a ``Discrete`` space for a trainer without ``discrete``: SAC): a
    ``ConfigError`` naming what is supported."""
    import gymnasium as gym

    supported = "Discrete or a bounded 1-D Box (rapidrl train ppo)" if continuous else "Discrete"
    if not discrete:
        supported = "a bounded 1-D Box"
    if isinstance(space, gym.spaces.Discrete):
        if not discrete:
            raise ConfigError(
                f"{algo} needs continuous actions (a bounded 1-D Box); {env_id} has discrete "
                f"actions {space}: `rapidrl train dqn` or `rapidrl train ppo` take them"
            )
        return int(space.n), False
    if isinstance(space, gym.spaces.Box):
        if not continuous:
            raise ConfigError(
                f"{algo} needs a discrete action space; {env_id} has continuous actions "
                f"{space}: `rapidrl train ppo` (feed-forward, local or --ray) and `rapidrl train sac` take them"
            )
        if len(space.shape) != 1:
            raise ConfigError(
                f"{algo}: {env_id}'s action space {space} is not one-dimensional; supported: "
                f"{supported} (an action wrapper of your env can flatten it)"
            )
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise ConfigError(
                f"{algo}: {env_id}'s action space {space} is unbounded; sampled actions are "
                "clipped to the bounds, so they must be finite (wrap the env with "
                "gymnasium.wrappers.RescaleAction or give the Box finite low/high)"
            )
        return int(space.shape[0]), True
    raise ConfigError(
        f"{algo}: {env_id}'s action space {space} is not supported; supported: {supported}"
    )


def start_run(cfg: Any, lrn: Any, env: EnvProbe, *, algo: str) -> RunDir:
    """The run dir of ``cfg`` (made, or reopened with ``--resume``), the learner started on it
    (its checkpoints; on resume everything restored from the newest one), then config.json
    (written once the checkpoint has accepted ``cfg``). Every trainer and Ray driver calls it
    once its config, env and layout are accepted, so a refused start leaves nothing on disk."""
    resuming = cfg.resume is not None
    run = RunDir.create(
        cfg.resume or cfg.run_dir, algo=algo, env_id=env.info.env_id, resume=resuming
    )
    lrn.start(run, stop_score=env.stop_score, resuming=resuming, frame_skip=env.frame_skip)
    run.save_config(cfg)
    return run


@contextlib.contextmanager
def num_threads(n: int):
    """Torch runs on ``n`` threads inside the block (e.g. acting on small batches: 1 thread)."""
    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n != before:
            torch.set_num_threads(before)


_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameters (malloc.h)
_KEEP_ENV = "RAPIDRL_MALLOC"  # "default": leave malloc as it is


def keep_freed_memory() -> bool:
    """Have glibc's malloc serve every allocation from its heap and keep freed memory there (up
    to 1 GiB beyond what is in use), for this process; True when set. Off with
    ``RAPIDRL_MALLOC=default``; nothing happens where the C library is not glibc. A request the
    heap cannot grow to still gets a mapping (glibc falls back to mmap when brk fails).

    Why: an update on CPU allocates and frees tensors of 20-50 MB in every minibatch (a gathered
    minibatch of frames, the first convolution's activations and their gradients). glibc serves
    anything above its mmap threshold (32 MB at most) from a fresh mapping and unmaps it when
    freed, so each such tensor pays its page faults again. Kept, PPO ``lean``'s update took
    1.78 s instead of 2.72 in fp32 and 1.19-1.46 s instead of 1.50-2.00 in bf16 on a 2-core Zen 5
    (docs/results/profile_ppo_lean_zen5/malloc); the values computed are the same.

    It changes malloc for the whole process, so the ``rapidrl train`` command (and ``bench
    profile``) call it, and a library call (``run_training`` from a notebook) does not: call it
    yourself first there if you want the speed.
    """
    if os.environ.get(_KEEP_ENV, "").lower() == "default" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (e.g. musl)
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**30))
