"""Shared trainer infrastructure: the one run loop and what it is made of.

Every trainer (DQN, PPO, PPO-LSTM, PQN, and their Ray drivers) is an ``Algorithm`` that
``runner.run_training`` runs. The modules: ``runner`` (run_training, Algorithm), ``loop`` (device,
threads, the env probe, start_run), ``session`` (RunSession: the metrics log, progress bar, stop
check, summary and learning curve around the loop; stop_reason, Every, LogEvent), ``cli`` (the
``rapidrl train`` command line and ``--resume``), ``learner`` (RolloutLearner: what the PPO and
PQN learners share), ``run`` (RunDir, config.json, atomic writes, RunWriteError), ``lock``
(RunLock: one writer per run dir), ``metrics`` (EpisodeTracker, RunClock, MetricsLogger),
``checkpoint`` (Checkpointer, load_latest, StopOnInterrupt), ``progress`` (Progress,
write_summary), ``seeding``, ``schedules``, ``plots``; ``launch`` (launch_training: one
training as a child process, for the benches and the sweep) and ``child`` (that child's start).

The names below are imported on first use (PEP 562): importing ``rapidrl.train.child``, the
first step of every training child, must not import torch before it execs the trainer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from rapidrl.train.checkpoint import (
        Checkpoint,
        Checkpointer,
        CheckpointError,
        CheckpointMismatchError,
        StopOnInterrupt,
        list_checkpoints,
        load_latest,
    )
    from rapidrl.train.metrics import (
        KNOWN_COLUMNS,
        EpisodeTracker,
        MetricsLogger,
        RunClock,
        read_metrics,
    )
    from rapidrl.train.plots import plot_learning_curve
    from rapidrl.train.progress import Progress, write_summary
    from rapidrl.train.run import (
        RunDir,
        atomic_write,
        atomic_write_text,
        config_diff,
        config_from_dict,
        config_to_dict,
        load_config,
        save_config,
    )
    from rapidrl.train.seeding import get_rng_states, seed_everything, set_rng_states

_WHERE = {
    "checkpoint": (
        "Checkpoint",
        "Checkpointer",
        "CheckpointError",
        "CheckpointMismatchError",
        "StopOnInterrupt",
        "list_checkpoints",
        "load_latest",
    ),
    "metrics": ("KNOWN_COLUMNS", "EpisodeTracker", "MetricsLogger", "RunClock", "read_metrics"),
    "plots": ("plot_learning_curve",),
    "progress": ("Progress", "write_summary"),
    "run": (
        "RunDir",
        "atomic_write",
        "atomic_write_text",
        "config_diff",
        "config_from_dict",
        "config_to_dict",
        "load_config",
        "save_config",
    ),
    "seeding": ("get_rng_states", "seed_everything", "set_rng_states"),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}


__all__ = [
    "KNOWN_COLUMNS",
    "Checkpoint",
    "CheckpointError",
    "CheckpointMismatchError",
    "Checkpointer",
    "EpisodeTracker",
    "MetricsLogger",
    "Progress",
    "RunClock",
    "RunDir",
    "StopOnInterrupt",
    "atomic_write",
    "atomic_write_text",
    "config_diff",
    "config_from_dict",
    "config_to_dict",
    "get_rng_states",
    "list_checkpoints",
    "load_config",
    "load_latest",
    "plot_learning_curve",
    "read_metrics",
    "save_config",
    "seed_everything",
    "set_rng_states",
    "write_summary",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'rapidrl.train' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rapidrl.train.{module}"), name)
    globals()[name] = value  # once: later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
