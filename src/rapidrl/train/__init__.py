"""Shared trainer infrastructure: run directory, metrics, checkpoints, progress, seeding, plots.

Every trainer (DQN, PPO, Ray) builds its loop from these pieces::

    run = RunDir.create(cfg.run_dir, algo="dqn", env_id=cfg.env_id, resume=cfg.resume)
    ckpt = Checkpointer(run.checkpoints, algo="dqn", config=cfg, match_fields=(...))
    tracker, clock = EpisodeTracker(cfg.stop_at_score), RunClock()
    ...

See the module docstrings: ``run`` (RunDir, config JSON round trip, atomic writes), ``metrics``
(EpisodeTracker, RunClock, MetricsLogger), ``checkpoint`` (Checkpointer, load_latest,
StopOnInterrupt), ``progress`` (Progress, write_summary), ``seeding``, ``plots``, and ``loop``
(stop conditions, cadence, and ``RunSession``: the metrics log, progress bar, stop check,
summary and learning curve around every trainer's loop).
"""

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
