"""Epsilon-greedy, written once: the draws of a seeded run do not depend on the network, a fully
random step costs no forward pass, and the torch form draws on the given generator."""

from __future__ import annotations

import numpy as np
import torch

from rapidrl.nets.exploration import epsilon_greedy, epsilon_greedy_torch


def reference(rng, eps, n_actions, greedy):
    """The loop the trainers used to write inline: coins, then random actions, then merge."""
    n = len(greedy)
    explore = rng.random(n) < eps
    random_actions = rng.integers(n_actions, size=n)
    return random_actions if explore.all() else np.where(explore, random_actions, greedy)


def test_numpy_form_equals_the_reference_draw_for_draw():
    greedy = np.array([3, 0, 1, 2, 3, 0, 1, 2])
    for eps in (0.0, 0.3, 0.9, 1.0):
        a, b = np.random.default_rng(7), np.random.default_rng(7)
        for _ in range(20):
            got = epsilon_greedy(a, eps, 4, len(greedy), lambda: greedy)
            np.testing.assert_array_equal(got, reference(b, eps, 4, greedy))
        assert a.random() == b.random()  # the streams stay in step


def test_fully_random_step_skips_the_network():
    calls = []
    out = epsilon_greedy(np.random.default_rng(0), 1.0, 6, 5, lambda: calls.append(1))
    assert calls == [] and out.shape == (5,) and out.max() < 6
    greedy = np.full(5, 2)
    assert (epsilon_greedy(np.random.default_rng(0), 0.0, 6, 5, lambda: greedy) == 2).all()


def test_torch_form_uses_its_generator_and_per_env_rates():
    greedy = torch.full((1000,), 3)
    gen = torch.Generator().manual_seed(1)
    out = epsilon_greedy_torch(greedy, 0.25, 4, gen)
    again = epsilon_greedy_torch(greedy, 0.25, 4, torch.Generator().manual_seed(1))
    assert torch.equal(out, again)
    assert 0.1 < (out != 3).float().mean() < 0.3  # 0.25 x 3/4 of the coins change the action
    rates = torch.tensor([0.0, 1.0]).repeat(500)
    mixed = epsilon_greedy_torch(greedy, rates, 4, gen)
    assert (mixed[rates == 0] == 3).all()
