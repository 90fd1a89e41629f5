"""Pieces both Atari implementations share, so that they cannot drift apart."""

from __future__ import annotations

import ale_py
import numpy as np
from gymnasium.utils import seeding

# ale_py.Action value -> name ("NOOP", "FIRE", ...), as ale_py's AtariEnv.get_action_meanings.
_ACTION_NAMES = {action: name for name, action in ale_py.Action.__members__.items()}


def seed_ale(ale: ale_py.ALEInterface, seed: int | None) -> np.random.Generator:
    """Seed ALE and build the env's ``np_random`` exactly as ``ale_py.env.AtariEnv.seed_game``.

    One ``SeedSequence`` gives two words: one seeds the numpy generator (used by NoopReset to
    draw the number of no-ops), the other ALE's own RNG (sticky actions, ROM randomness). The
    ROM must be (re)loaded afterwards for ALE to pick the seed up. Copying this recipe is what
    makes the lean env match the ``gym.make("ALE/...")``-based chain for the same seed.
    """
    ss = np.random.SeedSequence(seed)
    np_seed, ale_seed = ss.generate_state(n_words=2)
    np_random, _ = seeding.np_random(int(np_seed))
    ale.setInt("random_seed", np.int32(ale_seed))
    return np_random


def action_meanings(action_set: list[ale_py.Action]) -> list[str]:
    """Names of the actions of an action set, agent action index order."""
    return [_ACTION_NAMES[action] for action in action_set]


def fire_reset_actions(meanings: list[str]) -> tuple[int, ...]:
    """Agent actions FireReset presses after a reset: FIRE, then action 2 (as baselines).

    Games without FIRE (e.g. Freeway) get none: FireReset is then a no-op. Some games need the
    second press to leave their start screen; baselines used action 2 for it, so do we.
    """
    if "FIRE" not in meanings:
        return ()
    fire = meanings.index("FIRE")
    return (fire, 2) if len(meanings) >= 3 else (fire,)


def check_noop(meanings: list[str]) -> None:
    """NoopReset and the life-loss reset step use action 0; it must be NOOP."""
    if meanings[0] != "NOOP":
        raise ValueError(
            f"action 0 of this game is {meanings[0]}, not NOOP; "
            "set noop_max=0 and episodic_life=False"
        )
