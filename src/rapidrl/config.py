"""Typed, frozen configs and the preset machinery shared by every command.

Every algorithm keeps its own frozen dataclass (``algos/<algo>/config.py``) with a docstring per
field, a ``validate()`` for cross-field checks and a dict of named presets; the fields every
trainer shares (the env and its Atari options, how long a run goes, where it writes, how often it
logs and checkpoints) are :class:`TrainerConfig`'s, written and documented once. :func:`parse_config`
turns ``--preset NAME``, ``--config FILE`` and the remaining flags into a resolved, validated
config via tyro, so ``--help`` documents every field. Each layer overrides the one before:
the preset's defaults < the config file's fields (:func:`load_config_file`) < command-line flags.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """An inconsistent or unknown configuration; the message says which fields and how to fix."""


def _split_flag(argv: Sequence[str], flag: str, what: str) -> tuple[str | None, list[str]]:
    """``(VALUE, argv without it)`` for ``flag VALUE`` or ``flag=VALUE`` in ``argv`` (``None``
    if absent); ``ConfigError`` if it has no value or comes twice. ``what`` names the value."""
    value, rest, i = None, [], 0
    argv = list(argv)
    while i < len(argv):
        a = argv[i]
        if a == flag or a.startswith(flag + "="):
            if value is not None:
                raise ConfigError(f"{flag} given twice; give one {what}")
            if a == flag:
                if i + 1 >= len(argv):
                    raise ConfigError(f"{flag} needs a {what}")
                value, i = argv[i + 1], i + 2
            else:
                value, i = a.split("=", 1)[1], i + 1
            continue
        rest.append(a)
        i += 1
    return value, rest


def _split_preset(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    return _split_flag(argv, "--preset", "name")


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of ``--flag VALUE`` or ``--flag=VALUE`` in ``argv`` (None if absent)."""
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


# --------------------------------------------------------------------------------------------
# --config FILE: a file of config fields between the preset and the command-line flags
# --------------------------------------------------------------------------------------------
RUN_LOCATION_FIELDS = ("run_dir", "resume")
"""Fields a config file never sets: they say where a run lives, and a run's own config.json
names its own directory. A run started from another run's config.json is a new run in a new
directory (``--run-dir`` on the command line, else the default)."""

CONFIG_FILE_SUFFIXES = (".json", ".yaml", ".yml", ".toml")


def config_file_help(cls: type, presets: bool = True) -> str:
    """What ``--help`` says about ``--config FILE`` for the config ``cls``."""
    names = {f.name for f in dataclasses.fields(cls)}
    text = (
        "--config FILE reads config fields from a YAML (.yaml/.yml), JSON (.json) or TOML "
        "(.toml) file: a mapping of field names to values (max_frames: 1000000; max-frames, as "
        "the flag is spelled, works too)"
    )
    text += "; a run's own config.json works as it is. " if "run_dir" in names else ". "
    text += f"Order: {'preset' if presets else 'the'} defaults < config file < command-line flags."
    location = [f for f in RUN_LOCATION_FIELDS if f in names]
    if location:
        text += (
            f" A file's {' and '.join(location)} {'are' if len(location) > 1 else 'is'} ignored: "
            "a run started from another run's config.json is a new run in a new directory "
            "(give --run-dir on the command line)."
        )
    if "resume" in names:
        text += " --resume RUN_DIR continues with the run's own config and refuses --config."
    return text


def _yaml_loader():
    """PyYAML's SafeLoader, but ``1e-4`` is a float (YAML 1.1 wants ``1.0e-4``), as in JSON and
    on the command line; ``None`` when PyYAML is not installed."""
    try:
        import yaml
    except ImportError:
        return None
    import re

    class Loader(yaml.SafeLoader):
        pass

    # SafeLoader's float pattern with the dot optional: 1e-4, 3E5, -2.5e+3, .5, 1.0, inf, nan.
    Loader.yaml_implicit_resolvers = {
        k: [r for r in v if r[0] != "tag:yaml.org,2002:float"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(
            r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
            |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
            |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
            |[-+]?\.(?:inf|Inf|INF)
            |\.(?:nan|NaN|NAN))$""",
            re.X,
        ),
        list("-+0123456789."),
    )
    return Loader


def read_config_file(path: str | os.PathLike, what: str = "--config") -> dict[str, Any]:
    """The mapping of config fields in a ``--config`` file (by its suffix: JSON, YAML, TOML).
    ``ConfigError`` naming the file (as ``what PATH``) and what is wrong: missing, unreadable, an
    unknown suffix, not parseable (with the line and column where the parser gives them), not a
    mapping."""
    path = Path(path)
    where = f"{what} {path}"
    suffix = path.suffix.lower()
    if path.is_dir():
        hint = (
            f"; a run's config is {path / 'config.json'}"
            if (path / "config.json").is_file()
            else ""
        )
        raise ConfigError(f"{where}: is a directory, not a file{hint}")
    if not path.exists():
        raise ConfigError(f"{where}: no such file")
    if suffix not in CONFIG_FILE_SUFFIXES:
        raise ConfigError(
            f"{where}: unknown file type {suffix or '(no suffix)'!r}; give a .json, .yaml, .yml "
            "or .toml file"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read it ({exc})") from None
    kind = {".json": "JSON", ".toml": "TOML"}.get(suffix, "YAML")
    if suffix == ".json":
        import json

        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{where}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
            ) from None
    elif suffix == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise ConfigError(
                f"{where}: reading TOML needs Python 3.11 or later (tomllib); give a .json or "
                ".yaml file"
            ) from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:  # its message says the line and column
            raise ConfigError(f"{where}: not valid TOML ({exc})") from None
    else:
        loader = _yaml_loader()
        if loader is None:
            raise ConfigError(
                f"{where}: reading YAML needs PyYAML (pip install pyyaml); or give a .json file"
            )
        import yaml

        try:
            data = yaml.load(text, Loader=loader)  # a SafeLoader subclass
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise ConfigError(f"{where}: not valid YAML ({problem}{at})") from None
    if data is None:
        raise ConfigError(f"{where}: is empty; it needs a mapping of config fields (field: value)")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{where}: holds a {kind} {type(data).__name__}, not a mapping of config fields "
            "(field: value)"
        )
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise ConfigError(f"{where}: field names must be strings, got {bad[0]!r}")
    return data


def load_config_file(cls: type[T], path: str | os.PathLike, base: T) -> T:
    """``base`` (the preset's config) with the fields in the ``--config`` file ``path`` set, not
    validated (the flags come next). Field names are the config's (``max_frames``) or its flags'
    (``max-frames``); :data:`RUN_LOCATION_FIELDS` in the file are ignored. ``ConfigError``
    naming the file for anything :func:`read_config_file` refuses, a field of another
    algorithm's config, an unknown field (with close matches) and a value of the wrong type
    (naming the field)."""
    import difflib

    where = f"--config {path}"
    data: dict[str, Any] = {}
    for key, value in read_config_file(path).items():
        name = key.replace("-", "_")
        if name in data:
            raise ConfigError(f"{where}: field {name!r} given twice (as {key!r} too)")
        data[name] = value
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    want = getattr(base, "algo", None)  # a trainer's: a bench's algo field is a choice
    if issubclass(cls, TrainerConfig) and "algo" in data and data["algo"] != want:
        raise ConfigError(
            f"{where}: is a config of algo {data['algo']!r}, and this trainer's algo is "
            f"{want!r}; give the file to rapidrl train {data['algo']}"
        )
    unknown = [k for k in data if k not in fields]
    if unknown:
        parts = []
        for k in unknown:
            close = difflib.get_close_matches(k, sorted(fields), n=3)
            parts.append(f"{k!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
        raise ConfigError(
            f"{where}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(parts)} for "
            f"{cls.__name__}; the fields are the --help flags, - or _ alike"
        )
    if isinstance(data.get("env_kwargs"), Mapping):  # the SB3 zoo's form: {key: value}
        import json

        data["env_kwargs"] = [f"{k}={json.dumps(v)}" for k, v in data["env_kwargs"].items()]
    merged = config_to_dict(base)
    merged.update({k: v for k, v in data.items() if k not in RUN_LOCATION_FIELDS})
    try:
        return config_from_dict(cls, merged)
    except (TypeError, ValueError) as exc:  # "lr: expected a number, got 'x'": names the field
        raise ConfigError(f"{where}: field {exc}") from None


Backend = Literal["auto", "serial", "subprocess", "hybrid", "async", "ale", "envpool"]
"""A vector-env backend (rapidrl.vector.make_vec)."""
Precision = Literal["fp32", "bf16", "auto"]
"""The conv torso's compute dtype (rapidrl.nets.torso.resolve_precision)."""
Device = Literal["auto", "cpu", "cuda"]
"""The learner's device."""


def parse_env_kwargs(items: Sequence[str]) -> dict[str, Any]:
    """``--env-kwargs KEY=VALUE ...`` as a dict: each VALUE read as JSON where it parses
    (``false``, ``0.1``, ``null``, ``[1, 2]``; Python's ``True`` / ``False`` / ``None`` too),
    else kept as a string. ``ConfigError`` for an item without ``=`` or a key given twice."""
    import json

    python_words = {"True": True, "False": False, "None": None}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = str(item).partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ConfigError(
                f"--env-kwargs takes KEY=VALUE items (e.g. include_cfrc_ext_in_observation=false), "
                f"got {item!r}"
            )
        if key in out:
            raise ConfigError(f"--env-kwargs gives {key!r} twice; give it once")
        raw = raw.strip()
        if raw in python_words:
            out[key] = python_words[raw]
            continue
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


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
    env_kwargs: tuple[str, ...] = ()
    """Other envs (MuJoCo, ...): arguments of the env's constructor, KEY=VALUE each (VALUE read
    as JSON where it parses: false, 0.1; else a string; a --config file may give a mapping), as
    the SB3 zoo's env_kwargs; e.g. Ant-v5 include_cfrc_ext_in_observation=false (27 dims, Ant-v4's
    and EnvPool's observation). Atari: the flags above."""

    # --- envs and learner ---------------------------------------------------------------------
    backend: Backend = "auto"
    """Vector env backend: auto = serial for 1 env, else the autotuned layout of `rapidrl bench
    envs --autotune` (hybrid if none). First-ready layouts (async): PPO assembles each rollout
    per env, PQN steps until every env has stepped, DQN acts on the envs returned."""
    num_workers: int | None = None
    """Env worker processes (hybrid/async) or threads (ale/envpool); None: the backend's
    default."""
    seed: int = 1
    """Seeds torch, numpy, the algorithm's own generators (exploration, sampling, shuffles,
    replay) and the envs (env i: seed + i)."""
    device: Device = "auto"
    """Learner device; auto = cuda if available (env workers and actors act on CPU)."""

    # --- run ----------------------------------------------------------------------------------
    max_minutes: float | None = None
    """Stop after this many minutes of training (all sessions of a resumed run together)."""
    stop_at_score: float | Literal["auto"] | None = "auto"
    """Stop when the mean score of the last score_window episodes exceeds this. auto: 18 on
    Pong (the 'solved' bar), the env's reward_threshold if it registers one (CartPole-v1: 475),
    else never. None: never."""
    score_window: int = 100
    """Episodes in the moving mean used for stop_at_score and return_mean_100."""
    eval_episodes: int = 0
    """At the end of a run that stops on its own (not Ctrl-C), play this many full episodes of
    the final policy, greedy (the SB3 zoo's protocol; `rapidrl eval`'s): eval.json, and
    eval_mean / eval_std in summary.json (and W&B's, with --track wandb). 0: none."""
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
    track: Literal["none", "wandb"] = "none"
    """wandb: also send the config, every metrics row, the summary and the learning curve to
    Weights & Biases (pip install -e '.[wandb]' in the rapidrl checkout); offline when not logged in (wandb sync
    later). The run's name is the run dir's, its id kept in the run dir (a resume goes on in
    it); rows go once a checkpoint covers them, so after a crash W&B holds metrics.csv's rows."""
    track_project: str = "rapidrl"
    """The W&B project of --track wandb."""
    track_group: str | None = None
    """The W&B group of --track wandb (a sweep sets its name)."""

    def validate_common(self, algo: str) -> None:
        """The checks of these fields (every config's ``validate()`` calls it first, with the
        algorithm its ``algo`` field must name); raise ``ConfigError`` naming the field and the
        fix."""
        got = getattr(self, "algo", None)
        need(got == algo, f"algo must be {algo!r} for {type(self).__name__}, got {got!r}")
        self.require_ints("keep_checkpoints", "score_window", "frame_stack")
        self.require_ints("eval_episodes", minimum=0)
        parse_env_kwargs(self.env_kwargs)
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
        if self.backend == "serial" and self.num_workers not in (None, 1):
            raise ConfigError(
                "--backend serial runs every env in one process; drop --num-workers or use "
                "--backend hybrid"
            )

    def require_ints(self, *names: str, minimum: int = 1) -> None:
        """``ConfigError`` unless each field in ``names`` is an int >= ``minimum``."""
        for name in names:
            v = getattr(self, name)
            need(
                isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
                f"--{flag_name(name)} must be an int >= {minimum}, got {v!r}",
            )


@dataclass(frozen=True)
class RayTrainerConfig(TrainerConfig):
    """:class:`TrainerConfig` and the fields of a trainer whose experience can come from Ray
    workers (each algorithm's ``ray_loop`` module says how its driver uses them)."""

    ray: str | None = None
    """Collect experience on Ray: local = start Ray on this machine (also `--ray` alone), else
    the address of a running cluster (auto, HOST:6379, ray://HOST:10001); serial = the same Ray
    driver with its workers in this process (no Ray needed; for tests and debugging; workers
    auto = 1). None: no Ray, the local vector env. See rapidrl.algos.<algo>.ray_loop."""
    workers: str = "auto"
    """Ray rollout workers: a number, or auto = the cluster's CPUs / ray_cpus_per_worker."""
    envs_per_worker: int = 4
    """Envs in each Ray worker's vector env (--backend; auto = serial inside a worker)."""
    ray_cpus_per_worker: float = 1.0
    """Ray CPUs each worker reserves (its torch threads: the integer part, at least 1)."""

    def validate_ray(self) -> None:
        """The checks of these fields (every such config's ``validate()`` calls it)."""
        ray_workers(self.workers)
        self.require_ints("envs_per_worker")
        need(
            self.ray_cpus_per_worker > 0,
            f"--ray-cpus-per-worker must be > 0, got {self.ray_cpus_per_worker}",
        )
        if self.ray is not None:
            need(bool(self.ray.strip()), "--ray needs 'local', 'serial' or a cluster address")


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
    """``--preset NAME`` picks the defaults, ``--config FILE`` sets the fields it holds, every
    other flag overrides a field (tyro): preset < file < flags. Without presets (and no
    ``default_preset``) ``--preset`` is left to ``cls`` (a bench's own ``preset`` field)."""
    import difflib

    import tyro

    config_file, rest = _split_flag(argv, "--config", "file")
    use_presets = bool(presets) or default_preset is not None
    name, rest = _split_preset(rest) if use_presets else (None, rest)
    rest = _ray_flag_default(cls, rest)
    resume = flag_value(rest, "--resume")
    if config_file is not None and resume is not None and resume != "None":
        raise ConfigError("--resume continues a run with its own config; drop --config")
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
    if config_file is not None:
        default = load_config_file(cls, config_file, default)
    desc = (description or (cls.__doc__ or "")).strip()
    if use_presets:
        desc += f"\n\n--preset NAME picks the defaults below (presets: {', '.join(sorted(presets))}"
        desc += f"; default: {name or 'none'}). Any flag overrides a preset value."
    desc += "\n\n" + config_file_help(cls, use_presets)
    if config_file is not None:
        desc += f" The defaults below include {config_file}."
    cfg = tyro.cli(cls, args=rest, default=default, prog=prog, description=desc)
    validate = getattr(cfg, "validate", None)
    if validate is not None:
        validate()
    return cfg


def parse_or_report(cls: type[T], argv: Sequence[str], prog: str, description: str) -> T | None:
    """:func:`parse_config` for a script's ``main``: the config, or None after printing ``PROG:
    error: MESSAGE`` to stderr (no traceback; the caller exits with 2)."""
    try:
        return parse_config(cls, {}, list(argv), prog=prog, description=description)
    except ConfigError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return None


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


# --------------------------------------------------------------------------------------------
# dataclass <-> JSON (config.json, --config FILE)
# --------------------------------------------------------------------------------------------
def config_to_dict(obj: Any) -> Any:
    """A (nested, frozen) dataclass config -> JSON-ready dicts/lists/scalars.

    Tuples and lists become lists, ``Path`` a string, ``Enum`` its value, numpy scalars Python
    scalars; dict keys become strings. Only ``init`` fields are written: what the constructor
    takes is what ``config_from_dict`` gives back.
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: config_to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init
        }
    if isinstance(obj, enum.Enum):
        return config_to_dict(obj.value)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, Mapping):
        return {str(k): config_to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [config_to_dict(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalar
        return obj.item()
    raise TypeError(f"cannot write {type(obj).__name__} {obj!r} to a JSON config")


def _convert(tp: Any, value: Any, where: str) -> Any:
    """Convert JSON ``value`` to type ``tp`` (a resolved annotation); ``where`` names the field."""
    if tp is Any or tp is object:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, where)
            except (TypeError, ValueError) as e:
                errors.append(str(e))
        raise ValueError(f"{where}: {value!r} matches none of {tp}: {'; '.join(errors)}")
    if origin is typing.Literal:
        if value not in args:
            raise ValueError(f"{where}: {value!r} is not one of {args}")
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise TypeError(f"{where}: expected an object for {tp.__name__}, got {value!r}")
        return config_from_dict(tp, value, _where=where)
    if origin is tuple or tp is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where}: expected a list for {tp}, got {value!r}")
        if not args:
            return tuple(value)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if args == ((),):  # tuple[()]
            args = ()
        if len(args) != len(value):
            raise ValueError(f"{where}: expected {len(args)} items for {tp}, got {value!r}")
        return tuple(_convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin in (list, set, frozenset) or tp in (list, set, frozenset):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where}: expected a list for {tp}, got {value!r}")
        items = [_convert(args[0], v, f"{where}[{i}]") if args else v for i, v in enumerate(value)]
        return (origin or tp)(items)
    if origin is dict or tp is dict or origin is Mapping:
        if not isinstance(value, Mapping):
            raise TypeError(f"{where}: expected an object for {tp}, got {value!r}")
        kt, vt = args if args else (Any, Any)
        return {
            _convert(kt, k, where) if kt is not str else k: _convert(vt, v, f"{where}.{k}")
            for k, v in value.items()
        }
    if isinstance(tp, type):
        if issubclass(tp, enum.Enum):
            return tp(value)
        if issubclass(tp, os.PathLike) or tp is Path:
            return Path(value)
        if tp is bool:
            if not isinstance(value, bool):
                raise TypeError(f"{where}: expected a bool, got {value!r}")
            return value
        if tp is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{where}: expected a number, got {value!r}")
            return float(value)
        if tp is int:
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, str) and value.lstrip("-").isdigit():  # from dict keys
                    return int(value)
                raise TypeError(f"{where}: expected an int, got {value!r}")
            return value
        if tp is str:
            if not isinstance(value, str):
                raise TypeError(f"{where}: expected a string, got {value!r}")
            return value
    return value


def config_from_dict(cls: type[T], data: Mapping[str, Any], *, _where: str = "") -> T:
    """JSON dicts -> the dataclass ``cls`` (nested dataclasses, tuples, ``X | None`` rebuilt).

    Unknown keys raise ``ValueError`` naming them (a renamed field must not be dropped silently);
    missing keys take the field's default (a config written before the field existed), or the
    value ``cls.FORMER_DEFAULTS`` gives for it: what such a config meant, where a new field's
    default changed the behaviour (a resumed run must go on as it ran).

    Ours rather than a library's: tried on the same cases, cattrs 26.2 coerces (``1.5`` -> ``1``
    and ``True`` -> ``1`` for an int, ``"2"`` -> ``2.0`` for a float) and dacite 1.9 takes
    ``True`` for an int, keeps an int in a ``tuple[int, float]``, and names no field for an
    unknown nested key or enum value; every error here names its field's path.
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass type")
    hints = typing.get_type_hints(cls, include_extras=False)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(
            f"{_where or cls.__name__}: unknown config field(s) {unknown} for {cls.__name__}; "
            f"known: {sorted(fields)}"
        )
    kwargs = {
        name: _convert(hints.get(name, Any), data[name], f"{_where}.{name}" if _where else name)
        for name in fields
        if name in data
    }
    former = getattr(cls, "FORMER_DEFAULTS", {})
    kwargs.update({k: v for k, v in former.items() if k in fields and k not in data})
    return cls(**kwargs)
