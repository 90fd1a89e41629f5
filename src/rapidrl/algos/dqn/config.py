"""``DQNConfig``: every knob of the DQN family (DQN ... Rainbow) and of how fast it runs.

Units. ``steps`` are *agent steps* summed over all envs (one ``env.step`` of one env = one agent
step = ``frame_skip`` emulator frames on Atari, 4 by default). Schedules (epsilon, target sync,
PER beta) and replay sizes count agent steps, as in the reference implementation (Lapan's
"frames" are agent steps). ``frames`` -- ``max_frames``, the ``frames`` column of
``metrics.csv``, checkpoints, summaries -- are *emulator frames* (``steps * frame_skip``), the
convention of Atari papers and of the rest of rapidrl. Off Atari a step is one frame.

Updates. ``batch_size`` B and ``steps_per_update`` k: after every k agent steps one gradient step
on ``B * k`` transitions (Lapan's "change 1"). The replay ratio, B transitions sampled per agent
step, does not depend on k: k trades many small updates for fewer large ones, which keep the CPU's
vector units busier per sample. Rainbow's "batch 32 every 4 steps" is ``B=8, k=4``.

Presets (``--preset NAME``; ``rapidrl train dqn`` defaults to ``lean``, ``rapidrl train rainbow``
to ``rainbow-lean``; the reasoning and the measurements behind each: docs/presets.md):

- ``dqn``: the reference -- 1 env, batch 32 after every step, MSE loss, Adam 1e-4, epsilon
  1.0 -> 0.02 over the first 100k steps, target sync every 1k steps, replay 100k prefilled with
  10k transitions, gamma 0.99, uniform replay, plain eager torch.
- ``rainbow``: n-step 3 + double + dueling + noisy + prioritized + C51, adapted for Pong.
- ``lean``: the default: ``fast``'s learning settings on 52x52 frames, two of them, normalized
  per pixel, a narrower torso, updates of 256 at lr 5e-4, no double DQN; a 1M replay sampled
  only in its newest 100k transitions for the first 3M frames, the window then growing to 1M.
- ``lean-long``: ``lean`` with all of the 1M replay from the start (Breakout, Name This Game);
  slower on Pong.
- ``rainbow-lean``: ``lean`` with a 100k replay, double DQN and C51: Rainbow's n-step, double,
  dueling and distributional parts on ``lean``'s input, epsilon-greedy and uniform replay (no
  noisy nets, no PER).
- ``rainbow-long``: ``rainbow-lean`` at 84x84x4 with a 1M prioritized replay and updates of 256
  every 64 agent steps, without double DQN: for 10M-frame runs of games beyond Pong.
- ``fast``: n-step 3 + double + dueling on 84x84x4 at the Nature replay ratio (the default
  before ``lean``).
- ``base``, ``n-step``, ``double``, ``dueling``, ``noisy``, ``per``, ``c51``, ``rainbow-fast``: the
  reference article's eight systems on one machinery (``fast``'s), for side-by-side runs.

With ``--ray`` Ray workers act, Ape-X style, and this process learns from their batches
(:mod:`rapidrl.algos.dqn.ray_loop`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import tyro

from rapidrl.algos.common_config import TorsoWidths, validate_torso
from rapidrl.config import Precision, RayTrainerConfig, flag_name, need

__all__ = ["DQNConfig", "PRESETS"]


@dataclass(frozen=True)
class DQNConfig(TorsoWidths, RayTrainerConfig):
    """Train a DQN-family agent (DQN, double, dueling, n-step, prioritized, noisy, C51,
    Rainbow). Steps are agent steps summed over envs; frames are emulator frames (steps x
    frame_skip). After every steps_per_update steps comes one update on batch_size x
    steps_per_update transitions."""

    # A config.json written before a field existed meant this value, not the field's default.
    FORMER_DEFAULTS: ClassVar[dict[str, Any]] = {"per_weights": "buffer"}

    # Also TorsoWidths' torso_channels and torso_dim (rapidrl.algos.common_config).

    # --- environment ------------------------------------------------------------------------
    num_envs: int = 1
    """Envs stepped together (one vector step = num_envs agent steps). Acting is batched over
    them, and with a process backend they step while the learner updates."""

    # --- algorithm ----------------------------------------------------------------------------
    gamma: float = 0.99
    """Discount per agent step."""
    n_step: int = 1
    """n-step returns (computed by the replay buffer at sample time; truncation bootstraps)."""
    double: bool = False
    """Double DQN: the online net picks the next action, the target net values it."""
    dueling: bool = False
    """Dueling head: Q = V + A - mean(A)."""
    noisy: bool = False
    """NoisyNet head layers (exploration by parameter noise; usually with epsilon 0)."""
    noisy_sigma0: float = 0.5
    """Initial noise scale of the NoisyNet layers."""
    distributional: bool = False
    """C51: a categorical return distribution on num_atoms atoms in [v_min, v_max]."""
    num_atoms: int = 51
    """C51 atoms."""
    v_min: float = -10.0
    """C51 support minimum."""
    v_max: float = 10.0
    """C51 support maximum."""
    torso: Literal["nature", "small"] = "nature"
    """Atari torso: nature = the Nature-DQN CNN (any obs_size >= 36); small = 4 x conv(32, 3x3,
    stride 2) + linear 256, the A3C-style CPU torso (meant for obs_size 42). Ignored off Atari
    (an MLP)."""
    obs_norm: bool = False
    """Atari: normalize each pixel of the stack by its running mean and std over the replayed
    batches, clamped to +-5 (rl_games' normalize_input), not scale it to [0, 1]. Ignored off
    Atari (flat observations)."""
    head_hidden: int = 0
    """Width of an extra hidden layer per head stream (0: the head is one layer after the
    torso's 512 features)."""
    prioritized: bool = False
    """Proportional prioritized replay (priorities |TD error|, or the C51 cross-entropy)."""
    per_alpha: float = 0.6
    """Prioritization exponent alpha (0 = uniform)."""
    per_beta0: float = 0.4
    """Importance-sampling exponent at the start; annealed linearly to 1."""
    per_beta_steps: int = 500_000
    """Agent steps over which beta reaches 1 (a fixed count, not max_frames: a run continued
    with a larger --max-frames must follow the same schedule)."""
    per_weights: Literal["batch", "buffer"] = "batch"
    """Importance weights divided by the batch's largest (Dopamine) or the buffer's (OpenAI
    baselines; runs saved before this field), where one near-zero TD error shrinks every update."""
    loss: Literal["huber", "mse"] = "huber"
    """TD loss for scalar heads: huber (delta 1) or mse (0.5 td^2). C51 uses cross-entropy."""
    lr: float = 1e-4
    """Adam learning rate."""
    adam_eps: float = 1e-8
    """Adam epsilon (Rainbow uses 1.5e-4)."""
    max_grad_norm: float | None = None
    """Clip the gradient norm to this (None: no clipping)."""
    batch_size: int = 32
    """B: transitions sampled per agent step; each update uses B x steps_per_update of them."""
    steps_per_update: int = 1
    """k: agent steps played between updates; the update batch is batch_size x k."""
    buffer_size: int = 100_000
    """Replay capacity in transitions (frames are stored once: ~7 KB per Atari transition)."""
    buffer_size_early: int = 0
    """> 0: sample only the newest this many transitions until --buffer-grow-step, then let the
    window keep every new one until it spans --buffer-size (a small replay's fast start, a large
    one's memory later). 0, or at least --buffer-size: all of --buffer-size throughout."""
    buffer_grow_step: int = 0
    """Agent steps after which the --buffer-size-early window starts to grow."""
    learning_starts: int = 10_000
    """Transitions in the replay before the first update (the prefill)."""
    target_sync_steps: int = 1_000
    """Copy the online net into the target net every this many agent steps."""
    epsilon_start: float = 1.0
    """Epsilon-greedy: exploration rate at step 0."""
    epsilon_end: float = 0.02
    """Epsilon-greedy: final exploration rate."""
    epsilon_decay_steps: int = 100_000
    """Agent steps over which epsilon falls linearly from epsilon_start to epsilon_end."""

    # --- speed --------------------------------------------------------------------------------
    actor_processes: int = 0
    """0: act in the learner process (envs in worker processes step during the update). >= 1:
    actor processes of num_envs / actor_processes envs and a CPU Q-net each, via shared memory."""
    actor_ring_slots: int = 0
    """Slots (one vector step each) in each actor's ring: how far an actor may run ahead of the
    learner. 0: 2 x the vector steps of one update, at least 2."""
    weight_sync_every: int = 1
    """Actor processes: publish the online weights every this many updates."""
    actor_timeout_s: float = 120.0
    """Seconds without a transition (or a weight lock) before the learner gives up on a live but
    stuck actor process; with --ray, without a batch from any worker."""
    torch_threads: int = 0
    """Learner torch threads; 0: all cores minus one per actor process."""
    compile: bool = False
    """torch.compile the networks of the update (costs 15-30 s; pays off at batches >= 64).
    Falls back to eager with a warning if compilation fails."""
    channels_last: bool = False
    """Convolutions in channels_last memory format (faster with oneDNN on CPU)."""
    fused_adam: bool = False
    """Adam(fused=True): one kernel for the whole optimizer step (faster on CPU)."""
    precision: Precision = "fp32"
    """Conv torso compute dtype (weights, Adam, heads, losses stay float32); bf16 = autocast.
    auto: bf16 where the learner's device multiplies bf16 natively (AMX or AVX-512 bf16 CPU, bf16
    GPU), else fp32 (emulated bf16 is slower)."""
    pin_memory: bool = True
    """On cuda: sample replay batches into pinned host buffers."""
    non_blocking: bool = True
    """On cuda: host-to-device copies of batches do not block the learner."""

    # --- Ray scale-out (Ape-X style: rapidrl.algos.dqn.ray_loop; ray, workers, envs_per_worker
    # and ray_cpus_per_worker are RayTrainerConfig's) ----------------------------------------
    ray_batch_steps: int = 32
    """Steps of each env in one batch a Ray worker sends (ray_batch_steps x envs_per_worker
    transitions; one request in flight per worker)."""
    ray_publish_every: int = 10
    """Put the learner's weights in the Ray object store every this many updates; each worker
    loads the newest with its next request (the lag is logged as policy_lag)."""

    # --- run ----------------------------------------------------------------------------------
    max_frames: int = 10_000_000
    """Stop after this many emulator frames (steps x frame_skip)."""
    save_replay: bool = False
    """Include the replay buffer in checkpoints (exact resume; ~0.7 GB for 100k Atari
    transitions). Without it a resumed run refills learning_starts transitions first."""
    algo: tyro.conf.Suppress[Literal["dqn"]] = "dqn"
    """Algorithm name written to config.json (`rapidrl eval` dispatches on it)."""

    # ------------------------------------------------------------------------------------------
    @property
    def update_batch(self) -> int:
        """Transitions per gradient step: ``batch_size * steps_per_update``."""
        return self.batch_size * self.steps_per_update

    def validate(self) -> None:
        """Cross-field checks; raise ``ConfigError`` naming the fields and the fix."""

        self.validate_common("dqn")
        self.require_ints(
            "num_envs",
            "batch_size",
            "steps_per_update",
            "buffer_size",
            "n_step",
            "target_sync_steps",
            "max_frames",
            "weight_sync_every",
        )
        for name in (
            "learning_starts",
            "epsilon_decay_steps",
            "actor_processes",
            "buffer_size_early",
            "buffer_grow_step",
        ):
            v = getattr(self, name)
            need(isinstance(v, int) and v >= 0, f"--{flag_name(name)} must be >= 0, got {v!r}")
        validate_torso(self)
        need(0.0 <= self.gamma <= 1.0, f"--gamma must be in [0, 1], got {self.gamma}")
        need(self.lr > 0, f"--lr must be > 0, got {self.lr}")
        need(self.adam_eps > 0, f"--adam-eps must be > 0, got {self.adam_eps}")
        need(
            self.max_grad_norm is None or self.max_grad_norm > 0,
            f"--max-grad-norm must be > 0 or None, got {self.max_grad_norm}",
        )
        for name in ("epsilon_start", "epsilon_end"):
            v = getattr(self, name)
            need(0.0 <= v <= 1.0, f"--{flag_name(name)} must be in [0, 1], got {v}")
        need(
            self.learning_starts <= self.buffer_size,
            f"--learning-starts ({self.learning_starts}) exceeds --buffer-size "
            f"({self.buffer_size}): the prefill could never finish; lower --learning-starts or "
            "raise --buffer-size",
        )
        if self.buffer_size_early and self.buffer_size_early < self.buffer_size:
            need(
                not self.prioritized,
                "--buffer-size-early windows uniform replay only: prioritized replay samples "
                "its whole sum tree; add --buffer-size-early 0 (the whole replay) or drop "
                "--prioritized",
            )
            need(
                math.ceil(self.buffer_size_early / self.num_envs) >= self.n_step + 1,
                f"--buffer-size-early {self.buffer_size_early} over --num-envs {self.num_envs} "
                f"leaves fewer than --n-step {self.n_step} + 1 transitions per env; raise it",
            )
        slots = math.ceil(self.buffer_size / self.num_envs)
        need(
            slots >= self.n_step + 1,
            f"--buffer-size {self.buffer_size} over --num-envs {self.num_envs} leaves {slots} "
            f"transitions per env, fewer than --n-step {self.n_step} + 1; raise --buffer-size",
        )
        need(
            self.learning_starts >= self.num_envs * self.n_step or self.learning_starts == 0,
            f"--learning-starts ({self.learning_starts}) must be >= --num-envs x --n-step "
            f"({self.num_envs * self.n_step}) so that the first batch can be sampled",
        )
        if self.distributional:
            need(self.num_atoms >= 2, f"--num-atoms must be >= 2, got {self.num_atoms}")
            need(
                self.v_min < self.v_max,
                f"--v-min ({self.v_min}) must be < --v-max ({self.v_max})",
            )
        if self.prioritized:
            need(self.per_alpha >= 0, f"--per-alpha must be >= 0, got {self.per_alpha}")
            need(0 <= self.per_beta0 <= 1, f"--per-beta0 must be in [0, 1], got {self.per_beta0}")
            need(
                self.per_weights in ("batch", "buffer"),
                f"--per-weights must be batch or buffer, got {self.per_weights!r}",
            )
            need(
                self.per_beta_steps >= 1,
                f"--per-beta-steps must be >= 1, got {self.per_beta_steps}",
            )
        need(self.head_hidden >= 0, f"--head-hidden must be >= 0, got {self.head_hidden}")
        if self.actor_processes:
            need(
                self.num_envs % self.actor_processes == 0,
                f"--num-envs ({self.num_envs}) must be a multiple of --actor-processes "
                f"({self.actor_processes}): each actor runs num_envs / actor_processes envs",
            )
        need(self.actor_ring_slots >= 0, "--actor-ring-slots must be >= 0 (0: automatic)")
        need(self.actor_timeout_s > 0, "--actor-timeout-s must be > 0")
        need(self.torch_threads >= 0, "--torch-threads must be >= 0 (0: automatic)")
        self._validate_ray(need)

    def _validate_ray(self, need) -> None:
        self.validate_ray()
        self.require_ints("ray_batch_steps", "ray_publish_every")
        if self.ray is None:
            return
        need(
            self.actor_processes == 0,
            f"--actor-processes {self.actor_processes} and --ray are two ways to act: with --ray "
            "the Ray workers act (--workers, --envs-per-worker); drop --actor-processes",
        )


_REFERENCE = DQNConfig(
    loss="mse",
    lr=1e-4,
    batch_size=32,
    steps_per_update=1,
    buffer_size=100_000,
    learning_starts=10_000,
    target_sync_steps=1_000,
    epsilon_start=1.0,
    epsilon_end=0.02,
    epsilon_decay_steps=100_000,
    num_envs=1,
    backend="serial",
)

# Rainbow's components as its preset sets them (also used by the side-by-side presets below).
_PER = dict(prioritized=True, per_alpha=0.5, per_beta0=0.4, per_beta_steps=250_000)
_NO_EPSILON = dict(epsilon_start=0.0, epsilon_end=0.0, epsilon_decay_steps=0)  # noisy explores
_RAINBOW = dict(n_step=3, double=True, dueling=True, noisy=True, distributional=True, **_PER)
# Rainbow's Huber loss, Adam eps and clipping, with Lapan's Pong target sync (rainbow and fast).
_HUBER_ADAM = dict(loss="huber", adam_eps=1.5e-4, max_grad_norm=10.0, target_sync_steps=2_000)

PRESETS: dict[str, DQNConfig] = {
    # dqn: the reference (Lapan, "Speeding up DQN on PyTorch"): one env step, then one update of
    # 32 (docs/presets.md#dqn-dqn).
    "dqn": _REFERENCE,
    # rainbow: Rainbow (Hessel et al. 2018) with Lapan's Pong adaptations (smaller replay, faster
    # target sync, lr 1e-4) at the paper's replay ratio (docs/presets.md#dqn-rainbow).
    "rainbow": dataclasses.replace(
        _REFERENCE,
        **_RAINBOW,
        **_NO_EPSILON,
        **_HUBER_ADAM,
        lr=1e-4,
        batch_size=8,
        steps_per_update=4,
    ),
    # fast: n-step 3 + double + dueling at a quarter of the reference's replay ratio, 8 envs; Pong
    # in 58.0 min on a 2-core Xeon with AMX (docs/presets.md#dqn-fast).
    "fast": dataclasses.replace(
        _REFERENCE,
        n_step=3,
        double=True,
        dueling=True,
        **_HUBER_ADAM,
        lr=2.5e-4,
        batch_size=8,
        steps_per_update=8,
        num_envs=8,
        backend="auto",
        epsilon_end=0.01,
        epsilon_decay_steps=100_000,
        channels_last=True,
        fused_adam=True,
        precision="auto",
    ),
}
# lean: fast's learning settings with what made PPO fast on 2 cores (52x52 frames, two of them,
# each pixel normalized by its running statistics, a narrower torso) and updates of 256 every 32
# agent steps (the same replay ratio) at lr 5e-4, without double DQN's third forward pass; here
# with a 100k replay (lean until 3M frames; lean-long's and rainbow-lean's base) ...
_LEAN_100K = dataclasses.replace(
    PRESETS["fast"],
    obs_size=52,
    frame_stack=2,
    obs_norm=True,
    torso_channels=(16, 32, 32),
    torso_dim=256,
    double=False,
    num_envs=16,
    batch_size=8,
    steps_per_update=32,
    lr=5e-4,
)
# ... sampling only the newest 100k transitions of a 1M replay for its first 3M frames (Pong's
# fast start), then growing the window by one per agent step to 1M at 6.6M frames (the large
# replay of long games): at 10M frames 1.03x Dopamine's DQN on Name This Game and 1.47x on
# Breakout, under Dopamine's protocol, on a 2-core Zen 4 (docs/presets.md#dqn-lean).
PRESETS["lean"] = dataclasses.replace(
    _LEAN_100K, buffer_size=1_000_000, buffer_size_early=100_000, buffer_grow_step=750_000
)
# lean-long: lean with Dopamine's 1M replay from the start: Breakout 1.66x, Name This Game 1.02x
# Dopamine's DQN at 10M frames on a 2-core Zen 4; slower on Pong (docs/presets.md#dqn-lean-long).
PRESETS["lean-long"] = dataclasses.replace(_LEAN_100K, buffer_size=1_000_000)
# rainbow-lean: lean's 100k replay with double DQN and C51 (Rainbow's n-step, double, dueling and
# C51 on lean's input; epsilon-greedy and uniform replay: with noisy nets or PER it learned slower
# there): Pong in 19.0 min, median of 3, on a 2-core Zen 4 with bf16
# (docs/presets.md#dqn-rainbow-lean).
PRESETS["rainbow-lean"] = dataclasses.replace(_LEAN_100K, double=True, distributional=True)
# rainbow-long: rainbow-lean at Dopamine's 84x84x4 input with its 1M replay and PER (alpha 0.5,
# beta 0.4 -> 1 over 2.5M steps), without double DQN, updates of 256 every 64 agent steps: under
# Dopamine's protocol at 10M frames Q*bert 1.29x and Breakout 1.35x Dopamine's Rainbow, 55-56 min
# each on a 2-core Zen 4 with bf16 (docs/presets.md#dqn-rainbow-long).
PRESETS["rainbow-long"] = dataclasses.replace(
    PRESETS["rainbow-lean"],
    **dict(_PER, per_beta_steps=2_500_000),
    buffer_size=1_000_000,
    obs_size=84,
    frame_stack=4,
    double=False,
    batch_size=4,
    steps_per_update=64,
)

# The reference article's eight systems, side by side: `base` (plain DQN on fast's machinery) and
# base + each component; Pong at 4M frames, one seed each (docs/presets.md#dqn-eight-systems).
_BASE = dataclasses.replace(PRESETS["fast"], n_step=1, double=False, dueling=False)
PRESETS.update(
    {
        "base": _BASE,
        "n-step": dataclasses.replace(_BASE, n_step=3),
        "double": dataclasses.replace(_BASE, double=True),
        "dueling": dataclasses.replace(_BASE, dueling=True),
        "noisy": dataclasses.replace(_BASE, noisy=True, **_NO_EPSILON),
        "per": dataclasses.replace(_BASE, **_PER),
        "c51": dataclasses.replace(_BASE, distributional=True),
        "rainbow-fast": dataclasses.replace(_BASE, **_RAINBOW, **_NO_EPSILON),
    }
)
