"""Typed, frozen configs and the preset machinery shared by every command.

Every algorithm keeps its own frozen dataclass (``algos/<algo>/config.py``) with a docstring per
field, a ``validate()`` for cross-field checks and a dict of named presets; the fields every
trainer shares (the env and its Atari options, how long a run goes, where it writes, how often it
logs and checkpoints) are :class:`TrainerConfig`'s, written and documented once. :func:`parse_config`
turns ``--preset NAME`` plus the remaining flags into a resolved, validated config via tyro, so
``--help`` documents every field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """An inconsistent or unknown configuration; the message says which fields and how to fix."""


def _split_preset(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    argv = list(argv)
    for i, a in enumerate(argv):
        if a == "--preset":
            if i + 1 >= len(argv):
                raise ConfigError("--preset needs a name")
            return argv[i + 1], argv[:i] + argv[i + 2 :]
        if a.startswith("--preset="):
            return a.split("=", 1)[1], argv[:i] + argv[i + 1 :]
    return None, argv


@dataclass(frozen=True)
class TrainerConfig:
    """The fields of every trainer config (DQN, PPO, PQN): the env, then the run. Each
    algorithm's config adds its own fields after these (including ``max_frames``, whose default
    differs) and checks these too in its ``validate()``."""

    # --- env ----------------------------------------------------------------------------------
    env: str = "pong"
    """Env id or alias: pong, ALE/Pong-v5, PongNoFrameskip-v4, CartPole-v1,
    rapidrl/CartPoleNoVel-v1 (CartPole with the velocities hidden, a memory task), ... (rapidrl
    envs lists them). Discrete actions."""
    episodic_life: bool = True
    """Atari: a lost life ends the learner's episode (terminated: no bootstrap; an LSTM's state
    resets) while the game and its score go on. Ignored off Atari."""
    clip_rewards: bool = True
    """Atari: learn from sign(reward); episode scores are always the real ones. Ignored off
    Atari."""
    noop_max: int = 30
    """Atari: up to this many no-ops after each game reset (random starts). Ignored off Atari."""
    sticky_actions: float = 0.0
    """Atari: ALE repeat_action_probability (0 = the deterministic DQN protocol)."""
    fire_reset: bool = True
    """Atari: press FIRE (then action 2) after every reset and lost life, in games whose action
    set has FIRE (Breakout, Pong, ...): games that wait for FIRE start without the agent having
    to find it. Ignored off Atari."""
    full_action_space: bool = False
    """Atari: all 18 ALE actions instead of the game's minimal set (e.g. Pong's 6). Ignored off
    Atari."""
    max_episode_frames: int | None = 108_000
    """Atari: a game is cut (truncated: bootstrapped) after this many emulator frames, 30 min of
    play (the standard cap). None: no cap. Ignored off Atari."""
    obs_size: int = 84
    """Atari: frames are resized to obs_size x obs_size (84: the DQN protocol). Smaller frames
    make the conv torso cheaper: 64 with the Nature CNN (a 4x4 instead of 7x7 feature map)
    trains 1.9-2.6x faster per sample on a 2-core Zen 4 (scripts/torso_costs.py: fp32, bf16,
    AVX2-capped). Ignored off Atari."""
    frame_stack: int = 4
    """Atari: an observation stacks the last frame_stack frames as channels ([frame_stack, H,
    W]; 4: the DQN protocol). 2 halves the first convolution's input, the costliest layer of
    the Nature CNN on small frames; the ball's position and velocity still show in two frames.
    Ignored off Atari."""

    # --- run ----------------------------------------------------------------------------------
    max_minutes: float | None = None
    """Stop after this many minutes of training (all sessions of a resumed run together)."""
    stop_at_score: float | Literal["auto"] | None = "auto"
    """Stop when the mean score of the last score_window episodes exceeds this. auto: 18 on
    Pong (the 'solved' bar), the env's reward_threshold if it registers one (CartPole-v1: 475),
    else never. None: never."""
    score_window: int = 100
    """Episodes in the moving mean used for stop_at_score and return_mean_100."""
    run_dir: str | None = None
    """Run directory (default runs/<algo>-<env>-<time>)."""
    resume: str | None = None
    """Continue the run in this directory from its newest checkpoint (its config.json gives
    the defaults; flags still override). See the algorithm's train module for what is exact."""
    checkpoint_every_seconds: float = 600.0
    """Checkpoint every this many seconds (between updates; also at the end, and on Ctrl-C)."""
    checkpoint_every_frames: int | None = None
    """Also checkpoint every this many frames (deterministic points, e.g. for tests)."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk."""
    log_every_seconds: float = 10.0
    """A metrics.csv / TensorBoard row every this many seconds, between updates (0: off)."""
    log_every_frames: int | None = None
    """Also a row every this many frames (deterministic rows, e.g. for tests)."""
    tensorboard: bool = True
    """Write TensorBoard events to <run_dir>/tb."""
    no_progress: bool = False
    """No progress bar (it is shown only on a terminal anyway)."""

    def validate_common(self, algo: str) -> None:
        """The checks of these fields (every config's ``validate()`` calls it first, with the
        algorithm its ``algo`` field must name); raise ``ConfigError`` naming the field and the
        fix."""
        got = getattr(self, "algo", None)
        need(got == algo, f"algo must be {algo!r} for {type(self).__name__}, got {got!r}")
        self.require_ints("keep_checkpoints", "score_window", "frame_stack")
        need(self.noop_max >= 0, f"--noop-max must be >= 0, got {self.noop_max}")
        need(
            self.max_episode_frames is None or self.max_episode_frames >= 1,
            f"--max-episode-frames must be >= 1 or None, got {self.max_episode_frames}",
        )
        need(
            0.0 <= self.sticky_actions <= 1.0,
            f"--sticky-actions must be in [0, 1], got {self.sticky_actions}",
        )
        need(self.obs_size >= 8, f"--obs-size must be >= 8 pixels, got {self.obs_size}")
        need(
            self.max_minutes is None or self.max_minutes > 0,
            f"--max-minutes must be > 0 or None, got {self.max_minutes}",
        )
        need(self.log_every_seconds >= 0, "--log-every-seconds must be >= 0 (0: off)")
        need(self.checkpoint_every_seconds > 0, "--checkpoint-every-seconds must be > 0")
        for name in ("log_every_frames", "checkpoint_every_frames"):
            v = getattr(self, name)
            need(v is None or v >= 1, f"--{flag_name(name)} must be >= 1 or None, got {v}")
        if isinstance(self.stop_at_score, str) and self.stop_at_score != "auto":
            raise ConfigError(
                f"--stop-at-score must be a number, 'auto' or None, got {self.stop_at_score!r}"
            )
        if self.resume is not None and self.run_dir is not None and self.run_dir != self.resume:
            raise ConfigError(
                f"--resume {self.resume} and --run-dir {self.run_dir} disagree; --resume alone "
                "names the run directory to continue"
            )

    def require_ints(self, *names: str, minimum: int = 1) -> None:
        """``ConfigError`` unless each field in ``names`` is an int >= ``minimum``."""
        for name in names:
            v = getattr(self, name)
            need(
                isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
                f"--{flag_name(name)} must be an int >= {minimum}, got {v!r}",
            )


def need(cond: bool, message: str) -> None:
    """``ConfigError(message)`` unless ``cond``: the one line of every config check."""
    if not cond:
        raise ConfigError(message)


def flag_name(field: str) -> str:
    """The command-line flag of a config field, without the dashes: ``max_frames`` ->
    ``max-frames``."""
    return field.replace("_", "-")


RAY_LOCAL = "local"
RAY_SERIAL = "serial"  # the Ray drivers with their workers in this process (no Ray)


def _ray_flag_default(cls: type, argv: list[str]) -> list[str]:
    """``--ray`` given without a value (last, or followed by another flag) means ``--ray local``
    (for configs with a ``ray`` field)."""
    if not any(f.name == "ray" for f in dataclasses.fields(cls)):
        return argv
    out = []
    for i, a in enumerate(argv):
        out.append(a)
        if a == "--ray" and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out.append(RAY_LOCAL)
    return out


def ray_workers(value: str | int) -> int | str:
    """A config's ``workers`` (``--workers auto`` or a count, given as text) as the Ray sampler
    takes it: ``"auto"`` or a positive int. Raises ``ConfigError`` for anything else."""
    text = str(value).strip().lower()
    if text == "auto":
        return "auto"
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"--workers must be 'auto' or an int >= 1, got {value!r}")
    return n


def parse_config(
    cls: type[T],
    presets: dict[str, T],
    argv: Sequence[str],
    prog: str,
    default_preset: str | None = None,
    description: str | None = None,
) -> T:
    """``--preset NAME`` picks the defaults; every other flag overrides a field (tyro)."""
    import difflib

    import tyro

    name, rest = _split_preset(argv)
    rest = _ray_flag_default(cls, rest)
    name = name or default_preset
    if name is None:
        default = cls()
    elif name in presets:
        default = presets[name]
    else:
        close = difflib.get_close_matches(name, list(presets), n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(
            f"unknown preset {name!r}{hint} Available presets: {', '.join(sorted(presets))}"
        )
    preset_help = ", ".join(sorted(presets))
    desc = (description or (cls.__doc__ or "")).strip()
    desc += f"\n\n--preset NAME picks the defaults below (presets: {preset_help}"
    desc += f"; default: {name or 'none'}). Any flag overrides a preset value."
    cfg = tyro.cli(cls, args=rest, default=default, prog=prog, description=desc)
    validate = getattr(cfg, "validate", None)
    if validate is not None:
        validate()
    return cfg


def replace(cfg: T, **changes: Any) -> T:
    """``dataclasses.replace`` that re-validates."""
    new = dataclasses.replace(cfg, **changes)
    validate = getattr(new, "validate", None)
    if validate is not None:
        validate()
    return new


@dataclass(frozen=True)
class BenchEnvsConfig:
    """Measure agent steps/s of every vector backend and layout (and gymnasium's vectorizers as
    the baseline) in one run; optionally pick and store the fastest layout for this machine."""

    env: str = "pong"
    """Env id or alias (pong, ALE/Pong-v5, PongNoFrameskip-v4, CartPole-v1, ...)."""
    num_envs: str = "1,2,4,8,16"
    """Comma-separated numbers of envs to measure."""
    seconds: float = 10.0
    """Seconds of stepping per measurement (after a 1 s warm-up)."""
    repeats: int = 3
    """Repeats per layout, interleaved round robin; the table shows the median and min-max."""
    backends: str = ""
    """Comma-separated subset of backends/baselines to measure (empty: all). Names: serial,
    subprocess, hybrid, async, ale, envpool, gym-sync, gym-async."""
    json: str | None = None
    """Write all records and the summary table to this JSON file."""
    png: str | None = None
    """Write the time-per-step vs number-of-envs plot to this PNG file."""
    autotune: bool = False
    """Store the fastest layout per number of envs for backend='auto', then verify it."""

    def num_envs_list(self) -> list[int]:
        try:
            out = [int(x) for x in self.num_envs.replace(" ", "").split(",") if x]
        except ValueError:
            raise ConfigError(
                f"--num-envs must be comma-separated integers like 1,2,4,8, got {self.num_envs!r}"
            ) from None
        if not out or min(out) < 1:
            raise ConfigError(f"--num-envs needs positive integers, got {self.num_envs!r}")
        return out

    def validate(self) -> None:
        self.num_envs_list()
        if self.seconds <= 0 or self.repeats < 1:
            raise ConfigError("--seconds must be > 0 and --repeats >= 1")
