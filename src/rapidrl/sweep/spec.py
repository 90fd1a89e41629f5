"""A sweep described by one file (YAML, JSON or TOML), checked whole before anything runs.

::

    name: ppo-cartpole-lr           # the sweep's name (its folder, the runs' group)
    algo: ppo                       # ppo | ppo-lstm | pqn | dqn | rainbow
    preset: cartpole                # the base config (rapidrl train ALGO --preset ...)
    env: CartPole-v1                # or a list: every trial runs each env
    fields: {max_frames: 50000}     # config fields every trial sets the same way
    space:                          # config fields searched, one kind of range each
      lr: {loguniform: [1.0e-4, 3.0e-3]}
      clip: {choice: [0.1, 0.2, 0.3]}
      epochs: {int: [2, 6]}         # integers lo..hi, both included
      ent_coef: {uniform: [0.0, 0.02]}
    seeds: [1, 2]                   # every trial runs every seed; its score is their median
    objective: {metric: return_mean_100, mode: max}   # at the end of each run
    # objective: {metric: eval_mean, mode: max}       # or: the final policy's greedy eval
    #                                                 #   (needs eval_episodes in fields)
    # objective: {frames_to_score: 475}               # or: fewest frames to this mean-100
    # objective: {minutes_to_score: 18}               # or: fewest training minutes to it
    #                                                 #   (needs max_minutes in fields)
    budget: {trials: 12, hours: 2}
    early_stop: {scheduler: asha, grace_frames: 10000, reduction_factor: 2}  # or median, none
    cpus_per_trial: 2

Every name is checked against the algorithm's config, every range against its field's type (a
trial config is built from each end of each range and validated), the objective against the
columns the trainer logs: a bad spec is a :class:`rapidrl.config.ConfigError` naming the key and
the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
from dataclasses import dataclass
from typing import Any

from rapidrl.algos import ALGOS, default_preset
from rapidrl.config import ConfigError, config_from_dict, config_to_dict, read_config_file

__all__ = ["ALGOS", "EVAL_METRIC", "Range", "SweepSpec", "load_spec", "parse_spec", "trial_config"]

KINDS = ("choice", "uniform", "loguniform", "int")
SCHEDULERS = ("asha", "median", "none")
_TOP = (
    "name", "algo", "preset", "env", "fields", "space", "seeds", "objective", "budget",
    "early_stop", "cpus_per_trial",
)  # fmt: skip
EVAL_METRIC = "eval_mean"
"""The objective read from each run's summary.json: its final eval (``--eval-episodes``)."""
_NOT_SEARCHED = ("env", "seed", "run_dir", "resume", "algo", "ray")  # the sweep sets these


@dataclass(frozen=True)
class Range:
    """One searched field: ``kind`` (choice, uniform, loguniform, int) and its ``values``
    (the choices, or ``(lo, hi)``)."""

    kind: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class SweepSpec:
    """A checked sweep spec (see the module docstring for each key)."""

    name: str
    algo: str
    preset: str
    envs: tuple[str, ...]
    fields: dict[str, Any]
    space: dict[str, Range]
    seeds: tuple[int, ...]
    metric: str
    mode: str
    frames_to_score: float | None
    trials: int
    hours: float | None
    scheduler: str
    grace_frames: int | None
    reduction_factor: int
    cpus_per_trial: float
    minutes_to_score: float | None = None
    """The objective is the training minutes to this mean-100 (a wall-time sweep)."""

    @property
    def to_score(self) -> float | None:
        """The mean-100 every run stops at (frames_ or minutes_to_score); None: whole budget."""
        return self.frames_to_score if self.frames_to_score is not None else self.minutes_to_score


def _close(name: str, known: Any) -> str:
    near = difflib.get_close_matches(name, list(known), n=3)
    return f" (did you mean {', '.join(near)}?)" if near else ""


def _trainer(algo: str) -> tuple[type, dict[str, Any], tuple[str, ...]]:
    """The algorithm's config class, presets and logged metric columns."""
    from rapidrl.train.metrics import KNOWN_COLUMNS

    if algo in ("ppo", "ppo-lstm"):
        from rapidrl.algos.ppo.config import PPOConfig
        from rapidrl.algos.ppo.learner import METRIC_COLUMNS
        from rapidrl.algos.ppo.train import LSTM_PRESETS, PRESETS

        return PPOConfig, LSTM_PRESETS if algo == "ppo-lstm" else PRESETS, (
            *KNOWN_COLUMNS, *METRIC_COLUMNS,
        )  # fmt: skip
    if algo == "pqn":
        from rapidrl.algos.pqn.config import PRESETS, PQNConfig
        from rapidrl.algos.pqn.learner import METRIC_COLUMNS

        return PQNConfig, PRESETS, (*KNOWN_COLUMNS, *METRIC_COLUMNS)
    if algo == "sac":
        from rapidrl.algos.sac.config import PRESETS, SACConfig
        from rapidrl.algos.sac.learner import METRIC_COLUMNS

        return SACConfig, PRESETS, (*KNOWN_COLUMNS, *METRIC_COLUMNS)
    from rapidrl.algos.dqn.config import PRESETS, DQNConfig
    from rapidrl.algos.dqn.learner import METRIC_COLUMNS

    return DQNConfig, PRESETS, (*KNOWN_COLUMNS, *METRIC_COLUMNS)


def trial_config(spec: SweepSpec, params: dict[str, Any], env: str, seed: int) -> Any:
    """The trainer config of one run of a trial: the preset, then ``fields``, then the trial's
    ``params``, then its env and seed. ``ConfigError`` naming the field for a value its type or
    the config's checks refuse."""
    cls, presets, _ = _trainer(spec.algo)
    data = {**config_to_dict(presets[spec.preset]), **spec.fields, **params}
    data.update(env=env, seed=int(seed), run_dir=None, resume=None)
    try:
        cfg = config_from_dict(cls, data)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"sweep {spec.name}: {exc}") from None
    try:
        cfg.validate()
    except ConfigError as exc:
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
        raise ConfigError(f"sweep {spec.name}: with {shown or 'the fixed fields'}: {exc}") from None
    return cfg


def load_spec(path: str | os.PathLike) -> SweepSpec:
    """Read and check the sweep spec at ``path`` (see the module docstring)."""
    name = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return parse_spec(read_config_file(path, what="sweep spec"), default_name=name)


def parse_spec(data: dict[str, Any], default_name: str = "sweep") -> SweepSpec:
    """Check a spec's mapping and return it as a :class:`SweepSpec`."""
    unknown = [k for k in data if k not in _TOP]
    if unknown:
        raise ConfigError(
            f"sweep spec: unknown key {unknown[0]!r}{_close(unknown[0], _TOP)}; the keys are "
            + ", ".join(_TOP)
        )
    name = str(data.get("name") or default_name)
    algo = data.get("algo")
    if algo not in ALGOS:
        raise ConfigError(f"sweep spec: algo must be one of {', '.join(ALGOS)}; got {algo!r}")
    cls, presets, columns = _trainer(algo)
    env = data.get("env")  # without a preset, PPO on a MuJoCo env takes mujoco, as its trainer does
    env = env[0] if isinstance(env, list) and env else env
    preset = (
        data["preset"]
        if "preset" in data
        else default_preset(algo, env if isinstance(env, str) else None)
    )
    if preset not in presets:
        raise ConfigError(
            f"sweep spec: {algo} has no preset {preset!r}{_close(str(preset), presets)}; "
            f"presets: {', '.join(presets)}"
        )
    fields_known = {f.name for f in dataclasses.fields(cls) if f.init}
    envs = _envs(data.get("env", presets[preset].env))
    fields = _mapping(data, "fields")
    for key in fields:
        _check_field(key, fields_known, "fields")
    space = {}
    for key, rng in _mapping(data, "space").items():
        _check_field(key, fields_known, "space")
        if key in fields:
            raise ConfigError(f"sweep spec: {key!r} is both in fields and in space; keep one")
        space[key] = _range(key, rng)
    if not space:
        raise ConfigError("sweep spec: space needs at least one field to search, e.g. lr")
    seeds = _seeds(data.get("seeds", [1]))
    metric, mode, to_score, to_score_in = _objective(data.get("objective"), columns)
    if metric == EVAL_METRIC and not fields.get("eval_episodes"):
        raise ConfigError(
            f"sweep spec: objective.metric {EVAL_METRIC} is each run's final eval; add "
            "fields: {eval_episodes: N} (N >= 1 greedy episodes at the end of every run)"
        )
    budget = _mapping(data, "budget")
    trials = budget.get("trials")
    if not (isinstance(trials, int) and not isinstance(trials, bool) and trials >= 1):
        raise ConfigError(f"sweep spec: budget.trials must be an int >= 1; got {trials!r}")
    hours = budget.get("hours")
    if hours is not None and not (isinstance(hours, (int, float)) and hours > 0):
        raise ConfigError(f"sweep spec: budget.hours must be > 0; got {hours!r}")
    extra = set(budget) - {"trials", "hours"}
    if extra:
        raise ConfigError(f"sweep spec: budget takes trials and hours; got {sorted(extra)}")
    scheduler, grace, factor = _early_stop(data.get("early_stop", {"scheduler": "none"}))
    cpus = data.get("cpus_per_trial", 2)
    if not (isinstance(cpus, (int, float)) and not isinstance(cpus, bool) and cpus > 0):
        raise ConfigError(f"sweep spec: cpus_per_trial must be > 0; got {cpus!r}")
    spec = SweepSpec(
        name=name, algo=algo, preset=preset, envs=envs, fields=dict(fields), space=space,
        seeds=seeds, metric=metric, mode=mode,
        frames_to_score=to_score if to_score_in == "frames" else None,
        minutes_to_score=to_score if to_score_in == "minutes" else None, trials=trials,
        hours=None if hours is None else float(hours), scheduler=scheduler,
        grace_frames=grace, reduction_factor=factor, cpus_per_trial=float(cpus),
    )  # fmt: skip
    # Every end of every range, with the fixed fields, must make a config the trainer accepts.
    base = {k: r.values[0] for k, r in space.items()}
    for key, rng in space.items():
        for value in rng.values:
            trial_config(spec, {**base, key: value}, envs[0], seeds[0])
    if (
        spec.minutes_to_score is not None
        and getattr(trial_config(spec, base, envs[0], seeds[0]), "max_minutes", None) is None
    ):
        raise ConfigError(
            "sweep spec: objective.minutes_to_score needs a time budget for every run (an "
            "unsolved run scores twice it): set max_minutes in fields, e.g. fields: "
            "{max_minutes: 15}"
        )
    if grace is not None:
        max_frames = trial_config(spec, base, envs[0], seeds[0]).max_frames
        if grace >= max_frames:
            raise ConfigError(
                f"sweep spec: early_stop.grace_frames ({grace}) must be below the runs' "
                f"max_frames ({max_frames}): no run could be stopped early"
            )
    return spec


def _mapping(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key, {})
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"sweep spec: {key} must be a mapping; got {value!r}")
    return {str(k).replace("-", "_"): v for k, v in value.items()}


def _check_field(key: str, known: set[str], where: str) -> None:
    if key in _NOT_SEARCHED:
        raise ConfigError(
            f"sweep spec: {where}.{key}: the sweep sets {key} itself (env, seeds); remove it"
        )
    if key not in known:
        raise ConfigError(f"sweep spec: {where}.{key}: no such config field{_close(key, known)}")


def _envs(value: Any) -> tuple[str, ...]:
    from rapidrl.envs import UnknownEnvError, resolve_env

    envs = [value] if isinstance(value, str) else value
    if not isinstance(envs, list) or not envs or not all(isinstance(e, str) for e in envs):
        raise ConfigError(f"sweep spec: env must be an env id or a list of them; got {value!r}")
    for env in envs:
        try:
            resolve_env(env)
        except UnknownEnvError as exc:
            raise ConfigError(f"sweep spec: env: {exc}") from None
    return tuple(envs)


def _range(key: str, rng: Any) -> Range:
    if not (isinstance(rng, dict) and len(rng) == 1 and next(iter(rng)) in KINDS):
        raise ConfigError(
            f"sweep spec: space.{key} must be one of {{choice: [...]}}, {{uniform: [lo, hi]}}, "
            f"{{loguniform: [lo, hi]}}, {{int: [lo, hi]}}; got {rng!r}"
        )
    kind, values = next(iter(rng.items()))
    if not isinstance(values, list) or not values:
        raise ConfigError(f"sweep spec: space.{key}.{kind} needs a list; got {values!r}")
    if kind == "choice":
        return Range(kind, tuple(values))
    if len(values) != 2:
        raise ConfigError(f"sweep spec: space.{key}.{kind} needs [lo, hi]; got {values!r}")
    lo, hi = values
    if kind == "int":
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ConfigError(f"sweep spec: space.{key}.int needs two integers; got {values!r}")
    elif not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise ConfigError(f"sweep spec: space.{key}.{kind} needs two numbers; got {values!r}")
    if not lo < hi:
        raise ConfigError(f"sweep spec: space.{key}.{kind} needs lo < hi; got {values!r}")
    if kind == "loguniform" and lo <= 0:
        raise ConfigError(f"sweep spec: space.{key}.loguniform needs lo > 0; got {values!r}")
    return Range(kind, (lo, hi))


def _seeds(value: Any) -> tuple[int, ...]:
    seeds = [value] if isinstance(value, int) else value
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
        or len(set(seeds)) != len(seeds)
    ):
        raise ConfigError(
            f"sweep spec: seeds must be distinct integers, e.g. [1, 2]; got {value!r}"
        )
    return tuple(seeds)


def _objective(value: Any, columns: tuple[str, ...]) -> tuple[str, str, float | None, str]:
    """``(metric, mode, score to reach or None, "frames" | "minutes" | "")``."""
    if value is None:
        return "return_mean_100", "max", None, ""
    if not isinstance(value, dict):
        raise ConfigError(f"sweep spec: objective must be a mapping; got {value!r}")
    for unit in ("frames", "minutes"):
        key = f"{unit}_to_score"
        if key not in value:
            continue
        if set(value) != {key}:
            raise ConfigError(f"sweep spec: objective.{key} stands alone (mode: min)")
        score = value[key]
        if not isinstance(score, (int, float)) or isinstance(score, bool) or math.isnan(score):
            raise ConfigError(f"sweep spec: objective.{key} must be a number; got {score!r}")
        return "return_mean_100", "min", float(score), unit
    metric, mode = value.get("metric", "return_mean_100"), value.get("mode", "max")
    extra = set(value) - {"metric", "mode"}
    if extra:
        raise ConfigError(
            "sweep spec: objective takes metric and mode, or frames_to_score, or "
            f"minutes_to_score; got {sorted(extra)}"
        )
    if metric not in columns and metric != EVAL_METRIC:
        raise ConfigError(
            f"sweep spec: objective.metric {metric!r} is not a column this trainer logs"
            f"{_close(str(metric), (*columns, EVAL_METRIC))}; it logs {', '.join(columns)} "
            f"(or {EVAL_METRIC}: the final policy's greedy eval, with fields: {{eval_episodes: N}})"
        )
    if mode not in ("max", "min"):
        raise ConfigError(f"sweep spec: objective.mode must be max or min; got {mode!r}")
    return metric, mode, None, ""


def _early_stop(value: Any) -> tuple[str, int | None, int]:
    if not isinstance(value, dict):
        raise ConfigError(f"sweep spec: early_stop must be a mapping; got {value!r}")
    extra = set(value) - {"scheduler", "grace_frames", "reduction_factor"}
    if extra:
        raise ConfigError(
            "sweep spec: early_stop takes scheduler, grace_frames and reduction_factor; got "
            f"{sorted(extra)}"
        )
    scheduler = value.get("scheduler", "none")
    if scheduler not in SCHEDULERS:
        raise ConfigError(
            f"sweep spec: early_stop.scheduler must be one of {', '.join(SCHEDULERS)}; "
            f"got {scheduler!r}"
        )
    factor = value.get("reduction_factor", 2)
    if not (isinstance(factor, int) and not isinstance(factor, bool) and factor >= 2):
        raise ConfigError(
            f"sweep spec: early_stop.reduction_factor must be an int >= 2; got {factor!r}"
        )
    if scheduler == "none":
        return scheduler, None, factor
    grace = value.get("grace_frames")
    if not (isinstance(grace, int) and not isinstance(grace, bool) and grace >= 1):
        raise ConfigError(
            f"sweep spec: early_stop.grace_frames (frames every trial runs before it can be "
            f"stopped) must be an int >= 1; got {grace!r}"
        )
    return scheduler, grace, factor
