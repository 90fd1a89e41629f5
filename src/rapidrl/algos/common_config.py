"""What more than one algorithm's config shares, declared, documented and checked once.

- :class:`RolloutConfig`: the base of a trainer that learns from rollouts of ``num_steps x
  num_envs`` agent steps (PPO, PQN): its shared fields, ``rollout_steps`` and the checks of the
  rollout's fields (:meth:`RolloutConfig.validate_rollout`).
- :class:`TorsoWidths`: the nature torso's convolution widths and the torso's feature size (DQN,
  PPO), a mixin listed before the config's base.
- :func:`validate_torso`: the checks of a config's torso (every trainer's ``validate()`` calls
  it): ``torso`` against ``obs_size``, and the :class:`TorsoWidths` fields where it has them.

Each config declares the fields whose default or docstring is its own (``num_envs``,
``num_steps``, ``minibatches``, ``epochs``, ``lr``, ``max_grad_norm``, ``torso``,
``max_frames``, ...) in its own class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rapidrl.config import RayTrainerConfig, need
from rapidrl.nets.torso import NATURE_CHANNELS

__all__ = ["RolloutConfig", "TorsoWidths", "validate_torso"]


@dataclass(frozen=True)
class RolloutConfig(RayTrainerConfig):
    """:class:`RayTrainerConfig` and the fields every rollout trainer (PPO, PQN) shares. A
    subclass declares ``num_envs``, ``num_steps``, ``minibatches``, ``epochs``, ``lr``,
    ``max_grad_norm`` and ``max_frames`` (its own defaults) and calls :meth:`validate_rollout`
    in its ``validate()``."""

    # --- algorithm ----------------------------------------------------------------------------
    gamma: float = 0.99
    """Discount per agent step."""

    # --- speed --------------------------------------------------------------------------------
    torch_threads: int = 0
    """Torch threads of the learner; 0: all cores."""
    act_threads: int = 0
    """Torch threads while acting; 0: one (a batch of a few observations gains nothing from more
    threads on CPU, and contended threads stall the env workers)."""

    @property
    def rollout_steps(self) -> int:
        """Agent steps per update: ``num_steps * num_envs``."""
        return self.num_steps * self.num_envs

    def validate_rollout(self) -> None:
        """The checks of the fields every rollout trainer has (after ``validate_common``)."""
        self.require_ints("num_envs", "num_steps", "minibatches", "epochs", "max_frames")
        need(0.0 <= self.gamma <= 1.0, f"--gamma must be in [0, 1], got {self.gamma}")
        need(self.lr > 0, f"--lr must be > 0, got {self.lr}")
        need(
            self.max_grad_norm is None or self.max_grad_norm > 0,
            f"--max-grad-norm must be > 0 or None, got {self.max_grad_norm}",
        )
        need(self.torch_threads >= 0, "--torch-threads must be >= 0 (0: automatic)")
        need(self.act_threads >= 0, "--act-threads must be >= 0 (0: automatic)")


@dataclass(frozen=True)
class TorsoWidths:
    """The nature torso's widths and the torso's feature size, for a config whose ``torso``
    builds the net with them (DQN, PPO): ``class XConfig(TorsoWidths, RayTrainerConfig)``, so
    these fields come after the base's. Checked by :func:`validate_torso`."""

    torso_channels: tuple[int, int, int] = NATURE_CHANNELS
    """The nature torso's three convolution widths; narrower: fewer multiply-adds an update and
    an action."""
    torso_dim: int | None = None
    """Features out of the torso (its linear layer); None: the torso's own (nature 512, small
    256)."""


def validate_torso(cfg: Any) -> None:
    """The checks of ``cfg``'s torso: its ``torso`` against ``obs_size``, and for a
    :class:`TorsoWidths` config its widths (nature only) and feature size; ``ConfigError``
    naming the flags and the fix."""
    need(
        cfg.torso != "nature" or cfg.obs_size >= 36,
        f"--torso nature needs --obs-size >= 36 (its convolutions shrink 36 to 1), got "
        f"{cfg.obs_size}; use --torso small for smaller frames",
    )
    if not isinstance(cfg, TorsoWidths):
        return
    need(
        len(cfg.torso_channels) == 3 and min(cfg.torso_channels) >= 1,
        f"--torso-channels needs 3 positive widths, got {cfg.torso_channels}",
    )
    need(
        cfg.torso == "nature" or tuple(cfg.torso_channels) == NATURE_CHANNELS,
        f"--torso-channels sets the nature torso's widths; --torso {cfg.torso} has its own: "
        "drop --torso-channels",
    )
    need(
        cfg.torso_dim is None or cfg.torso_dim >= 1,
        f"--torso-dim must be >= 1 or None, got {cfg.torso_dim}",
    )
