"""Where the time of one 8-env Pong vector step goes: timing loops behind the README's analysis
of the gap between our best Python backend and ale_py's C++ vector env.

    .venv/bin/python scripts/vector_step_costs.py [--steps 600] [--repeats 3]

Prints ms per vector step (median of the repeats) for:
- 4 lean Atari envs on one core (``serial``) and ale_py's ``AtariVectorEnv`` on one thread;
- two ``serial`` 4-env loops in two processes at once (what two cores give with no hand-off);
- the inline spin hybrid at 8 envs (our best layout on 2 cores) and ale_py on two threads;
- the same inline spin hybrid with envs that do nothing (the vector layer's own cost);
- one Pong episode reset (ALE's ``reset_game``, 60 frames, then the no-ops and FIRE) and the mean
  episode length with random actions: in a synchronous step every reset stalls the other group.
Run it on a quiet machine: it measures wall time.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import gymnasium as gym
import numpy as np

from rapidrl.bench.envs import ale_raw
from rapidrl.vector import make_vec


class NullEnv(gym.Env):
    """An env that costs nothing: Atari-shaped observations, no emulator."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        self.action_space = gym.spaces.Discrete(6)
        self._obs = np.zeros((4, 84, 84), np.uint8)

    def reset(self, *, seed=None, options=None):
        return self._obs.copy(), {}

    def step(self, action):
        return self._obs.copy(), 0.0, False, False, {}


def _time(step, n: int, steps: int, repeats: int) -> float:
    rng = np.random.default_rng(0)
    for _ in range(100):
        step(rng.integers(0, 6, n))
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(steps):
            step(rng.integers(0, 6, n))
        out.append((time.perf_counter() - t) / steps * 1e3)
    return float(np.median(out))


def ours(env, n: int, steps: int, repeats: int, **kw) -> float:
    envs = make_vec(env, n, **kw)
    try:
        envs.reset(seed=0)
        return _time(envs.step, n, steps, repeats)
    finally:
        envs.close()


def ale_py_vec(n: int, threads: int, steps: int, repeats: int) -> float:
    env = ale_raw("pong", n, num_threads=threads)
    try:
        env.reset(seed=0)
        return _time(env.step, n, steps, repeats)
    finally:
        env.close()


def reset_cost(episodes: int = 12) -> tuple[float, float]:
    """(ms per env reset, agent steps per episode) of Pong with random actions."""
    from rapidrl.envs import make_env

    env, rng = make_env("pong"), np.random.default_rng(0)
    env.reset(seed=0)
    resets, lengths, n = [], [], 0
    while len(resets) < episodes:
        _, _, terminated, truncated, _ = env.step(int(rng.integers(6)))
        n += 1
        if terminated or truncated:
            t = time.perf_counter()
            env.reset()
            resets.append((time.perf_counter() - t) * 1e3)
            lengths.append(n)
            n = 0
    return float(np.median(resets)), float(np.mean(lengths))


def _serial_job(steps: int, repeats: int, out) -> None:
    out.put(ours("pong", 4, steps, repeats, backend="serial"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    s, r = a.steps, a.repeats
    rows = [
        ("serial, 4 lean envs, one core", ours("pong", 4, s, r, backend="serial")),
        ("ale_py AtariVectorEnv, 4 envs, 1 thread", ale_py_vec(4, 1, s, r)),
    ]
    q = mp.get_context("spawn").Queue()
    procs = [mp.get_context("spawn").Process(target=_serial_job, args=(s, r, q)) for _ in range(2)]
    for proc in procs:
        proc.start()
    both = [q.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=10)
    rows.append(("two serial 4-env loops side by side (each)", max(both)))
    inline = dict(backend="hybrid", num_workers=2, inline=True, spin=0.002)
    rows.append(("hybrid 2 x 4, one inline, spin: 8 envs", ours("pong", 8, s, r, **inline)))
    rows.append(("ale_py AtariVectorEnv, 8 envs, 2 threads", ale_py_vec(8, 2, s, r)))
    rows.append(
        ("the same hybrid with envs that do nothing", ours([NullEnv] * 8, 8, s, r, **inline))
    )
    for label, ms in rows:
        print(f"{label:45s} {ms:6.3f} ms per vector step")
    ms, length = reset_cost()
    print(
        f"one Pong env reset {ms:.2f} ms, every {length:.0f} agent steps: at 8 envs a reset every "
        f"{length / 8:.0f} vector steps, {8 * ms / length:.3f} ms per vector step on average"
    )


if __name__ == "__main__":
    main()
