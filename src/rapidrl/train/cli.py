"""The ``rapidrl train ...`` command line every trainer shares: ``--preset`` / ``--config`` /
flags -> config, with ``--resume RUN_DIR`` taking the run's own config.json as the defaults
(:func:`parse_with_resume`), and the run with its user-facing errors (:func:`run_from_cli`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from rapidrl.config import ConfigError, flag_value, parse_config

__all__ = ["load_run_config", "parse_with_resume", "run_from_cli"]

T = TypeVar("T")


def load_run_config(cls: type[T], run_dir: str | os.PathLike, algo: str) -> T:
    """The ``cls`` config saved in ``run_dir/config.json`` (``ConfigError`` if absent/foreign)."""
    from rapidrl.train.run import config_from_dict, read_config_json

    path = Path(run_dir) / "config.json"
    if not path.exists():
        raise ConfigError(f"nothing to resume in {run_dir}: no config.json there")
    # A torn or hand-edited config.json: a message naming the file, not a JSONDecodeError.
    data = read_config_json(
        path,
        fix="repair it (every checkpoint holds the config it was written with), or start "
        "a fresh run in another --run-dir",
    )
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
    description: str | None = None,
) -> T:
    """``--preset NAME`` + ``--config FILE`` + field flags -> config (preset < file < flags:
    :func:`rapidrl.config.parse_config`). With ``--resume RUN_DIR`` the run's own config.json
    gives the defaults (flags still override; the checkpoint check then rejects changes that
    would alter what the checkpoint means); ``--preset`` and ``--config`` are refused there."""
    import dataclasses

    argv = list(argv)
    resume = flag_value(argv, "--resume")
    if resume and resume != "None":
        for flag in ("--preset", "--config"):  # checked before the run is read
            if flag_value(argv, flag) is not None:
                raise ConfigError(f"--resume continues a run with its own config; drop {flag}")
        saved = load_run_config(cls, resume, algo)
        saved = dataclasses.replace(saved, resume=resume, run_dir=None)
        return parse_config(
            cls, {"resumed": saved}, argv, prog, default_preset="resumed", description=description
        )
    return parse_config(
        cls, presets, argv, prog, default_preset=default_preset, description=description
    )


def _run_dir_of(path: Path) -> Path | None:
    """The run directory a file of a run lies in (the nearest folder with a ``checkpoints/``)."""
    for folder in (path, *path.parents):
        if (folder / "checkpoints").is_dir():
            return folder
    return None


def run_from_cli(train_fn, cfg, prog: str, worker_errors: tuple = ()) -> int:
    """The ``rapidrl train ...`` tail shared by every trainer: run, turn a bad checkpoint or run
    dir into a ConfigError (printed as a clear message), a failed worker into exit code 1, and
    print a one-line summary."""
    import sys

    from rapidrl.config import ConfigError
    from rapidrl.train.checkpoint import CheckpointError
    from rapidrl.train.run import RunWriteError, list_checkpoints

    try:
        summary = train_fn(cfg)
    except RunWriteError as exc:  # a full disk: say what, where, and how to go on
        run_dir = _run_dir_of(Path(exc.filename or "."))
        again = (
            f"`{prog} --resume {run_dir}` goes on from its newest checkpoint"
            if run_dir is not None and list_checkpoints(run_dir / "checkpoints")
            else "the run had no checkpoint yet: start it again"
        )
        print(f"{prog}: error: {exc.strerror}; then {again}", file=sys.stderr)
        return 1
    except (CheckpointError, FileExistsError, FileNotFoundError) as exc:
        raise ConfigError(str(exc)) from exc
    except worker_errors as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    mean = summary.get("return_mean_100")
    print(
        f"{summary['stop_reason']}: {summary['frames']:,} frames in {summary['seconds'] / 60:.1f} "
        f"min, {summary['episodes']} episodes, mean-100 "
        f"{'-' if mean is None else f'{mean:.2f}'}"
        + (
            f", final eval {summary['eval_mean']:.2f} ({summary['eval_episodes']} episodes)"
            if summary.get("eval_mean") is not None
            else ""
        )
        + f"; run dir {summary['run_dir']}"
    )
    return 0
