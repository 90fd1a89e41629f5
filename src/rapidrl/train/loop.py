"""Small pieces every training loop needs, the same for each algorithm.

Stop conditions (:func:`stop_reason`), the "every N seconds and/or every N frames" cadence of
metrics rows and checkpoints (:class:`Every`), the stop score ``"auto"`` (:func:`resolve_stop_score`),
devices and thread counts, the env seeds of a (re)start, the command-line rule for
``--resume RUN_DIR`` (:func:`parse_with_resume`: the run's own config.json gives the defaults),
and :class:`RunSession`: the metrics log, progress bar, stop check, summary and learning curve
around every training loop (DQN, PPO, and their Ray loops).

Also the pieces with no algorithm in them: :class:`LogEvent` (what ``train(..., on_log=fn)``
hands ``fn``), :func:`env_options` (a config's ``make_env`` options) and :func:`num_threads`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from rapidrl.config import ConfigError, flag_value, parse_config
from rapidrl.hardware import cpu_count, describe, hardware_record
from rapidrl.train.metrics import EpisodeTracker, MetricsLogger, RunClock
from rapidrl.train.plots import plot_learning_curve
from rapidrl.train.progress import Progress, write_summary
from rapidrl.train.run import RunDir

__all__ = [
    "EnvProbe",
    "Every",
    "LogEvent",
    "RunSession",
    "atari_env_options",
    "cpu_count",
    "env_options",
    "flag_value",
    "load_run_config",
    "num_threads",
    "parse_with_resume",
    "probe_env",
    "resolve_device",
    "resolve_stop_score",
    "restart_env_seed",
    "start_run",
    "stop_reason",
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
    """The ``make_env`` options of a trainer config (its ``episodic_life``, ``clip_rewards``,
    ``noop_max``, ``sticky_actions``, ``obs_size``, ``fire_reset``, ``full_action_space``,
    ``max_episode_frames`` and ``frame_stack`` fields; Atari ids only)."""
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

    @property
    def obs_shape(self) -> tuple[int, ...]:
        return tuple(self.obs_space.shape)


def probe_env(cfg: Any, algo: str) -> EnvProbe:
    """Resolve ``cfg.env``, build one env with the config's options to read its spaces, close it.
    An action space that is not discrete is a ``ConfigError`` naming ``algo`` (every trainer here
    is for discrete actions)."""
    from rapidrl.envs import make_env, resolve_env

    info = resolve_env(cfg.env)
    options = env_options(cfg, info.is_atari)
    probe = make_env(cfg.env, **options)
    obs_space, act_space = probe.observation_space, probe.action_space
    probe.close()
    if not hasattr(act_space, "n"):
        raise ConfigError(f"{algo} needs a discrete action space; {cfg.env} has {act_space}")
    return EnvProbe(
        info=info,
        options=options,
        frame_skip=options.get("frame_skip", 4) if info.is_atari else 1,
        stop_score=resolve_stop_score(cfg.stop_at_score, info),
        obs_space=obs_space,
        n_actions=int(act_space.n),
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


@dataclasses.dataclass
class LogEvent:
    """What ``train(..., on_log=fn)`` hands ``fn`` after every metrics row (every trainer);
    ``fn`` returning True stops the run like Ctrl-C (checkpoint, summary)."""

    frames: int
    row: dict[str, Any]
    run_dir: Path
    actor_pids: list[int | None] = dataclasses.field(default_factory=list)
    """Pids of the processes that step the envs for this run (actor processes, Ray workers)."""


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


class RunSession:
    """What every training loop does around its algorithm, written once: open the metrics log
    (CSV + TensorBoard, the config as text) and the progress bar, check the stop conditions at the
    top of each iteration, log rows, and at the end write ``summary.json`` and plot the learning
    curve. One session is one start or resume of a run::

        session = RunSession(run, cfg, algo="ppo", env_id=..., device=..., tracker=tracker,
                             clock=clock, stop_score=stop_score)
        try:
            envs = ...
            session.open(columns=METRIC_COLUMNS, frames=frames, desc="ppo CartPole-v1")
            with StopOnInterrupt() as stop:
                while not session.should_stop(stop, frames):
                    ...                              # the algorithm's iteration
                    session.cadence(frames, log_every=..., ckpt_every=..., row=..., save=...,
                                    on_log=on_log)   # a row / a checkpoint when due
            summary = session.end(frames, row=..., save=..., steps=..., updates=...,
                                  title="PPO CartPole-v1")  # last checkpoint, row, summary
        finally:
            session.close()
            envs.close()

    ``cfg`` is a trainer config (DQN or PPO): ``resume``, ``tensorboard``, ``no_progress``,
    ``max_frames`` and ``max_minutes`` are read from it. ``recurrent`` (PPO) goes into the
    summary after ``algo`` (None: no such key).
    """

    def __init__(
        self,
        run: RunDir,
        cfg: Any,
        *,
        algo: str,
        env_id: str,
        device: torch.device,
        tracker: EpisodeTracker,
        clock: RunClock,
        stop_score: float | None,
        recurrent: bool | None = None,
    ):
        self.run = run
        self.cfg = cfg
        self.algo = algo
        self.recurrent = recurrent
        self.env_id = env_id
        self.device = device
        self.tracker = tracker
        self.clock = clock
        self.stop_score = stop_score
        self.resuming = cfg.resume is not None
        self.log: MetricsLogger | None = None
        self.bar: Progress | None = None
        self.reason: str | None = None
        """Why the run stopped (set by :meth:`should_stop`)."""
        self.callback_stop = False
        """Set when the ``on_log`` callback asks to stop: the stop reason is then "callback"."""
        self.last_row_frames: int | None = None
        self._start: tuple[float, int] = (time.monotonic(), 0)

    def open(self, *, columns: Sequence[str], frames: int, desc: str) -> None:
        """Open ``metrics.csv`` (a resumed run keeps its rows up to ``frames``; a fresh run logs
        its config to TensorBoard) and the progress bar at ``frames``; start this session's
        frames-per-second and the clock's fps count."""
        cfg, run = self.cfg, self.run
        self.log = MetricsLogger(
            run.metrics_csv,
            run.tb if cfg.tensorboard else None,
            columns=columns,
            resume_frames=frames if self.resuming else None,
        )
        if not self.resuming:
            self.log.log_text("config", "```\n" + run.config_json.read_text() + "\n```")
        self.bar = Progress(
            cfg.max_frames,
            initial=frames,
            enabled=False if cfg.no_progress else None,
            desc=desc,
        )
        self._start = (time.monotonic(), frames)
        self.clock.fps(frames)
        # Every figure says where it came from: the CPU (and its learner ISAs) at the start.
        print(f"{self.algo} on {describe()}; device {self.device}", file=sys.stderr)

    def should_stop(self, stop: Any, frames: int) -> bool:
        """Whether to stop now, at ``frames`` (``stop``: the loop's ``StopOnInterrupt``); the
        reason is kept in :attr:`reason`: "interrupted" (Ctrl-C), "callback" (``on_log``),
        "solved", "max_frames" or "max_minutes"."""
        self.reason = stop_reason(
            interrupted=stop.requested or self.callback_stop,
            solved=self.tracker.solved and self.stop_score is not None,
            frames=frames,
            max_frames=self.cfg.max_frames,
            seconds=self.clock.seconds,
            max_minutes=self.cfg.max_minutes,
        )
        if self.reason and self.callback_stop and not stop.requested:
            self.reason = "callback"
        return self.reason is not None

    def log_row(self, frames: int, row: Mapping[str, Any]) -> None:
        """One metrics row at ``frames``."""
        assert self.log is not None, "open() first"
        self.log.log(frames, row)
        self.last_row_frames = frames

    def cadence(
        self,
        frames: int,
        *,
        log_every: Every,
        ckpt_every: Every,
        row: Callable[[], Mapping[str, Any]],
        save: Callable[[int], None],
        on_log: Callable[[LogEvent], bool | None] | None = None,
        pids: Sequence[int | None] = (),
    ) -> None:
        """The last step of every loop's iteration, at ``frames``: a metrics row (``row()``)
        when ``log_every`` is due, handed to ``on_log`` (True stops the run like Ctrl-C; ``pids``:
        the processes stepping the envs); a checkpoint (``save(frames)``) when ``ckpt_every`` is
        due."""
        if log_every.due(frames):
            log_every.mark(frames)
            values = row()
            self.log_row(frames, values)
            if on_log is not None and on_log(
                LogEvent(frames, dict(values), self.run.path, list(pids))
            ):
                self.callback_stop = True
        if ckpt_every.due(frames):
            ckpt_every.mark(frames)
            save(frames)

    def end(
        self,
        frames: int,
        *,
        row: Callable[[], Mapping[str, Any]],
        save: Callable[[int], None],
        **summary: Any,
    ) -> dict[str, Any]:
        """The end of every loop: a last checkpoint, a last row (unless one was just logged at
        ``frames``), then :meth:`finish` with ``summary`` (steps, updates, title, ...)."""
        save(frames)
        if frames != self.last_row_frames:
            self.log_row(frames, row())
        return self.finish(frames, **summary)

    def finish(
        self,
        frames: int,
        *,
        steps: int,
        updates: int,
        grad_steps: int | None = None,
        title: str,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The end of a session that ran to its stop: close the log and the bar, write
        ``summary.json`` (the tracker's numbers, then algo, [recurrent,] env, stop_reason, steps,
        updates, [grad_steps,] this session's frames_per_second, device, run_dir, hardware (the CPU:
        :func:`rapidrl.hardware.hardware_record`), then ``extra``),
        plot the learning curve (a failed plot is a warning: it must never lose a finished run);
        return the summary as written. The run dir's lock is released last."""
        self._close_log()
        start_time, start_frames = self._start
        session_s = time.monotonic() - start_time
        fields: dict[str, Any] = {"algo": self.algo}
        if self.recurrent is not None:
            fields["recurrent"] = self.recurrent
        fields.update(env=self.env_id, stop_reason=self.reason, steps=steps, updates=updates)
        if grad_steps is not None:
            fields["grad_steps"] = grad_steps
        fields.update(
            frames_per_second=(frames - start_frames) / session_s if session_s > 0 else None,
            device=str(self.device),
            run_dir=str(self.run.path),
            hardware=hardware_record(),
        )
        write_summary(
            self.run.summary_json,
            frames=frames,
            seconds=self.clock.seconds,
            tracker=self.tracker,
            extra={**fields, **(extra or {})},
        )
        summary = json.loads(self.run.summary_json.read_text())
        try:
            plot_learning_curve(
                self.run.metrics_csv,
                self.run.learning_curve_png,
                title=title,
                stop_at_score=self.stop_score,
            )
        except Exception as exc:  # a plot must never lose a finished run
            warnings.warn(f"could not plot the learning curve: {exc}", stacklevel=3)
        self.run.release()
        return summary

    def _close_log(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.log is not None:
            log, self.log = self.log, None
            log.close()

    def close(self) -> None:
        """Close the metrics log and the progress bar, release the run dir's lock (again:
        nothing). The lock is released even if closing the log fails (a full disk)."""
        try:
            self._close_log()
        finally:
            self.run.release()


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
        f"{'-' if mean is None else f'{mean:.2f}'}; run dir {summary['run_dir']}"
    )
    return 0
