"""Typed, frozen configs and the preset machinery shared by every command.

Every algorithm keeps its own frozen dataclass (``algos/<algo>/config.py``) with a docstring per
field, a ``validate()`` for cross-field checks and a dict of named presets. :func:`parse_config`
turns ``--preset NAME`` plus the remaining flags into a resolved, validated config via tyro, so
``--help`` documents every field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

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


RAY_LOCAL = "local"


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
