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

Presets (``--preset NAME``; ``rapidrl train pqn`` defaults to ``fast``):

- ``pqn``: the paper's Atari settings (the reasoning and sources are next to ``PRESETS``).
- ``fast``: the same learning settings sized for a 2-core CPU (fewer envs, 64x64 frames), with
  a shorter, two-phase epsilon schedule.
- ``lean``: ``fast`` on a cheaper input (52x52 frames, two of them), 64 envs x 16 steps and
  lambda 0.9 -> 0.65 early: for CPUs without native bf16 (AVX2 only).
- ``cartpole``: classic control; solved CartPole-v1 (mean-100 > 475) in about 10 s of training
  on the 2-core machine (seeds 1-4).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import tyro

from rapidrl.config import ConfigError, RayTrainerConfig, flag_name, need

__all__ = ["PRESETS", "PQNConfig"]

Backend = Literal["auto", "serial", "subprocess", "hybrid", "async", "ale", "envpool"]


@dataclass(frozen=True)
class PQNConfig(RayTrainerConfig):
    """Train PQN (parallelized Q-learning): online Q(lambda) over vector-env rollouts, no replay
    buffer, no target network, a LayerNorm after every layer. One update = a rollout of
    num_steps x num_envs epsilon-greedy agent steps, then epochs x minibatches gradient steps of
    MSE to the Q(lambda) returns. Frames are emulator frames (agent steps x frame_skip)."""

    # --- environment ------------------------------------------------------------------------
    num_envs: int = 128
    """Envs stepped together; a rollout holds num_steps x num_envs agent steps."""
    backend: Backend = "auto"
    """Vector env backend: auto = serial for 1 env, else the autotuned layout of `rapidrl bench
    envs --autotune` (hybrid processes if none); see rapidrl.vector.make_vec. PQN steps every
    env together: a first-ready layout (async) is stepped batch by batch until every env has
    stepped."""
    num_workers: int | None = None
    """Env worker processes (hybrid/async) or threads (ale/envpool); None: the backend's
    default."""
    seed: int = 1
    """Seeds torch, numpy, exploration, minibatch shuffling and the envs (env i: seed + i)."""

    # --- network ------------------------------------------------------------------------------
    torso: Literal["nature", "small"] = "nature"
    """Atari torso: nature = the Nature-DQN CNN (any obs_size >= 36); small = 4 x conv(32, 3x3,
    stride 2) + linear 256, the A3C-style CPU torso (meant for obs_size 42). Either gets a
    LayerNorm after every layer. Ignored off Atari (an MLP with LayerNorm)."""
    channels_last: bool = False
    """Atari: the conv torso in channels_last memory format (faster oneDNN convolutions; the
    LayerNorms keep the layout, see the fast preset)."""
    precision: Literal["fp32", "bf16", "auto"] = "fp32"
    """Compute dtype of the conv torso (weights, optimizer, head and loss stay float32). bf16:
    autocast to bfloat16; auto: bf16 where the device multiplies bf16 natively (AMX CPU, bf16
    GPU), else fp32."""

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
    gamma: float = 0.99
    """Discount per agent step."""
    q_lambda: float = 0.65
    """Lambda of the Q(lambda) returns: 0 = one-step Q-learning targets, 1 = Monte-Carlo returns
    (bootstrapped at time limits and at the rollout's end)."""
    start_q_lambda: float | None = None
    """Lambda at the start, moved linearly to q_lambda over q_lambda_fraction of
    schedule_frames, then q_lambda. A higher lambda early carries the rare scored points further
    back along the rollout while the Q-values are still uninformed. None: q_lambda throughout."""
    q_lambda_fraction: float = 0.1
    """Fraction of schedule_frames over which lambda goes from start_q_lambda to q_lambda (with
    start_q_lambda set)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this for learning (the targets); episode scores stay the real
    ones. Off Atari (unclipped rewards) it keeps the Q-values near the scale of the LayerNorm'd
    features: CartPole's 0.1 (as the paper's config) gives targets near 10 instead of 100."""
    max_grad_norm: float | None = 10.0
    """Clip the global gradient norm to this (None: no clipping)."""
    start_e: float = 1.0
    """Exploration: epsilon (probability of a uniformly random action) at the start."""
    end_e: float = 0.01
    """Exploration: epsilon after exploration_fraction of schedule_frames, and from then on."""
    exploration_fraction: float = 0.10
    """Fraction of schedule_frames over which epsilon goes linearly from start_e to end_e."""
    final_e: float | None = None
    """Exploration, second phase: epsilon goes on linearly from end_e to final_e, from the end
    of the first decay to final_e_fraction of schedule_frames, then stays there. It lets a run
    learn with end_e and then play (and score) with fewer random actions; None: no second
    phase, epsilon stays at end_e."""
    final_e_fraction: float = 0.15
    """Fraction of schedule_frames at which epsilon reaches final_e (with final_e set)."""
    schedule_frames: int | None = None
    """Frames the schedules span: the learning rate anneals to 0 over them, epsilon decays over
    exploration_fraction of them (and reaches final_e at final_e_fraction of them), lambda
    moves over q_lambda_fraction of them. None:
    max_frames (the budget). Set it explicitly to keep the schedules when a run is stopped and
    resumed with another max_frames."""

    # --- speed --------------------------------------------------------------------------------
    torch_threads: int = 0
    """Torch threads of the learner; 0: all cores."""
    act_threads: int = 0
    """Torch threads while acting; 0: one (a batch of a few observations gains nothing from more
    threads on CPU, and contended threads stall the env workers)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Learner device; auto = cuda if available."""

    # --- run ----------------------------------------------------------------------------------
    max_frames: int = 40_000_000
    """Stop after the update that reaches this many emulator frames."""
    algo: tyro.conf.Suppress[Literal["pqn"]] = "pqn"
    """Algorithm name written to config.json (`rapidrl eval` dispatches on it)."""

    # ------------------------------------------------------------------------------------------
    @property
    def rollout_steps(self) -> int:
        """Agent steps per update: ``num_steps * num_envs``."""
        return self.num_steps * self.num_envs

    def validate(self) -> None:
        """Cross-field checks; raise ``ConfigError`` naming the fields and the fix."""

        self.validate_common("pqn")
        self.require_ints(
            "num_envs",
            "num_steps",
            "minibatches",
            "epochs",
            "max_frames",
        )
        need(
            self.rollout_steps >= self.minibatches,
            f"--minibatches ({self.minibatches}) exceeds the rollout's --num-steps x --num-envs "
            f"({self.rollout_steps}) agent steps; use fewer minibatches or a longer rollout",
        )
        need(
            self.torso != "nature" or self.obs_size >= 36,
            f"--torso nature needs --obs-size >= 36 (its convolutions shrink 36 to 1), got "
            f"{self.obs_size}; use --torso small for smaller frames",
        )
        need(0.0 <= self.gamma <= 1.0, f"--gamma must be in [0, 1], got {self.gamma}")
        need(0.0 <= self.q_lambda <= 1.0, f"--q-lambda must be in [0, 1], got {self.q_lambda}")
        need(
            self.start_q_lambda is None or 0.0 <= self.start_q_lambda <= 1.0,
            f"--start-q-lambda must be in [0, 1] or None, got {self.start_q_lambda}",
        )
        need(
            0.0 <= self.q_lambda_fraction <= 1.0,
            f"--q-lambda-fraction must be in [0, 1], got {self.q_lambda_fraction}",
        )
        need(self.lr > 0, f"--lr must be > 0, got {self.lr}")
        need(self.reward_scale > 0, f"--reward-scale must be > 0, got {self.reward_scale}")
        need(
            self.max_grad_norm is None or self.max_grad_norm > 0,
            f"--max-grad-norm must be > 0 or None, got {self.max_grad_norm}",
        )
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
        if self.backend == "serial" and self.num_workers not in (None, 1):
            raise ConfigError(
                "--backend serial runs every env in one process; drop --num-workers or use "
                "--backend hybrid"
            )
        need(
            self.num_workers is None or self.num_workers >= 1,
            f"--num-workers must be >= 1 or None, got {self.num_workers}",
        )
        need(self.torch_threads >= 0, "--torch-threads must be >= 0 (0: automatic)")
        need(self.act_threads >= 0, "--act-threads must be >= 0 (0: automatic)")
        # Ray (rapidrl.algos.pqn.ray_loop): num_steps from every env of every worker an update.
        self.validate_ray()


# The paper's Atari settings (Gallici et al. 2024; their purejaxql config alg/pqn_atari.yaml):
# 128 envs x 32 steps = 4,096 agent steps per update, 2 epochs of 32 minibatches of 128 (one
# gradient step per 64 agent steps), RAdam lr 2.5e-4, gamma 0.99, lambda 0.65, grad norm 10,
# epsilon 1 -> 0.01 over the first 10% of the run, 10M agent steps (40M frames), Nature CNN with a
# LayerNorm after every layer. Two details follow CleanRL's pqn_atari_envpool.py instead of the
# paper's config: the final epsilon (CleanRL 0.01, the paper 0.001) and the learning rate
# annealed linearly to 0 (the paper keeps it constant on Atari). (CleanRL's script itself
# defaults to 8 envs x 128 steps, 4 minibatches, 4 epochs.)
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
    # fast: the paper's learning settings sized for a 2-core CPU, with a shorter, two-phase
    # epsilon schedule. Pong, 2-core Zen 4 without AMX, torch's kernels capped to AVX2, fp32,
    # seeds 1-3: solved in 30.2 / 26.9 / 26.4 min (7.09M / 6.78M / 7.03M frames), median 26.9
    # min, 3,900-4,500 frames/s. A real AVX2-only Zen 3 (2 cores) runs it at ~2,000-2,200
    # frames/s sustained, half that: seeds 1-2 not solved in 40 min there (5.1M / 4.9M frames,
    # best -16.7 / -18.1; README). The levers:
    # - 32 envs x 32 steps (1,024 agent steps per update): 128 envs would be 4x the acting batch
    #   and the frame buffer for little gain on 2 cores. Rollouts stay 32 steps long, so the
    #   lambda-trace (1 / (1 - gamma * lambda) ~ 2.8 steps) is cut as rarely as in the paper.
    # - 8 minibatches: keeps the paper's minibatch of 128 and its one gradient step per 64 agent
    #   steps (32 minibatches of 1,024 would be minibatches of 32 and 4x the gradient steps).
    #   2 epochs: 1 epoch of 16 minibatches of 64 (the same 16 gradient steps per update, half
    #   the samples each) ran 1.36x the frames/s on the AVX2 path (update 0.39 s instead of
    #   0.67 s, back to back: `rapidrl train pqn --env pong --preset fast --precision fp32
    #   --max-frames 250000 [--epochs 1 --minibatches 16]`, medians of metrics.csv rows; 5,700-
    #   6,050 frames/s in the solves) but learned slower per frame: seeds 1-3 not solved in 32
    #   min (best 4.0 / 0.6 / -1.9); mean-100 at 10 min -18.7 / -20.6 / -18.3 (3.3-3.7M
    #   frames), at 6M frames -6.9 / -15.1 / -14.5, where 2 epochs solved by 6.8-7.1M.
    # - obs_size 64: the Nature CNN's feature map 4x4 instead of 7x7; forward + backward of the
    #   torso without LayerNorm measured 2.1-2.4x faster per sample on this CPU (NatureCNN's
    #   docstring); with the LayerNorms not measured. 42 looks too small (one seed): obs_size
    #   42 (map 1x1, update 0.27 s instead of 0.45 s, rollout unchanged at 0.39 s, 6,000
    #   frames/s) was still at -20.7 after 5.46M frames / 15 min (seed 1), where the 64x64
    #   seeds 1-3 were at -7.9, -6.6 and -4.3 at the same frame count. 52 (maps 12x12, 5x5,
    #   3x3; a training sample ~0.6x the 64x64 cost) on a real 2-core Zen 3, channels-last:
    #   3,100-3,400 frames/s, seeds 1-2 not solved in 40 min (+3.8 / +15.9 at 7.5M / 8.0M
    #   frames), both solved at 47.8 min when continued (8.93M / 9.45M frames), more frames
    #   than the Zen 4's 64x64 seeds needed (6.8-7.1M): 64 stays here (docs/results/
    #   pong_pqn_fast52_zen3/); the lean preset below takes 52 with three other savings.
    # - epsilon 1 -> 0.01 over the first 1M frames (exploration_fraction 0.025 of the 40M-frame
    #   schedule), then on to 0.001 at 6M frames (final_e, final_e_fraction 0.15). With the
    #   paper's 1 -> 0.01 over 4M frames every run sat near the floor until 4M frames (-16..-17)
    #   and then on a plateau at +14..+17: 1M frames of epsilon left the floor ~1M frames
    #   earlier (seed 1, AVX2) but kept the plateau (best 16.6 in 45 min), and that plateau is
    #   largely epsilon's: its last checkpoint (9.15M frames, training mean-100 16.5) scored
    #   18.7 +- 1.8 over 30 full games with epsilon 0.01 and 19.5 +- 0.6 with 0.001 (`rapidrl
    #   eval --episodes 30 --seed 20000 --epsilon E`); the unsolved bf16 seed 3 below, 14.1 +- 7.4
    #   against 17.3 +- 2.8. 0.001 is the paper's final epsilon. Reaching it already at 1M
    #   frames (`--end-e 0.001`, seed 1, stopped at 24 min) was at -17.5 after 5.5M frames,
    #   where the same seed with 0.01 had been at +7 after 5M.
    #   Squeezing the learning rate as well (annealed over 12M frames, epsilon over 1M) solved
    #   seed 1 in 31.5 min but not seeds 2 and 3 in 40 (best 6.8 and 16.2): the lr stays annealed
    #   over the 40M frames, as the paper.
    #   The fractions are of schedule_frames (max_frames by default): a run with another
    #   --max-frames scales them; --schedule-frames 40000000 keeps these frames.
    # - lambda: the paper's 0.65 throughout. Tried on the AVX2 path, seeds 1-3: lambda 0.9 ->
    #   0.65 over the first 4M frames (--start-q-lambda 0.9 --q-lambda-fraction 0.1) left the
    #   floor earlier (mean-100 at 10 min -16.3 / -6.0 / -13.2, against -19.1 / -18.6 / -15.1)
    #   but solved in 29.0 / 21.4 min / not in 32 (7.72M / 5.96M frames; seed 3 sat at -12..-9
    #   from 12 to 20 min, best +3.6 at 32 min), against 30.2 / 26.9 / 26.4 min. Lambda
    #   0.9 throughout (seed 1) rose as early (-12.3 at 10 min) and then stalled at -9..-12
    #   (best -9.0 in 27 min). lr 5e-4 did not rise earlier (seed 1: -19.9 at 10 min).
    # - backend auto, precision auto (bf16 conv torso on a CPU with AMX or AVX-512 bf16), as
    #   PPO's fast preset.
    # - the channels-last layout (channels_last True). nn.LayerNorm copies a channels-last
    #   input to the contiguous layout (and the next convolution copies it back), which made this
    #   net train slower channels-last than contiguous on a 2-core Zen 3 (AVX2 only, fp32), so
    #   the preset ran contiguous for a while (the README's Zen 3 seeds did).
    #   The torsos' LayoutLayerNorm now normalizes a channels-last output in place of layout
    #   (the same function, no copy). On that Zen 3: a training step of 128 took 337-348 us
    #   per sample channels-last against 393-407 contiguous (4 alternations, same process),
    #   acting on 32 equal (5.3-6.0 ms); in the trainer (`rapidrl train pqn --env pong --preset
    #   fast --max-frames 200000 [--no-channels-last]`, alternated twice, medians of metrics
    #   rows) update 0.874 / 0.948 s against 1.077 / 1.195 s per 4,096 frames, rollout 0.73-
    #   0.76 s against 0.67-0.72 s, 2,519 / 2,392 frames/s against 2,357 / 2,145.
    #   docs/results/zen3_rates/ holds the scripts and figures.
    # Everything else (lr, lambda, 40M frames, grad norm) as the paper. Before the epsilon
    # change, with the paper's epsilon, bf16 on the same CPU: solved in 36.5 / 35.0 min (seeds
    # 1-2), seed 3 not in 48 (median 36.5); the AVX2 path: not solved in 60 min (seed 1, best
    # 16.7).
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
    # Classic control: CartPole-v1 in this process, an MLP 64-64 (tanh) with LayerNorm.
    # reward_scale 0.1 (as the paper's CartPole config) is what makes it learn reliably: with
    # the raw rewards (Q-values near 100) the mean-100 return swung between 30 and 400 for
    # 500k frames (seed 1 ended at 388, seed 3 peaked at 289 within 300k frames); with 0.1 every
    # seed tried solved it. Measured on the 2-core machine (torch_threads 1, a benchmark running
    # beside it), seeds 1-4: mean-100 > 475 (CartPole-v1's threshold, the auto stop score) after
    # 113k-137k frames, 7.8-9.7 s of training. 16 envs x 32 steps, 4 minibatches of 128,
    # 4 epochs, lr 1e-3 annealed over the 500k-frame budget, lambda 0.9 and epsilon 1 -> 0.01
    # over the first 20% (100k frames). (lambda 0.65 and 8 envs x 64 steps solved it as well,
    # seeds 1-2, 117k-120k frames.)
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

# lean: fast's learning settings on a cheaper input, for CPUs without native bf16 (AVX2
# only, e.g. AMD Zen 3), where fast's 64x64 frames are too slow to solve Pong in 40 minutes
# (2 seeds not solved in 40 min there, one still at -15.0 at 63 min). Each lever measured on
# a real 2-core Zen 3 (fp32):
# - obs_size 52 (the Nature CNN's maps 12x12, 5x5, 3x3; a training sample ~0.6x the 64x64
#   cost): 3,100-3,400 frames/s instead of ~2,100, but 8.9-9.5M frames to solve (2 seeds).
# - frame_stack 2: the update 0.84-0.90x as long at 52x52 (the first convolution reads half
#   the channels); one seed left the floor sooner (-15.8 at 10 min against -19.8).
# - 64 envs x 16 steps: the same 1,024 agent steps and 8 minibatches of 128 per update,
#   rollout 7-22% shorter (larger acting batches, half the synchronizations per frame; four
#   alternated pairs, docs/results/zen3_rates/act_threads_ab.txt, env_count_ab.txt); each
#   lambda-trace is cut every 16 steps instead of 32 (0.64^16 ~ 1e-3 of weight lost).
# - lambda 0.9 -> 0.65 over the first 4M frames: left the floor sooner in 3 seeds on a
#   capped Zen 4 (fast at 64x64: -16.3 / -6.0 / -13.2 at 10 min against -19.1 / -18.6 /
#   -15.1).
# All four together on the Zen 3 (`rapidrl bench solve --algo pqn --preset fast --seeds
# 1,2,3 --max-minutes 40 --out-dir D -- --obs-size 52 --frame-stack 2 --start-q-lambda 0.9
# --q-lambda-fraction 0.1 --num-envs 64 --num-steps 16`, which is this preset): seeds 1-3
# solved in 35.3 / 34.7 / 36.4 min, median 35.3 (8.29M / 8.53M / 10.66M frames, 3,940 /
# 4,129 / 4,894 frames/s: the VM's speed drifted); mean-100 at 10 min -13.2 / -18.0 /
# -14.1, at 20 min +6.9 / -14.8 / +0.7 (docs/results/pong_pqn_lean_zen3/). Not measured on
# a CPU with bf16, where fast is measured.
PRESETS["lean"] = dataclasses.replace(
    PRESETS["fast"],
    num_envs=64,
    num_steps=16,
    obs_size=52,
    frame_stack=2,
    start_q_lambda=0.9,
    q_lambda_fraction=0.1,  # the default, stated: lambda reaches 0.65 at 4M of the 40M frames
)
