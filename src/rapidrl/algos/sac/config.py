"""``SACConfig``: Soft Actor-Critic (Haarnoja et al. 2018) for continuous actions.

Units: off Atari one agent step is one frame, so ``max_frames`` counts env steps summed over the
envs. After every ``steps_per_update`` agent steps comes one gradient step of the critics on
``batch_size`` transitions; every ``policy_frequency`` critic steps, ``policy_frequency`` steps of
the actor (and of the temperature), as CleanRL's ``sac_continuous_action.py`` does
(``policy_steps`` 1: one, TD3's delay).

Presets (``--preset NAME``; ``rapidrl train sac`` defaults to ``sac``):

- ``sac``: CleanRL's ``sac_continuous_action.py`` settings (1 env, replay 1M, 5k random steps
  first, batch 256, critics at lr 1e-3, actor at 3e-4 every second step, tau 0.005, the
  temperature tuned to an entropy of ``-action dims``), the reference the others are measured
  against.
- ``sac-fast``: ``sac`` with MLPs of 128 x 128 and one critic step of 512 transitions every 4
  env steps (half ``sac``'s sampled transitions per env step, about a seventh of its
  multiply-adds), bf16 where native, fused Adam: HalfCheetah-v5 above 9,000 at 1M steps in under
  45 minutes on 2 cores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import tyro

from rapidrl.config import Precision, TrainerConfig, need

__all__ = ["PRESETS", "SACConfig"]


@dataclass(frozen=True)
class SACConfig(TrainerConfig):
    """Train a Soft Actor-Critic agent on continuous (bounded Box) actions: twin critics with
    soft target updates, a tanh-squashed Gaussian actor, an automatically tuned temperature.
    After every steps_per_update agent steps, one critic step on batch_size transitions."""

    env: str = "Hopper-v5"
    """Env id with a bounded one-dimensional Box action space (Hopper-v5, HalfCheetah-v5,
    Walker2d-v5, Ant-v5, Pendulum-v1, ...)."""
    num_envs: int = 1
    """Envs stepped together (one vector step = num_envs agent steps); with a process backend
    they step while the learner updates."""

    # --- algorithm ----------------------------------------------------------------------------
    gamma: float = 0.99
    """Discount per step (a time limit bootstraps; only a true termination ends the return)."""
    tau: float = 0.005
    """Soft target update: target <- (1 - tau) target + tau online, after every critic step."""
    batch_size: int = 256
    """Transitions per gradient step."""
    steps_per_update: int = 1
    """Agent steps between critic steps (1: one gradient step per env step, SAC's replay
    ratio; 2 halves it)."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions (~2 x 4 bytes x obs dims each)."""
    learning_starts: int = 5_000
    """Agent steps of uniformly random actions before the first update (the prefill)."""
    q_lr: float = 1e-3
    """Adam learning rate of the critics."""
    policy_lr: float = 3e-4
    """Adam learning rate of the actor and of the temperature."""
    policy_frequency: int = 2
    """Every this many critic steps, this many actor (and temperature) steps (or policy_steps):
    by default the actor is updated as often as the critics, in bursts, on fresher critics."""
    policy_steps: int | None = None
    """Actor (and temperature) steps each time they come; None: policy_frequency (one per critic
    step on average, CleanRL's); 1: TD3's delay, one per policy_frequency critic steps."""
    alpha: float = 0.2
    """Entropy temperature: its starting value (with autotune) or its fixed value."""
    autotune: bool = True
    """Tune the temperature so that the policy's entropy tracks target_entropy."""
    target_entropy: float | None = None
    """The entropy autotune aims at; None: minus the action dimensions (SAC's heuristic)."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of the actor's and of each critic's MLP."""
    fused_adam: bool = False
    """Adam(fused=True): one kernel per optimizer step."""
    precision: Precision = "fp32"
    """The update's matrix products (actor and critics) in bf16 under autocast; weights, Adam,
    the log-probabilities and the losses stay float32. auto: bf16 where the device multiplies
    bf16 natively. Acting stays float32."""

    # --- speed --------------------------------------------------------------------------------
    torch_threads: int = 0
    """Learner torch threads; 0: every core."""

    # --- run ----------------------------------------------------------------------------------
    max_frames: int = 1_000_000
    """Stop after this many env steps (summed over envs)."""
    save_replay: bool = False
    """Include the replay buffer in checkpoints (exact resume; ~8 bytes x obs dims x
    buffer_size). Without it a resumed run refills learning_starts transitions first."""
    algo: tyro.conf.Suppress[Literal["sac"]] = "sac"
    """Algorithm name written to config.json (`rapidrl eval` dispatches on it)."""

    def validate(self) -> None:
        """Cross-field checks; raise ``ConfigError`` naming the fields and the fix."""
        self.validate_common("sac")
        self.require_ints(
            "num_envs", "batch_size", "steps_per_update", "buffer_size", "max_frames",
            "policy_frequency",
        )  # fmt: skip
        need(
            isinstance(self.learning_starts, int) and self.learning_starts >= 0,
            f"--learning-starts must be >= 0, got {self.learning_starts!r}",
        )
        need(0.0 <= self.gamma <= 1.0, f"--gamma must be in [0, 1], got {self.gamma}")
        need(0.0 < self.tau <= 1.0, f"--tau must be in (0, 1], got {self.tau}")
        need(self.q_lr > 0 and self.policy_lr > 0, "--q-lr and --policy-lr must be > 0")
        need(self.alpha > 0, f"--alpha must be > 0, got {self.alpha}")
        need(
            len(self.hidden) >= 1 and all(isinstance(h, int) and h >= 1 for h in self.hidden),
            f"--hidden must be one or more widths >= 1, got {self.hidden}",
        )
        need(
            self.learning_starts <= self.buffer_size,
            f"--learning-starts ({self.learning_starts}) exceeds --buffer-size "
            f"({self.buffer_size}): the prefill could never finish",
        )
        need(
            self.buffer_size >= 2 * self.num_envs,
            f"--buffer-size {self.buffer_size} leaves fewer than 2 transitions per env "
            f"(--num-envs {self.num_envs}); raise it",
        )
        need(
            self.policy_steps is None
            or (isinstance(self.policy_steps, int) and self.policy_steps >= 1),
            f"--policy-steps must be an int >= 1 or None, got {self.policy_steps!r}",
        )
        need(self.torch_threads >= 0, "--torch-threads must be >= 0 (0: every core)")


# sac: CleanRL's sac_continuous_action.py settings, the class defaults (docs/presets.md#sac-sac).
PRESETS: dict[str, SACConfig] = {"sac": SACConfig()}
# sac-fast: MLPs of 128 x 128, one critic step of 512 every 4 env steps, bf16 where native:
# HalfCheetah-v5 above 9,000 at 1M steps in under 45 min on a 2-core Zen 4, median of 3
# (docs/presets.md#sac-sac-fast).
PRESETS["sac-fast"] = SACConfig(
    hidden=(128, 128), batch_size=512, steps_per_update=4, precision="auto", fused_adam=True
)
