"""``--track wandb``: a run's config, metrics rows, summary and learning curve also go to Weights &
Biases, beside TensorBoard and metrics.csv (which stay the record: W&B is a view of them).

Online when the machine is logged in (``WANDB_API_KEY`` or ``wandb login``), else offline: the
run is written under ``RUN_DIR/wandb/`` and ``wandb sync RUN_DIR/wandb/offline-run-*`` uploads
it later. ``WANDB_MODE`` overrides. The W&B run's name is the run dir's, its id derived from the
run dir's path, so a resumed run goes on in the same W&B run.
"""

from __future__ import annotations

import hashlib
import math
import netrc
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rapidrl.config import ConfigError, config_to_dict

__all__ = ["WandbTracker", "make_tracker"]


def _logged_in() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        auth = netrc.netrc().authenticators("api.wandb.ai")
    except (OSError, netrc.NetrcParseError):
        return False
    return auth is not None


def _numbers(row: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in row.items():
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if not math.isnan(f):
            out[k] = f
    return out


class WandbTracker:
    """One W&B run for one run dir (see the module docstring)."""

    def __init__(self, cfg: Any, run_dir: Path):
        try:
            import wandb
        except ImportError:
            raise ConfigError(
                "--track wandb needs the wandb package: pip install 'rapidrl[wandb]' (or drop "
                "--track)"
            ) from None
        self._wandb = wandb
        run_dir = Path(run_dir)
        mode = os.environ.get("WANDB_MODE") or ("online" if _logged_in() else "offline")
        run_id = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:12]
        self.run = wandb.init(
            project=cfg.track_project,
            group=cfg.track_group,
            name=run_dir.name,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            config=config_to_dict(cfg),
            mode=mode,
        )

    def log(self, frames: int, row: Mapping[str, Any]) -> None:
        self.run.log(_numbers(row), step=int(frames))

    def finish(self, summary: Mapping[str, Any] | None = None, curve: Path | None = None) -> None:
        """The summary's numbers and the learning curve, then the end of the W&B run (again:
        nothing)."""
        run, self.run = self.run, None
        if run is None:
            return
        if summary:
            run.summary.update(_numbers(summary))
        if curve is not None and Path(curve).exists():
            run.log({"learning_curve": self._wandb.Image(str(curve))})
        run.finish()


def make_tracker(cfg: Any, run_dir: Path) -> WandbTracker | None:
    """The tracker ``cfg.track`` asks for (None: none)."""
    if getattr(cfg, "track", "none") == "wandb":
        return WandbTracker(cfg, run_dir)
    return None
