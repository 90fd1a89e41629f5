"""``PQNConfig``: every knob of PQN (parallelized Q-learning) and of how fast it runs.

PQN (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning") is online Q-learning
over vector-env rollouts: no replay buffer, no target network. One *update*: collect a rollout of
``num_steps x num_envs`` agent steps with epsilon-greedy actions, compute Q(lambda) returns over
it with the current network's max-Q (:mod:`rapidrl.algos.pqn.returns`), then ``epochs`` passes
of ``minibatches`` minibatches regressing ``Q(s, a)`` on those returns (MSE, RAdam, gradient
norm clipping). A LayerNorm after every layer of the network keeps this stable without a target
network.

Units follow the other trainers: ``steps`` are agent steps summed over all envs; ``frames`` --
``max_frames``, ``schedule_frames``, the ``frames`` column of ``metrics.csv``, checkpoints,
summaries -- are emulator frames (``steps * frame_skip``, 4 on Atari; off Atari a step is one
frame).

Presets (``--preset NAME``; ``rapidrl train pqn`` defaults to ``fast``; the reasoning and the
measurements behind each: docs/presets.md):

- ``pqn``: the paper's Atari settings (128 envs x 32 steps, 40M frames).
- ``fast``: the same learning settings sized for a 2-core CPU (32 envs, 64x64 frames, bf16 where
  native), with a shorter, two-phase epsilon schedule.
- ``lean``: ``fast`` on a cheaper input (52x52 frames, two of them), 64 envs x 16 steps and
  lambda 0.9 -> 0.65 early: for CPUs without native bf16 (AVX2 only).
- ``cartpole``: classic control; solved CartPole-v1 (mean-100 > 475) in about 10 s of training
  on a 2-core CPU (seeds 1-4).

With ``--ray`` (local, serial or a cluster address) each rollout comes from Ray workers instead
of the local vector env (:mod:`rapidrl.algos.pqn.ray_loop`): ``num_steps`` from every env of every
worker (``workers x envs_per_worker`` envs in place of ``num_envs``), all acted with the update's
weights and epsilon; the targets and the update are the local loop's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import tyro

from rapidrl.algos.common_config import RolloutConfig, validate_torso
from rapidrl.config import Precision, flag_name, need

__all__ = ["PRESETS", "PQNConfig"]


@dataclass(frozen=True)
class PQNConfig(RolloutConfig):
    """Train PQN (parallelized Q-learning): online Q(lambda) over vector-env rollouts, no replay
    buffer, no target network, a LayerNorm after every layer. One update = a rollout of
    num_steps x num_envs epsilon-greedy agent steps, then epochs x minibatches gradient steps of
    MSE to the Q(lambda) returns. Frames are emulator frames (agent steps x frame_skip)."""

    # Also RolloutConfig's gamma, torch_threads, act_threads (rapidrl.algos.common_config).

    # --- environment ------------------------------------------------------------------------
    num_envs: int = 128
    """Envs stepped together; a rollout holds num_steps x num_envs agent steps (with --ray:
    num_steps x workers x envs_per_worker)."""

    # --- network ------------------------------------------------------------------------------
    torso: Literal["nature", "small"] = "nature"
    """Atari torso, a LayerNorm after every layer: nature = the Nature-DQN CNN (obs_size >= 36);
    small = 4 x conv(32, 3x3, /2) + linear 256 (A3C-style, for obs_size 42). Off Atari: an MLP."""
    channels_last: bool = False
    """Atari: the conv torso in channels_last memory format (faster oneDNN convolutions; the
    LayerNorms keep the layout)."""
    precision: Precision = "fp32"
    """Conv torso compute dtype (weights, optimizer, head, loss stay float32); bf16 = autocast.
    auto: bf16 where the learner's device multiplies bf16 natively (AMX or AVX-512 bf16 CPU, bf16
    GPU), else fp32 (emulated bf16 is slower)."""

    # --- algorithm ----------------------------------------------------------------------------
    num_steps: int = 32
    """Agent steps per env per rollout (the horizon T)."""
    minibatches: int = 32
    """Minibatches per epoch (each of num_steps x num_envs / minibatches agent steps)."""
    epochs: int = 2
    """Passes over each rollout."""
    lr: float = 2.5e-4
    """RAdam learning rate (at the start, when annealed)."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over schedule_frames."""
    q_lambda: float = 0.65
    """Lambda of the Q(lambda) returns: 0 = one-step Q-learning targets, 1 = Monte-Carlo returns
    (bootstrapped at time limits and at the rollout's end)."""
    start_q_lambda: float | None = None
    """Lambda at the start, moved linearly to q_lambda over q_lambda_fraction of schedule_frames:
    carries rare points further back while Q is uninformed. None: q_lambda throughout."""
    q_lambda_fraction: float = 0.1
    """Fraction of schedule_frames over which lambda goes from start_q_lambda to q_lambda (with
    start_q_lambda set)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this for the targets (scores stay real). Off Atari (unclipped
    rewards) it keeps Q near the LayerNorm'd features' scale (CartPole's 0.1: targets ~10)."""
    max_grad_norm: float | None = 10.0
    """Clip the global gradient norm to this (None: no clipping)."""
    start_e: float = 1.0
    """Exploration: epsilon (probability of a uniformly random action) at the start."""
    end_e: float = 0.01
    """Exploration: epsilon after exploration_fraction of schedule_frames, and from then on."""
    exploration_fraction: float = 0.10
    """Fraction of schedule_frames over which epsilon goes linearly from start_e to end_e."""
    final_e: float | None = None
    """Epsilon's second phase: on linearly from end_e to final_e at final_e_fraction of
    schedule_frames, then kept: learn with end_e, play with fewer random actions. None: end_e."""
    final_e_fraction: float = 0.15
    """Fraction of schedule_frames at which epsilon reaches final_e (with final_e set)."""
    schedule_frames: int | None = None
    """Frames the lr, epsilon and lambda schedules span (their fractions are of it). None:
    max_frames; set it to keep the schedules when a run is resumed with another max_frames."""

    # --- run ----------------------------------------------------------------------------------
    max_frames: int = 40_000_000
    """Stop after the update that reaches this many emulator frames."""
    algo: tyro.conf.Suppress[Literal["pqn"]] = "pqn"
    """Algorithm name written to config.json (`rapidrl eval` dispatches on it)."""

    # ------------------------------------------------------------------------------------------
    def validate(self) -> None:
        """Cross-field checks; raise ``ConfigError`` naming the fields and the fix."""

        self.validate_common("pqn")
        self.validate_rollout()
        need(
            self.rollout_steps >= self.minibatches,
            f"--minibatches ({self.minibatches}) exceeds the rollout's --num-steps x --num-envs "
            f"({self.rollout_steps}) agent steps; use fewer minibatches or a longer rollout",
        )
        validate_torso(self)
        need(0.0 <= self.q_lambda <= 1.0, f"--q-lambda must be in [0, 1], got {self.q_lambda}")
        need(
            self.start_q_lambda is None or 0.0 <= self.start_q_lambda <= 1.0,
            f"--start-q-lambda must be in [0, 1] or None, got {self.start_q_lambda}",
        )
        need(
            0.0 <= self.q_lambda_fraction <= 1.0,
            f"--q-lambda-fraction must be in [0, 1], got {self.q_lambda_fraction}",
        )
        need(self.reward_scale > 0, f"--reward-scale must be > 0, got {self.reward_scale}")
        for name in ("start_e", "end_e", "exploration_fraction", "final_e_fraction"):
            v = getattr(self, name)
            need(0.0 <= v <= 1.0, f"--{flag_name(name)} must be in [0, 1], got {v}")
        if self.final_e is not None:
            need(
                0.0 <= self.final_e <= 1.0,
                f"--final-e must be in [0, 1] or None, got {self.final_e}",
            )
            need(
                self.final_e_fraction >= self.exploration_fraction,
                f"--final-e-fraction ({self.final_e_fraction}) must be >= --exploration-fraction "
                f"({self.exploration_fraction}): the second decay starts where the first ends",
            )
        need(
            self.schedule_frames is None or self.schedule_frames >= 1,
            f"--schedule-frames must be >= 1 or None (None: max_frames), got "
            f"{self.schedule_frames}",
        )
        need(
            self.num_workers is None or self.num_workers >= 1,
            f"--num-workers must be >= 1 or None, got {self.num_workers}",
        )
        # Ray (rapidrl.algos.pqn.ray_loop): num_steps from every env of every worker an update.
        self.validate_ray()


# pqn: the paper's Atari settings (Gallici et al. 2024, purejaxql's pqn_atari.yaml), with CleanRL's
# final epsilon and annealed lr (docs/presets.md#pqn-pqn).
_PAPER = PQNConfig(
    env="pong",
    num_envs=128,
    backend="auto",
    num_steps=32,
    minibatches=32,
    epochs=2,
    lr=2.5e-4,
    anneal_lr=True,
    gamma=0.99,
    q_lambda=0.65,
    max_grad_norm=10.0,
    start_e=1.0,
    end_e=0.01,
    exploration_fraction=0.10,
    max_frames=40_000_000,
)

PRESETS: dict[str, PQNConfig] = {
    "pqn": _PAPER,
    # fast: the paper's learning settings sized for 2 cores (32 envs, 64x64), a two-phase epsilon;
    # Pong in a median of 26.9 min on a 2-core Zen 4 kept to AVX2, fp32 (docs/presets.md#pqn-fast).
    "fast": dataclasses.replace(
        _PAPER,
        num_envs=32,
        num_steps=32,
        minibatches=8,
        obs_size=64,
        channels_last=True,
        precision="auto",
        exploration_fraction=0.025,
        final_e=0.001,
        final_e_fraction=0.15,
    ),
    # cartpole: an MLP with LayerNorm, reward_scale 0.1 as the paper's CartPole config; CartPole-v1
    # solved in 7.8-9.7 s of training on a 2-core CPU, seeds 1-4 (docs/presets.md#pqn-cartpole).
    "cartpole": PQNConfig(
        env="CartPole-v1",
        num_envs=16,
        backend="serial",
        num_steps=32,
        minibatches=4,
        epochs=4,
        lr=1e-3,
        anneal_lr=True,
        gamma=0.99,
        q_lambda=0.9,
        reward_scale=0.1,
        max_grad_norm=10.0,
        start_e=1.0,
        end_e=0.01,
        exploration_fraction=0.2,
        max_frames=500_000,
    ),
}

# lean: fast on 52x52x2 frames, 64 envs x 16 steps, lambda 0.9 -> 0.65 early, for CPUs without
# native bf16; Pong in a median of 35.3 min on a 2-core Zen 3, fp32 (docs/presets.md#pqn-lean).
PRESETS["lean"] = dataclasses.replace(
    PRESETS["fast"],
    num_envs=64,
    num_steps=16,
    obs_size=52,
    frame_stack=2,
    start_q_lambda=0.9,
    q_lambda_fraction=0.1,  # the default, stated: lambda reaches 0.65 at 4M of the 40M frames
)
