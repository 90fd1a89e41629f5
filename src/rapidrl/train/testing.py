"""Test helpers for checkpoints (used by the trainer tests; handy when checking a resume)."""

from __future__ import annotations

import math

import numpy as np
import torch


def assert_same(a, b, where: str = "state") -> None:
    """Recursive exact equality of checkpoint payload pieces (tensors, arrays, dicts, lists,
    NaN-aware floats); the assertion message names the path of the first difference."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert set(a) == set(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def rollout_ckpt_payload(path) -> dict:
    """A PPO / PQN checkpoint's deterministic content: the state minus its wall-clock parts (the
    clock, the accumulated ``*_s`` seconds), and the RNG states; compare two with
    :func:`assert_same`."""
    p = torch.load(path, weights_only=True)
    state = dict(p["state"])
    state.pop("clock")
    counters = dict(state["counters"])
    counters["acc"] = {k: v for k, v in counters["acc"].items() if not k.endswith("_s")}
    state["counters"] = counters
    return {"state": state, "rng": p["rng"]}
