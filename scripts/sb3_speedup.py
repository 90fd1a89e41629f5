"""How much faster Stable-Baselines3 runs on rapidrl's vector env than on its own Atari stack.

    .venv/bin/python scripts/sb3_speedup.py [--seconds 20] [--repeats 5] [--num-envs 8]

(needs ``pip install 'rapidrl[sb3]'``; ``--seconds 2 --repeats 1`` is a quick smoke run). Both
sides serve the same protocol through SB3's ``VecEnv`` interface, on Pong with 8 envs:

- ``sb3``: SB3's standard Atari setup, ``make_atari_env("PongNoFrameskip-v4")`` (its
  ``AtariWrapper``: 30 no-ops, 4-frame max-pool skip, life loss = episode end, FIRE reset, 84x84
  grey, clipped rewards) in a ``SubprocVecEnv`` (one process per env), then ``VecFrameStack(4)``
  and the ``VecTransposeImage`` that SB3's ``CnnPolicy`` adds to channel-last frames;
- ``rapidrl``: ``rapidrl.integrations.sb3.make_sb3_vec("pong", 8)`` with rapidrl's default
  layout (``backend="auto"`` with nothing autotuned: one env group per core, the last stepped
  in this process, 2 ms spin; ``--backend`` picks another): the same DQN protocol, frames
  stacked channels first, so no transpose.

Two phases, each a series of timed trials alternating between the two sides (the side that goes
first alternates too, so a drifting machine load does not favour one):

- ``env``: random actions through ``VecEnv.step`` for ``--seconds`` per trial: env steps/s;
- ``ppo``: SB3 ``PPO("CnnPolicy")`` with the rl-zoo Atari settings (``n_steps=128``,
  ``batch_size=256``, ``n_epochs=4``), whole rollout + update iterations for at least
  ``--seconds`` per trial (after one untimed warm-up iteration): env steps/s of training.

Prints the CPU, the median steps/s (and emulator frames/s, 4 per step) of each side, and the
ratio rapidrl / sb3. It measures wall time: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

FRAME_SKIP = 4


def _make_ale_pong() -> gym.Env:
    # Runs in SB3's worker processes: importing ale_py there registers the ALE ids.
    import ale_py

    gym.register_envs(ale_py)
    return gym.make("PongNoFrameskip-v4")


def make_sb3_side(num_envs: int, seed: int, vec: str):
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import (
        DummyVecEnv,
        SubprocVecEnv,
        VecFrameStack,
        VecTransposeImage,
    )

    cls = SubprocVecEnv if vec == "subproc" else DummyVecEnv
    env = make_atari_env(_make_ale_pong, n_envs=num_envs, seed=seed, vec_env_cls=cls)
    # What PPO("CnnPolicy") trains on in SB3's Atari examples and the rl-zoo.
    return VecTransposeImage(VecFrameStack(env, n_stack=4))


def make_rapidrl_side(num_envs: int, seed: int, backend: str):
    from rapidrl.integrations.sb3 import make_sb3_vec
    from rapidrl.vector import default_layout

    if backend == "default":
        # Not backend="auto": an autotune cache on this machine could hold a first-ready layout,
        # which SB3 (every env every step) cannot use.
        return make_sb3_vec(
            "pong", num_envs, backend="hybrid", seed=seed, **default_layout(num_envs)
        )
    return make_sb3_vec("pong", num_envs, backend=backend, seed=seed)


def env_trial(env, seconds: float, rng: np.random.Generator) -> float:
    """Env steps/s of random play through ``VecEnv.step`` for ``seconds``."""
    n, n_actions = env.num_envs, env.action_space.n
    steps = 0
    start = time.perf_counter()
    while True:
        for _ in range(50):  # check the clock every 50 steps: the loop must not cost time
            env.step(rng.integers(0, n_actions, size=n))
        steps += 50
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return steps * n / elapsed


def make_ppo(env, args: argparse.Namespace):
    from stable_baselines3 import PPO

    # rl-zoo's Atari PPO hyperparameters (the learning rate and clip schedules do not change the
    # cost, so they are constants here).
    return PPO(
        "CnnPolicy",
        env,
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        n_epochs=args.n_epochs,
        learning_rate=2.5e-4,
        clip_range=0.1,
        ent_coef=0.01,
        vf_coef=0.5,
        seed=args.seed,
        device="cpu",
        verbose=0,
    )


def ppo_trial(model, seconds: float) -> float:
    """Env steps/s of whole PPO iterations (rollout + update), at least ``seconds`` of them."""
    per_iter = model.n_steps * model.env.num_envs
    done = 0
    start = time.perf_counter()
    while True:
        model.learn(total_timesteps=per_iter, reset_num_timesteps=False)
        done += per_iter
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed


def alternate(
    trials: dict[str, Callable[[], float]], repeats: int, label: str
) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {name: [] for name in trials}
    names = list(trials)
    for r in range(repeats):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            value = trials[name]()
            results[name].append(value)
            print(f"  {label} round {r + 1}/{repeats} {name:8s} {value:9.0f} steps/s", flush=True)
    return results


def report(label: str, results: dict[str, list[float]]) -> dict[str, Any]:
    med = {name: float(np.median(v)) for name, v in results.items()}
    ratio = med["rapidrl"] / med["sb3"]
    print(f"{label}: median env steps/s (frames/s = x{FRAME_SKIP})")
    for name, value in med.items():
        print(f"  {name:8s} {value:9.0f} steps/s  {value * FRAME_SKIP:10.0f} frames/s")
    print(f"  speed-up rapidrl / sb3: {ratio:.2f}x")
    return {"median": med, "ratio": ratio, "trials": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per timed trial")
    parser.add_argument("--repeats", type=int, default=5, help="trials per side and phase")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--phases", default="env,ppo", help="comma-separated: env, ppo")
    parser.add_argument(
        "--backend",
        default="default",
        help="rapidrl backend: 'default' (auto's layout without autotuning), or a make_vec one",
    )
    parser.add_argument("--sb3-vec", choices=("subproc", "dummy"), default="subproc")
    parser.add_argument("--n-steps", type=int, default=128, help="PPO rollout length per env")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--n-epochs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = set(phases) - {"env", "ppo"}
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}; choose from env, ppo")

    import ale_py
    import stable_baselines3
    import torch

    from rapidrl.hardware import describe

    print(f"CPU: {describe()}")
    print(
        f"stable-baselines3 {stable_baselines3.__version__}, ale-py {ale_py.__version__}, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads); Pong, "
        f"{args.num_envs} envs; sb3: make_atari_env + {args.sb3_vec}; rapidrl: {args.backend}",
        flush=True,
    )
    envs = {
        "rapidrl": make_rapidrl_side(args.num_envs, args.seed, args.backend),
        "sb3": make_sb3_side(args.num_envs, args.seed, args.sb3_vec),
    }
    try:
        for env in envs.values():
            env.reset()
        if "env" in phases:
            rngs = {name: np.random.default_rng(args.seed) for name in envs}
            for name, env in envs.items():  # warm-up: first steps, page faults, caches
                env_trial(env, min(1.0, args.seconds), rngs[name])
            trials = {
                name: (lambda e=env, g=rngs[name]: env_trial(e, args.seconds, g))
                for name, env in envs.items()
            }
            report("env stepping", alternate(trials, args.repeats, "env"))
        if "ppo" in phases:
            models = {name: make_ppo(env, args) for name, env in envs.items()}
            for model in models.values():  # warm-up iteration: first torch calls, allocations
                model.learn(total_timesteps=model.n_steps * args.num_envs)
            trials = {name: (lambda m=m: ppo_trial(m, args.seconds)) for name, m in models.items()}
            report("PPO CnnPolicy training", alternate(trials, args.repeats, "ppo"))
    finally:
        for env in envs.values():
            env.close()


if __name__ == "__main__":
    main()
