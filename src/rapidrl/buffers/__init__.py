"""Replay memories: frame-deduplicated uniform replay and proportional prioritized replay."""

from rapidrl.buffers.prioritized import MinTree, PrioritizedReplayBuffer, SumTree
from rapidrl.buffers.replay import ReplayBuffer, nstep_returns

__all__ = ["MinTree", "PrioritizedReplayBuffer", "ReplayBuffer", "SumTree", "nstep_returns"]
