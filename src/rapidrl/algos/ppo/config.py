"""``PPOConfig``: every knob of PPO and recurrent PPO (PPO-LSTM), and of how fast they run.

Units follow the DQN trainer: ``steps`` are agent steps summed over all envs; ``frames`` --
``max_frames``, the ``frames`` column of ``metrics.csv``, checkpoints, summaries -- are emulator
frames (``steps * frame_skip``, 4 on Atari; off Atari a step is one frame).

One *update* (CleanRL's "iteration"): collect a rollout of ``num_steps x num_envs`` agent steps,
compute GAE advantages, then ``epochs`` passes over it in ``minibatches`` minibatches. The
feed-forward net takes minibatches of shuffled single steps; the recurrent net takes minibatches
of whole env sequences (``num_envs / minibatches`` envs each) replayed from the LSTM state stored
at the start of the rollout.

Presets (``--preset NAME``; ``rapidrl train ppo`` defaults to ``lean``; ``rapidrl train ppo-lstm``
defaults to ``ppo-lstm`` and turns ``recurrent`` on in whichever preset is named, so its ``lean``
is ``lean`` with the LSTM, 4 epochs and the adaptive rate capped at 1e-3; the reasoning and the
measurements behind each: docs/presets.md):

- ``lean``: the default: rl_games' PPO recipe (big rollouts and minibatches, KL-adaptive rate,
  input and value normalization) on 52x52 frames, two of them, with 3 epochs where rl_games has
  4: the recipe of the Atari suite's table and the shortest time to a solved Pong on every CPU
  measured.
- ``ppo``: the classic Atari settings (Schulman et al. 2017 / CleanRL ``ppo_atari.py``).
- ``ppo-lstm``: the same with the LSTM (CleanRL ``ppo_atari_lstm.py``), packed sequences.
- ``fast``: the classic learning settings on 84x84x4 frames sized for a 2-core CPU (the default
  before ``lean``; kept as the suite screen's 84x84 baseline).
- ``cartpole``: classic control (CleanRL ``ppo.py``).
- ``mujoco``: continuous control (CleanRL ``ppo_continuous_action.py``) on 8 envs.
- ``mujoco-ant``: ``mujoco`` with smaller policy steps (lr 1e-4, target KL 0.05) and the policy's
  noise starting small (log std -2), for Ant.
- ``mujoco-halfcheetah``: ``mujoco`` with the policy's noise starting small (log std -2), for
  HalfCheetah.
- ``mujoco-fast``: rl_games' MuJoCo recipe, 10 minutes of wall time (Walker2d, HalfCheetah).

With ``--ray`` each rollout comes from Ray workers (:mod:`rapidrl.algos.ppo.ray_loop`), for the
feed-forward net only: recurrent PPO does not run on Ray yet.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import tyro

from rapidrl.algos.common_config import RolloutConfig, TorsoWidths, validate_torso
from rapidrl.config import ConfigError, Precision, need
from rapidrl.nets.compiled import cpp_compiler

__all__ = ["PRESETS", "PPOConfig"]

SequenceMode = Literal["packed", "loop", "packed_sequence"]


@dataclass(frozen=True)
class PPOConfig(TorsoWidths, RolloutConfig):
    """Train PPO or recurrent PPO (--recurrent: an LSTM over whole env sequences, trained with
    one LSTM call per length bucket instead of one per step). One update = a rollout of
    num_steps x num_envs agent steps, then epochs x minibatches gradient steps. Frames are
    emulator frames (agent steps x frame_skip)."""

    # Also RolloutConfig's gamma, torch_threads, act_threads; TorsoWidths' torso_channels and
    # torso_dim (rapidrl.algos.common_config).

    # --- environment ------------------------------------------------------------------------
    num_envs: int = 8
    """Envs stepped together; a rollout holds num_steps x num_envs agent steps."""
    env_batch_size: int | None = None
    """Envs per vector-env recv, dividing num_envs; smaller: acting on one batch overlaps stepping
    the others. None: the backend's default (num_envs; about half of them for async)."""

    # --- network ------------------------------------------------------------------------------
    recurrent: bool = False
    """PPO-LSTM: torso -> LSTM -> heads, trained on whole env sequences."""
    sequence_mode: SequenceMode = "packed"
    """Recurrent training, the same losses each: packed = one LSTM call per length bucket of
    episode segments (fast); loop = one call per step (reference); packed_sequence = one call."""
    lstm_hidden: int = 128
    """LSTM hidden size (recurrent only)."""
    torso: Literal["nature", "small"] = "nature"
    """Atari torso: nature = the Nature-DQN CNN (obs_size >= 36); small = 4 x conv(32, 3x3, /2)
    + linear 256 (A3C-style, for obs_size 42). Off Atari: an MLP (--mlp-widths)."""
    mlp_widths: tuple[int, ...] = (64, 64)
    """Vector observations (MuJoCo, classic control): the MLP torso's layer widths, the last its
    features (--torso-dim, when set, replaces the last). CleanRL: 64 64; rl_games: 256 128 64."""
    mlp_activation: Literal["tanh", "relu", "elu"] = "tanh"
    """The MLP torso's activation (CleanRL's PPO: tanh; rl_games' MuJoCo recipes: elu)."""
    log_std_init: float = 0.0
    """Continuous actions: the Gaussian policy's starting log std, every dim (0: std 1, CleanRL;
    the SB3 zoo's tuned MuJoCo PPO: -2, std 0.14). Discrete actions: leave at 0."""
    ortho_init: bool = True
    """Feed-forward: CleanRL's orthogonal init (torso gain sqrt 2, policy head 0.01, value head
    1). False: PyTorch's default init of every layer (SB3's ortho_init=False, as its zoo's tuned
    MuJoCo PPO)."""
    shared_torso: bool = True
    """Feed-forward: actor and critic share the torso (Atari); False: the critic has its own
    (classic control). The recurrent net always shares torso and LSTM."""
    obs_norm: bool = False
    """Normalize each input by its running mean and std, saved with the net: Atari pixels
    clamped to +-5 instead of scaled to [0, 1] (rl_games); vectors (MuJoCo) clamped to +-10 (SB3)."""
    reward_norm: bool = False
    """Scale rewards by the running std of the discounted return, clamped to +-10 (SB3's
    VecNormalize, CleanRL's continuous PPO): the losses see returns near 1 whatever the task."""
    value_norm: bool = False
    """The critic learns returns normalized by their running mean and std (rl_games'
    normalize_value); GAE and explained_variance stay in the return scale."""
    channels_last: bool = False
    """Atari: the Nature CNN in channels_last memory format (faster oneDNN convolutions on CPU)."""
    precision: Precision = "fp32"
    """Conv torso compute dtype (weights, Adam, heads, LSTM, losses stay float32); bf16 = autocast.
    auto: bf16 where the learner's device multiplies bf16 natively (AMX or AVX-512 bf16 CPU, bf16
    GPU), else fp32 (emulated bf16 is slower)."""

    # --- algorithm ----------------------------------------------------------------------------
    num_steps: int = 128
    """Agent steps per env per rollout (the horizon T)."""
    minibatches: int = 4
    """Minibatches per epoch. Recurrent: num_envs must be a multiple (each minibatch holds
    num_envs / minibatches whole env sequences)."""
    epochs: int = 4
    """Passes over each rollout."""
    lr: float = 2.5e-4
    """Adam learning rate (at the start, when annealed)."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over lr_anneal_frames."""
    kl_adaptive_lr: float | None = None
    """Target KL of rl_games' adaptive rate: after each minibatch step lr / 1.5 if approx_kl > 2x
    this, x 1.5 if < half, in [lr_min, lr_max]; starts at lr, needs --no-anneal-lr. None: off."""
    lr_min: float = 1e-6
    """Lower bound of the KL-adaptive learning rate."""
    lr_max: float = 1e-2
    """Upper bound of the KL-adaptive learning rate."""
    lr_anneal_frames: int | None = None
    """Frames over which the learning rate decays to 0. None: max_frames; set it to keep the
    schedule when a run is resumed with another max_frames."""
    adam_eps: float = 1e-5
    """Adam epsilon (CleanRL's PPO uses 1e-5)."""
    fused_adam: bool = False
    """Adam(fused=True): one kernel for the optimizer step (faster on CPU)."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip: float = 0.1
    """PPO clip coefficient epsilon (also the value clip with clip_vloss)."""
    clip_vloss: bool = True
    """Clip the value loss around the rollout's values (CleanRL default)."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient (at the start, when ent_coef_end is set)."""
    ent_coef_end: float | None = None
    """Anneal the entropy coefficient linearly from ent_coef to this over ent_anneal_frames, then
    keep it (a bonus that keeps the policy random costs points). None: ent_coef throughout."""
    ent_anneal_frames: int | None = None
    """Frames over which the entropy coefficient reaches ent_coef_end. None: lr_anneal_frames,
    else max_frames (the learning rate's span)."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float | None = 0.5
    """Clip the global gradient norm to this (None: no clipping)."""
    norm_adv: bool = True
    """Normalize advantages per minibatch."""
    target_kl: float | None = None
    """Stop an update's remaining epochs once the mean approx_kl of an epoch exceeds this."""

    # --- speed --------------------------------------------------------------------------------
    compile: bool = False
    """torch.compile the feed-forward net's forward passes (acting and the update), which fuses
    the element-wise work around the convolutions; the first update pays the compile (seconds,
    cached on disk for later runs). Needs a C++ compiler on the CPU."""

    # --- run ----------------------------------------------------------------------------------
    max_frames: int = 10_000_000
    """Stop after the update that reaches this many emulator frames."""
    algo: tyro.conf.Suppress[Literal["ppo"]] = "ppo"
    """Algorithm name written to config.json (`rapidrl eval` dispatches on it)."""

    # ------------------------------------------------------------------------------------------
    def validate(self) -> None:
        """Cross-field checks; raise ``ConfigError`` naming the fields and the fix."""

        self.validate_common("ppo")
        self.validate_rollout()
        self.require_ints("lstm_hidden")
        need(
            0.0 <= self.gae_lambda <= 1.0, f"--gae-lambda must be in [0, 1], got {self.gae_lambda}"
        )
        validate_torso(self)
        need(
            self.ortho_init or not self.recurrent,
            "--no-ortho-init applies to the feed-forward net; the recurrent net (ppo-lstm, "
            "--recurrent) keeps CleanRL's init: drop --no-ortho-init",
        )
        need(
            len(self.mlp_widths) >= 1 and min(self.mlp_widths) >= 1,
            f"--mlp-widths needs one or more positive widths, got {self.mlp_widths}",
        )
        if self.kl_adaptive_lr is not None:
            need(
                self.kl_adaptive_lr > 0,
                f"--kl-adaptive-lr must be > 0 or None, got {self.kl_adaptive_lr}",
            )
            need(
                not self.anneal_lr,
                "--kl-adaptive-lr and --anneal-lr both set the learning rate; pass "
                "--no-anneal-lr with --kl-adaptive-lr",
            )
            need(
                0 < self.lr_min <= self.lr <= self.lr_max,
                f"the KL-adaptive rate needs 0 < --lr-min ({self.lr_min}) <= --lr ({self.lr}) "
                f"<= --lr-max ({self.lr_max})",
            )
        need(
            -10.0 <= self.log_std_init <= 2.0,
            f"--log-std-init is a log std, in [-10, 2] (std 4.5e-5 to 7.4), got {self.log_std_init}",
        )
        need(self.adam_eps > 0, f"--adam-eps must be > 0, got {self.adam_eps}")
        need(self.clip > 0, f"--clip must be > 0, got {self.clip}")
        need(self.ent_coef >= 0, f"--ent-coef must be >= 0, got {self.ent_coef}")
        need(
            self.ent_coef_end is None or self.ent_coef_end >= 0,
            f"--ent-coef-end must be >= 0 or None, got {self.ent_coef_end}",
        )
        need(
            self.ent_anneal_frames is None or self.ent_anneal_frames >= 1,
            f"--ent-anneal-frames must be >= 1 or None, got {self.ent_anneal_frames}",
        )
        need(
            self.ent_anneal_frames is None or self.ent_coef_end is not None,
            "--ent-anneal-frames has no effect without --ent-coef-end (the coefficient to "
            "anneal to): pass --ent-coef-end, or drop --ent-anneal-frames",
        )
        need(self.vf_coef >= 0, f"--vf-coef must be >= 0, got {self.vf_coef}")
        need(
            self.target_kl is None or self.target_kl > 0,
            f"--target-kl must be > 0 or None, got {self.target_kl}",
        )
        need(
            self.lr_anneal_frames is None or self.lr_anneal_frames >= 1,
            f"--lr-anneal-frames must be >= 1 or None, got {self.lr_anneal_frames}",
        )
        need(
            not (self.recurrent and self.reward_norm),
            "--reward-norm is for the feed-forward net (continuous control): drop it with "
            "--recurrent",
        )
        if self.recurrent:
            need(
                self.num_envs % self.minibatches == 0,
                f"--num-envs ({self.num_envs}) must be a multiple of --minibatches "
                f"({self.minibatches}) with --recurrent: each minibatch holds whole env "
                "sequences; change one of them",
            )
        else:
            need(
                self.rollout_steps >= self.minibatches,
                f"--minibatches ({self.minibatches}) exceeds the rollout's --num-steps x "
                f"--num-envs ({self.rollout_steps}) agent steps",
            )
        if self.env_batch_size is not None:
            b = self.env_batch_size
            need(
                1 <= b <= self.num_envs and self.num_envs % b == 0,
                f"--env-batch-size ({b}) must divide --num-envs ({self.num_envs}): a rollout "
                "waits for whole batches",
            )
            need(
                self.backend != "serial" or b == self.num_envs,
                "--backend serial is synchronous; for --env-batch-size < --num-envs use "
                "--backend async (or hybrid, ale, envpool)",
            )
        if self.compile:
            need(
                not self.recurrent,
                "--compile compiles the feed-forward net; drop it with --recurrent (ppo-lstm)",
            )
            need(
                self.device.startswith("cuda") or cpp_compiler() is not None,
                "--compile needs a C++ compiler for torch.compile's CPU kernels and none was "
                "found (CXX, g++, c++, clang++): install one (e.g. apt install g++) or drop "
                "--compile",
            )
        self._validate_ray(need)

    def _validate_ray(self, need) -> None:
        self.validate_ray()
        if self.ray is None:
            return
        if self.recurrent:
            raise ConfigError(
                "recurrent PPO (ppo-lstm, --recurrent) with --ray is not supported yet: the Ray "
                "workers act feed-forward only; drop --ray or use `rapidrl train ppo`"
            )
        need(
            self.env_batch_size is None,
            "--env-batch-size is for the local vector env; with --ray every worker steps its "
            "envs synchronously: drop --env-batch-size",
        )


# ppo: the classic Atari settings, CleanRL's ppo_atari.py (docs/presets.md#ppo-ppo).
_CLASSIC = PPOConfig(
    env="pong",
    num_envs=8,
    backend="hybrid",
    num_steps=128,
    minibatches=4,
    epochs=4,
    lr=2.5e-4,
    anneal_lr=True,
    clip=0.1,
    ent_coef=0.01,
    vf_coef=0.5,
    gamma=0.99,
    gae_lambda=0.95,
    max_grad_norm=0.5,
    max_frames=40_000_000,  # CleanRL: 10M agent steps
)

PRESETS: dict[str, PPOConfig] = {
    "ppo": _CLASSIC,
    # ppo-lstm: CleanRL's ppo_atari_lstm.py, Nature CNN -> LSTM(512 -> 128), whole env sequences
    # (docs/presets.md#ppo-ppo-lstm).
    "ppo-lstm": dataclasses.replace(_CLASSIC, recurrent=True, sequence_mode="packed"),
    # fast: the classic settings on 16 envs x 64 steps, channels-last, fused Adam, bf16 if native;
    # Pong in 52.1 / 52.5 min on a 2-core Xeon with AMX (docs/presets.md#ppo-fast).
    "fast": dataclasses.replace(
        _CLASSIC,
        num_envs=16,
        num_steps=64,
        epochs=4,
        backend="auto",
        channels_last=True,
        fused_adam=True,
        precision="auto",
        lr_anneal_frames=40_000_000,
        max_frames=30_000_000,
    ),
    # cartpole: CleanRL's ppo.py, separate actor and critic MLPs (docs/presets.md#ppo-cartpole).
    "cartpole": PPOConfig(
        env="CartPole-v1",
        num_envs=4,
        backend="serial",
        num_steps=128,
        minibatches=4,
        epochs=4,
        lr=2.5e-4,
        clip=0.2,
        ent_coef=0.01,
        vf_coef=0.5,
        max_grad_norm=0.5,
        shared_torso=False,
        max_frames=500_000,
    ),
}

# mujoco: CleanRL's ppo_continuous_action.py (Gaussian policy, separate 64x64 tanh actor and
# critic, observations and rewards normalized, 10 epochs of 32 minibatches over 2,048 steps, 1M
# steps) with the rollout's 2,048 steps from 8 envs instead of 1 (docs/presets.md#ppo-mujoco).
PRESETS["mujoco"] = PPOConfig(
    env="Hopper-v5",
    num_envs=8,
    backend="auto",
    num_steps=256,
    minibatches=32,
    epochs=10,
    lr=3e-4,
    anneal_lr=True,
    clip=0.2,
    clip_vloss=True,
    ent_coef=0.0,
    vf_coef=0.5,
    max_grad_norm=0.5,
    gamma=0.99,
    gae_lambda=0.95,
    shared_torso=False,
    obs_norm=True,
    reward_norm=True,
    fused_adam=True,
    torch_threads=1,  # 1,131 steps/s against 981 with 2 on Hopper (docs/results/mujoco_ppo_zen3)
    stop_at_score=None,
    max_frames=1_000_000,
)

# rl_games' PPO recipe, shared by lean (Atari) and mujoco-fast (MuJoCo): big rollouts and
# minibatches, no annealing (lean and mujoco-fast add the KL-adaptive rate), value and input
# normalization.
_RL_GAMES = dict(
    num_envs=64,
    num_steps=128,
    minibatches=4,
    lr=3e-4,
    anneal_lr=False,
    clip=0.2,
    clip_vloss=False,
    vf_coef=2.0,
    max_grad_norm=1.0,
    obs_norm=True,
    value_norm=True,
)

# mujoco-ant: mujoco with a third of the rate, an update stopped once its KL passes 0.05, and the
# policy's noise starting at std 0.14 (the zoo's log std -2; Ant's control cost otherwise spends the
# first million steps shrinking it): Ant-v5 2,817.9 at 1M steps (3.3x without the log std, 2.1x
# the SB3 zoo's PPO), median of 3 on a 2-core Zen 4 (docs/presets.md#ppo-mujoco-ant).
PRESETS["mujoco-ant"] = dataclasses.replace(
    PRESETS["mujoco"], env="Ant-v5", lr=1e-4, target_kl=0.05, log_std_init=-2.0
)

# mujoco-halfcheetah: mujoco with the policy's noise starting at std 0.14 (the zoo's HalfCheetah
# log std -2) and nothing else: HalfCheetah-v5 5,070.7 at 1M steps in ~5 minutes (2.8x mujoco's),
# median of 3 on a 2-core Zen 4; Hopper needs mujoco's std 1 (docs/presets.md#ppo-mujoco-halfcheetah).
PRESETS["mujoco-halfcheetah"] = dataclasses.replace(
    PRESETS["mujoco"], env="HalfCheetah-v5", log_std_init=-2.0
)

# mujoco-fast: rl_games' MuJoCo recipe (64 envs x 128 steps, 5 epochs of 4 minibatches, KL-adaptive
# rate, input and value normalization, one 256-128-64 ELU torso) for the 10-minute wall-time
# targets: Walker2d-v5 and HalfCheetah-v5 met on a 2-core Zen 4, median of 3 seeds
# (docs/presets.md#ppo-mujoco-fast).
PRESETS["mujoco-fast"] = dataclasses.replace(
    PRESETS["mujoco"],
    **_RL_GAMES,
    env="HalfCheetah-v5",
    epochs=5,
    kl_adaptive_lr=0.008,
    ent_coef=0.0,
    reward_norm=False,
    shared_torso=True,
    mlp_widths=(256, 128, 64),
    mlp_activation="elu",
    max_frames=20_000_000,
    max_minutes=10.0,  # a wall-time recipe: the targets are scores within 10 minutes
)

# lean (the default): rl_games' Pong recipe on 52x52x2 frames with 3 epochs instead of 4 (Pong
# fp32 capped to AVX2 4.7 min, 3 seeds: docs/results/pong_ppo_e3m4_zen5); the Atari suite:
# docs/results/atari_ppo_lean_zen5 (docs/presets.md#ppo-lean).
PRESETS["lean"] = dataclasses.replace(
    PRESETS["fast"],
    **_RL_GAMES,
    epochs=3,
    obs_size=52,
    frame_stack=2,
    kl_adaptive_lr=0.01,
)
