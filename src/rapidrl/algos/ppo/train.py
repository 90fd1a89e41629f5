"""The PPO / PPO-LSTM trainer: ``train(cfg) -> summary``; reads top to bottom like CleanRL's
``ppo_atari.py`` and ``ppo_atari_lstm.py`` in one loop.

Each update: (1) set the annealed learning rate; (2) collect a rollout of ``num_steps x
num_envs`` agent steps through the vector API; (3) bootstrap values and GAE
(:func:`rapidrl.algos.ppo.gae`); (4) ``epochs`` passes of minibatch PPO steps
(:func:`rapidrl.algos.ppo.learner.update_policy`); (5) log, checkpoint, check the stop conditions (solved, max_frames,
max_minutes, Ctrl-C).

Rollout layout and truncation
-----------------------------
Time-major buffers ``[T, N]``. ``obs[t, i]`` is what env ``i`` showed before its ``t``-th action of
the rollout, ``starts[t, i]`` whether that observation opened an episode (the env's
``terminated | truncated`` of the step before; at ``t = 0`` carried over from the previous
rollout). With the same-step autoreset of the vector API, the observation returned by a step that
ended an episode is already the next episode's first one, so where ``truncated`` (a time limit)
the trainer evaluates ``V(infos["final_obs"])`` right away and GAE bootstraps from it; where
``terminated`` nothing is bootstrapped. For the LSTM that value is ``net.value(final_obs, store,
env_ids)``: the ended episode's state, read before the next ``act`` resets it.

Recurrent training
------------------
The LSTM state of every env at the start of the rollout is stored. Minibatches are groups of
whole env sequences (``num_envs / minibatches`` envs), replayed from their stored states with
``RecurrentActorCritic.evaluate``; ``sequence_mode="packed"`` splits them at episode starts and
runs one LSTM call per length bucket instead of one per step (``rapidrl.nets.recurrent``).

Asynchronous vector envs (``env_batch_size < num_envs``)
--------------------------------------------------------
``recv`` then returns the first ready ``B`` envs, not all of them, so a rollout is assembled per
env. Every env has a write position ``lengths[i]``. At the start of a rollout all envs are idle:
the trainer acts on all ``N`` and sends. Then, for each ``recv``: the returned envs' rewards and
flags go into their own positions, the positions advance, and the trainer acts on the returned
observations and sends right away -- while the rollout's budget of ``num_steps x num_envs``
actions lasts. After that, returned envs are held until every action sent has come back (a
*drain*: ``N / B`` more recvs), so at the update every env is idle again, and every stored step
was chosen by the current policy (no policy lag, no importance correction needed). The rollout
holds exactly ``num_steps x num_envs`` steps, but per env between about ``num_steps - k`` and
``num_steps + k``: envs that step faster contribute more. GAE runs per env up to its own length
(its last step bootstraps from the value of the observation it holds); the buffers have room for
``num_steps x num_envs / B`` steps per env (the most one env can get) and the padding is masked
out of the loss. A synchronous vector env is the special case ``B = N``: every env gets exactly
``num_steps`` steps, no padding -- the classic PPO rollout.

Ray
---
With ``ray`` set, ``train`` runs :mod:`rapidrl.algos.ppo.ray_loop` instead: the rollout of each
update comes from Ray workers (synchronous, latest weights), then the same GAE and
:meth:`rapidrl.algos.ppo.learner.PPOLearner.train_on_rollout`; same run directory and checkpoints. Feed-forward only.

Resume (``--resume RUN_DIR``) -- what is exact and what is not
--------------------------------------------------------------
Checkpoints are taken between updates. Exact: the network, the Adam state, the counters, the
episode window and best mean, the training clock, the metric accumulators and every RNG (Python,
NumPy, torch, the action-sampling and minibatch generators). Not exact: the envs, whose emulator
state is not saved: on resume they restart from seeds derived from the step counter (fresh
episodes, LSTM states zero). So a stopped run's checkpoint equals the uninterrupted run's at the
same frame bit for bit (CPU, same thread count), resuming the same checkpoint twice gives the same
run, and after the checkpoint the resumed run plays other episodes than the uninterrupted one
would have. With ``anneal_lr`` the schedule follows ``lr_anneal_frames`` (default ``max_frames``):
resuming with a larger ``max_frames`` stretches it unless ``lr_anneal_frames`` is set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from rapidrl.algos import DEFAULT_PRESETS, default_preset
from rapidrl.algos.eval import final_eval, restore_for_eval
from rapidrl.algos.ppo.config import PRESETS, PPOConfig
from rapidrl.algos.ppo.learner import (
    METRIC_COLUMNS,
    PPOLearner,
    TrainBatch,
    make_policy,
    rollout_advantages,
)
from rapidrl.nets.normalize import scale_rewards
from rapidrl.nets.recurrent import RecurrentActorCritic
from rapidrl.train.cli import parse_with_resume, run_from_cli
from rapidrl.train.rollout import VectorRollout
from rapidrl.train.runner import Algorithm, rollout_source, run_training
from rapidrl.train.session import LogEvent

__all__ = [
    "LSTM_PRESETS",
    "algorithm",
    "LogEvent",
    "PPORollout",
    "eval_policy",
    "main_ppo",
    "main_ppo_lstm",
    "parse_ppo_args",
    "train",
]

# ppo-lstm: every preset with the LSTM on (`rapidrl train ppo-lstm --preset fast` = fast + LSTM).
# The mujoco presets are not among them: continuous actions are for the feed-forward net.
LSTM_PRESETS = {
    name: dataclasses.replace(cfg, recurrent=True)
    for name, cfg in PRESETS.items()
    if not name.startswith("mujoco")
}
# lean's KL-adaptive rate capped at 1e-3 (3.3x its start; with lean's 0.01 the recurrent policy did
# not learn Pong in 6M frames): Pong in a median of 9.0 min against 17.2 capped at 3e-4, 3 seeds
# each on a 2-core Zen 4 with bf16 (docs/results/pong_ppo_lstm_lean_zen4); 4 epochs, as measured.
LSTM_PRESETS["lean"] = dataclasses.replace(LSTM_PRESETS["lean"], lr_max=1e-3, epochs=4)


# --------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------
def train(cfg: PPOConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train, write the run directory, return the summary (what ``summary.json`` holds)."""
    if cfg.ray is not None:  # rollouts from Ray workers: rapidrl.algos.ppo.ray_loop
        from rapidrl.algos.ppo.ray_loop import train_ray

        summary = train_ray(cfg, on_log=on_log)
    else:
        summary = run_training(cfg, algorithm(cfg), on_log=on_log)
    return final_eval(summary, cfg)  # --eval-episodes: the final policy played greedily


def algorithm(cfg: PPOConfig) -> Algorithm:
    """What this algorithm brings to the run loop (:func:`rapidrl.train.runner.run_training`):
    its learner, its local source of experience (the local vector env), one iteration."""
    name = "ppo-lstm" if cfg.recurrent else "ppo"
    return Algorithm(
        name=name, label="PPO", title=name.upper() + " {env}", columns=METRIC_COLUMNS,
        learner=PPOLearner.for_env, source=rollout_source(PPORollout), iterate=iterate,
        summary_algo="ppo", recurrent=cfg.recurrent, continuous=not cfg.recurrent,
    )  # fmt: skip


def iterate(lrn: PPOLearner, rollout: PPORollout, session: Any) -> None:
    """One PPO update."""
    # 1. Learning rate: annealed linearly to 0 over lr_anneal_frames (or KL-adaptive).
    lrn.set_lr(lrn.frames)
    # 2. Rollout: num_steps x num_envs agent steps (see the module docstring for how an
    #    asynchronous vector env's batches are assembled).
    rollout_s, t_end = lrn.collect(rollout, session)
    # 3. Advantages: GAE per env up to its own length, bootstrapped from the value of the
    #    observation each env holds now.
    batch = rollout.batch()
    # 4. PPO epochs.
    lrn.train_on_rollout(batch, rollout_s=rollout_s, t_start=t_end)
    session.bar.update(lrn.frames, lrn.tracker, upd=lrn.counters.updates)


# --------------------------------------------------------------------------------------------
# The local rollout: a vector env of this process, acted on by the learner's network
# --------------------------------------------------------------------------------------------
class PPORollout:
    """Collects ``num_steps x num_envs`` agent steps into time-major ``[T, N]`` buffers
    (:class:`rapidrl.train.rollout.VectorRollout`, per env, so a first-ready vector env's batches
    work) and turns them into a :class:`TrainBatch`; truncation bootstraps from
    ``V(final_obs)``, for the LSTM from the ended episode's state."""

    def __init__(self, cfg: PPOConfig, options: dict[str, Any], obs_space: Any, lrn: PPOLearner):
        self.steps = VectorRollout(
            cfg, options, obs_space, lrn.device, ("logprobs", "values"), lockstep=False
        )
        self.envs = self.steps.envs
        self.cfg, self.lrn, self.net, self.device = cfg, lrn, lrn.net, lrn.device

    def reset(self, seed: int) -> None:
        """Reset every env (a fresh run, or a resumed one: fresh episodes, zero LSTM states)."""
        self.steps.reset(seed)
        n = self.cfg.num_envs
        self.store = self.net.initial_state(n, self.device) if self.cfg.recurrent else None
        # --reward-norm: each env's discounted return so far (restarting with its episodes)
        self.running_returns = torch.zeros(n, dtype=torch.float64, device=self.device)

    def _act(self, obs: torch.Tensor, ids: torch.Tensor, start: torch.Tensor):
        if self.cfg.recurrent:
            out = self.net.act(obs, self.store, ids, start, generator=self.lrn.act_gen)
            self.store = out.state
        else:
            out = self.net.act(obs, generator=self.lrn.act_gen)
        return out.action, {"logprobs": out.logprob, "values": out.value}

    def _final_value(self, final_obs: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        if self.cfg.recurrent:
            return self.net.value(final_obs, self.store, ids)
        return self.net.value(final_obs)

    def collect(self, on_steps: Callable[[int, dict], None]) -> None:
        """One rollout; ``on_steps(n, infos)`` after every ``n`` steps received (the counters,
        the episode statistics)."""
        self.init_state = self.store  # the LSTM state before step 0 (act() is out of place)
        self.steps.collect(self._act, self._final_value, on_steps)

    def batch(self) -> TrainBatch:
        """The collected rollout with GAE advantages and returns, per env up to its own length,
        bootstrapped from the value of the observation each env holds now."""
        cfg, net, r = self.cfg, self.net, self.steps
        t_len = int(r.lengths.max())
        with torch.no_grad():
            held = torch.as_tensor(r.next_obs, device=self.device)
            boot = net.value(held, self.store) if cfg.recurrent else net.value(held)
        values = r.extras["values"][:t_len]
        lengths = torch.tensor(r.lengths)  # a copy: `r.lengths` is reused
        rewards = r.rewards[:t_len]
        if getattr(net, "reward_rms", None) is not None:  # --reward-norm
            steps = torch.arange(t_len, device=self.device)[:, None]
            rewards = scale_rewards(
                rewards,
                r.terminated[:t_len] | r.truncated[:t_len],
                steps < lengths.to(self.device)[None],
                self.running_returns,
                cfg.gamma,
                net.reward_rms,
            )
        advantages, returns, valid = rollout_advantages(
            rewards,
            values,
            r.terminated[:t_len],
            r.truncated[:t_len],
            r.final_values[:t_len],
            lengths.to(self.device),
            boot,
            cfg.gamma,
            cfg.gae_lambda,
        )
        return TrainBatch(
            r.obs[:t_len],
            r.actions[:t_len],
            r.extras["logprobs"][:t_len],
            values,
            advantages,
            returns,
            r.starts[:t_len],
            valid,
            lengths,
            self.init_state,
        )

    def close(self) -> None:
        self.steps.close()


# --------------------------------------------------------------------------------------------
# Evaluation: the PPO policy loader of ``rapidrl eval``
# --------------------------------------------------------------------------------------------
class RecurrentPolicy:
    """PPO-LSTM policy for one stream of observations, greedy or (``generator`` given) sampled:
    keeps the LSTM state between calls. ``reset()`` starts a new episode (zero state)."""

    def __init__(
        self, net: RecurrentActorCritic, device: str, generator: torch.Generator | None = None
    ):
        self.net, self.device, self.generator = net, device, generator
        self.state = None
        self.new_episode = True

    def reset(self) -> None:
        self.state = None
        self.new_episode = True

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        obs_t = torch.as_tensor(np.asarray(obs), device=self.device)
        n = obs_t.shape[0]
        if self.state is None or self.state[0].shape[1] != n:
            self.state = self.net.initial_state(n, self.device)
        start = torch.full((n,), self.new_episode, dtype=torch.bool, device=self.device)
        with torch.no_grad():
            out = self.net.act(
                obs_t,
                self.state,
                None,
                start,
                deterministic=self.generator is None,
                generator=self.generator,
            )
        self.state, self.new_episode = out.state, False
        return out.action.cpu().numpy()


def eval_policy(
    config: dict[str, Any], ckpt, device: str = "cpu", sample: bool = False, seed: int = 0
):
    """``rapidrl eval`` loader: the greedy (argmax) policy of a PPO or PPO-LSTM checkpoint, or
    with ``sample`` the policy as it acts in training (actions drawn from its distribution by a
    generator seeded with ``seed``).

    Returns ``(act, env_id, env_options)`` where ``act(obs [B, ...]) -> actions [B]``. For the
    LSTM ``act`` is a :class:`RecurrentPolicy` that carries its state from call to call; call
    ``act.reset()`` at each new episode.
    """
    cfg, env, net = restore_for_eval(
        PPOConfig, "PPO", make_policy, config, ckpt, device, continuous=True
    )
    bounds = None
    if env.continuous:  # the Gaussian's mean (or a sample), clipped to the bounds as in training
        space = env.action_space
        bounds = (space.low, space.high)
    generator = torch.Generator(device).manual_seed(seed) if sample else None
    if cfg.recurrent:
        return RecurrentPolicy(net, device, generator), cfg.env, env.options

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = net.act(
                torch.as_tensor(np.asarray(obs), device=device),
                deterministic=not sample,
                generator=generator,
            )
        actions = out.action.cpu().numpy()
        return actions if bounds is None else np.clip(actions, *bounds)

    return act, cfg.env, env.options


# --------------------------------------------------------------------------------------------
# Command line: rapidrl train ppo / rapidrl train ppo-lstm
# --------------------------------------------------------------------------------------------
def parse_ppo_args(
    argv: Sequence[str], prog: str, default_preset: str, presets: dict[str, PPOConfig] = PRESETS
) -> PPOConfig:
    """``--preset NAME`` + field flags -> ``PPOConfig``; ``--resume RUN_DIR`` takes the run's own
    config as the defaults."""
    return parse_with_resume(
        PPOConfig, presets, argv, prog=prog, default_preset=default_preset, algo="ppo"
    )


def _main(argv: Sequence[str], prog: str, default_preset: str, presets) -> int:
    from rapidrl.distributed import RolloutWorkerError, WorkerFailedError

    cfg = parse_ppo_args(argv, prog, default_preset, presets)
    return run_from_cli(train, cfg, prog, (RolloutWorkerError, WorkerFailedError))


def main_ppo(argv: Sequence[str]) -> int:
    """``rapidrl train ppo [--preset lean|fast|ppo|cartpole|mujoco|mujoco-ant|mujoco-halfcheetah|
    mujoco-fast] [--FIELD VALUE ...]`` (default: lean; mujoco for an env with continuous actions)."""
    return _main(argv, "rapidrl train ppo", default_ppo_preset(argv), PRESETS)


def default_ppo_preset(argv: Sequence[str]) -> str:
    """The preset ``rapidrl train ppo`` takes without ``--preset``: ``mujoco`` (CleanRL's
    continuous-action recipe) for an ``--env`` with continuous actions, else the default
    (``lean``). A run's own config decides with ``--resume``, a ``--config`` file otherwise."""
    from rapidrl.config import flag_value

    default = DEFAULT_PRESETS["ppo"]
    env = flag_value(list(argv), "--env")
    if env is None or any(flag_value(list(argv), f) for f in ("--preset", "--config", "--resume")):
        return default
    return default_preset("ppo", env)


def main_ppo_lstm(argv: Sequence[str]) -> int:
    """``rapidrl train ppo-lstm [--preset NAME] [--FIELD VALUE ...]``: PPO with the LSTM on in
    every preset (default: ppo-lstm)."""
    return _main(argv, "rapidrl train ppo-lstm", DEFAULT_PRESETS["ppo-lstm"], LSTM_PRESETS)
