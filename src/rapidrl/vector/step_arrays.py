"""The arrays every backend writes step results into, for all ``N`` envs at once.

One layout serves every backend: plain numpy arrays (serial, ale, envpool) or views into one
shared-memory block (process backends), where workers write their rows in place and pipes carry
only tiny commands. ``obs`` is double-buffered (``[2, N, ...]``): a step writes the slot the
previous step did not, so the last observation of every env survives the step in flight (a
crashed worker's envs can still report it as ``final_obs``) and ``copy=False`` views stay valid
one step longer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

ALIGN = 64  # bytes; every array of a shared block starts on a cache line

__all__ = ["ALIGN", "ArraySpec", "StepArrays", "block_layout"]


def block_layout(sizes: Iterable[int]) -> tuple[list[int], int]:
    """Where arrays of ``sizes`` bytes go in one (shared-memory) block, one after the other, each
    starting on a cache line: ``(offsets, block size)``. The one layout of every shared block
    (the vector envs' step arrays, the DQN actors' rings and weights)."""
    offsets, pos = [], 0
    for n in sizes:
        offsets.append(pos)
        pos += -(-int(n) // ALIGN) * ALIGN
    return offsets, max(pos, ALIGN)


@dataclass(frozen=True)
class ArraySpec:
    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy dtype string, picklable

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass
class StepArrays:
    """Step results of ``N`` envs (or a row range of them, see :meth:`rows`)."""

    obs: np.ndarray  # [2, N, *obs_shape]: two slots, see module docstring
    final_obs: np.ndarray  # [N, *obs_shape]: written only where an episode ended
    actions: np.ndarray  # [N, *action_shape]: written by the parent before a step
    rewards: np.ndarray  # [N] float64
    terminated: np.ndarray  # [N] bool
    truncated: np.ndarray  # [N] bool
    episode_end: np.ndarray  # [N] bool: a real episode ended on this step
    episode_return: np.ndarray  # [N] float64, 0 where not episode_end
    episode_length: np.ndarray  # [N] int64, 0 where not episode_end

    @staticmethod
    def specs(
        obs_space: gym.Space, action_space: gym.Space, num_envs: int
    ) -> tuple[ArraySpec, ...]:
        if not isinstance(obs_space, gym.spaces.Box):
            raise TypeError(
                f"rapidrl vector envs need a Box observation space (one numpy array per env), "
                f"got {obs_space!r}"
            )
        if isinstance(action_space, gym.spaces.Discrete):
            act_shape, act_dtype = (), np.dtype(np.int64)
        elif isinstance(action_space, gym.spaces.Box):
            act_shape, act_dtype = tuple(action_space.shape), np.dtype(action_space.dtype)
        else:
            raise TypeError(f"unsupported action space {action_space!r} (Discrete or Box only)")
        n, obs_shape, obs_dtype = num_envs, tuple(obs_space.shape), np.dtype(obs_space.dtype).str
        return (
            ArraySpec("obs", (2, n, *obs_shape), obs_dtype),
            ArraySpec("final_obs", (n, *obs_shape), obs_dtype),
            ArraySpec("actions", (n, *act_shape), act_dtype.str),
            ArraySpec("rewards", (n,), "<f8"),
            ArraySpec("terminated", (n,), "|b1"),
            ArraySpec("truncated", (n,), "|b1"),
            ArraySpec("episode_end", (n,), "|b1"),
            ArraySpec("episode_return", (n,), "<f8"),
            ArraySpec("episode_length", (n,), "<i8"),
        )

    @classmethod
    def nbytes(cls, specs: tuple[ArraySpec, ...]) -> int:
        return block_layout(s.nbytes for s in specs)[1]

    @classmethod
    def allocate(cls, specs: tuple[ArraySpec, ...]) -> StepArrays:
        return cls(**{s.name: np.zeros(s.shape, s.dtype) for s in specs})

    @classmethod
    def from_buffer(cls, buf, specs: tuple[ArraySpec, ...]) -> StepArrays:
        """Views into ``buf`` (e.g. ``SharedMemory.buf``) laid out as :meth:`nbytes` sized it."""
        offsets, _ = block_layout(s.nbytes for s in specs)
        arrays = {
            s.name: np.ndarray(s.shape, dtype=s.dtype, buffer=buf, offset=off)
            for s, off in zip(specs, offsets)
        }
        return cls(**arrays)

    def rows(self, start: int, stop: int) -> StepArrays:
        """Views of envs ``start..stop-1`` (what one group/worker owns)."""
        out = {}
        for f in dataclasses.fields(self):
            a = getattr(self, f.name)
            out[f.name] = a[:, start:stop] if f.name == "obs" else a[start:stop]
        return StepArrays(**out)
