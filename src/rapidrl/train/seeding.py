"""Seeding and random-number-generator state capture, for reproducible runs and exact resume.

``get_rng_states`` returns plain Python types and torch tensors only, so a checkpoint holding it
loads with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["get_rng_states", "seed_everything", "seed_of", "set_rng_states"]


def seed_everything(seed: int, *, deterministic: bool = False) -> np.random.Generator:
    """Seed Python ``random``, NumPy's global RNG and torch (CPU and every CUDA device).

    Returns a fresh ``np.random.Generator`` seeded with ``seed``: hand it to the code that needs
    NumPy randomness (replay sampling, epsilon-greedy) instead of using the global RNG.
    ``deterministic=True`` also asks torch for deterministic kernels (slower; errors on ops that
    have none).
    """
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    if deterministic:
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
    return np.random.default_rng(seed)


def seed_of(*keys: int) -> int:
    """A 32-bit seed derived from ``keys`` (e.g. ``seed_of(cfg.seed, 1)`` for the explorer's
    generator, ``seed_of(cfg.seed, 2)`` for the minibatch shuffler): independent streams from
    one run seed."""
    return int(np.random.SeedSequence(list(keys)).generate_state(1)[0])


def _generators(np_rng: np.random.Generator | Mapping[str, np.random.Generator] | None):
    if np_rng is None:
        return {}
    if isinstance(np_rng, np.random.Generator):
        return {"default": np_rng}
    return dict(np_rng)


def get_rng_states(
    np_rng: np.random.Generator | Mapping[str, np.random.Generator] | None = None,
) -> dict[str, Any]:
    """Capture the state of every RNG: Python, NumPy global, torch CPU (+CUDA), and ``np_rng``.

    ``np_rng`` is one ``np.random.Generator`` or a name -> Generator mapping (e.g. the replay
    sampler's and the explorer's). Pass the same generators to ``set_rng_states``.
    """
    _, key, pos, has_gauss, cached = np.random.get_state(legacy=True)
    states: dict[str, Any] = {
        "python": random.getstate(),
        # The raw MT19937 array as a list of ints: numpy arrays are not weights_only-loadable.
        "numpy_global": {
            "key": [int(k) for k in key],
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch_cpu": torch.get_rng_state(),
        "numpy_generators": {
            name: g.bit_generator.state for name, g in _generators(np_rng).items()
        },
    }
    if torch.cuda.is_available():
        states["torch_cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(
    states: Mapping[str, Any],
    np_rng: np.random.Generator | Mapping[str, np.random.Generator] | None = None,
) -> None:
    """Restore RNG states captured by ``get_rng_states``; ``np_rng`` are set in place.

    A generator passed here but absent from ``states`` raises ``KeyError``; CUDA states are
    restored only where the device count matches (else skipped: a CPU resume of a GPU run).
    """
    py = states["python"]
    # Python's state is a tuple with a tuple inside; JSON or torch round trips may give lists.
    random.setstate((py[0], tuple(py[1]), py[2]))
    g = states["numpy_global"]
    np.random.set_state(
        (
            "MT19937",
            np.asarray(g["key"], dtype=np.uint32),
            g["pos"],
            g["has_gauss"],
            g["cached_gaussian"],
        )
    )
    torch.set_rng_state(states["torch_cpu"])
    cuda = states.get("torch_cuda")
    if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)
    saved = states.get("numpy_generators", {})
    for name, gen in _generators(np_rng).items():
        if name not in saved:
            raise KeyError(
                f"no saved state for numpy generator {name!r}; saved: {sorted(saved) or 'none'}"
            )
        gen.bit_generator.state = saved[name]
