"""PQN's Q(lambda) targets: the pure function against a per-env, per-step reference in Python
floats, small hand-computed cases, and the rollout glue (next max-Q, time limits, the last step)."""

from __future__ import annotations

import pytest
import torch

from rapidrl.algos.pqn.learner import rollout_targets
from rapidrl.algos.pqn.returns import q_lambda_returns


def reference_returns(rewards, next_max_q, terminated, cut, gamma, lam):
    """The definition, per env and per step, in Python floats."""
    t_len, n_env = rewards.shape
    out = torch.zeros(t_len, n_env, dtype=torch.float64)
    for n in range(n_env):
        later = None
        for t in reversed(range(t_len)):
            q = float(next_max_q[t, n])
            trace = q if (bool(cut[t, n]) or t == t_len - 1) else later
            boot = 0.0 if bool(terminated[t, n]) else (1.0 - lam) * q + lam * trace
            later = float(rewards[t, n]) + gamma * boot
            out[t, n] = later
    return out


def random_rollout(t_len, n_env, seed):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(t_len, n_env, generator=g)
    next_max_q = torch.randn(t_len, n_env, generator=g) * 3
    terminated = torch.rand(t_len, n_env, generator=g) < 0.15
    truncated = (torch.rand(t_len, n_env, generator=g) < 0.15) & ~terminated
    both = torch.rand(t_len, n_env, generator=g) < 0.03  # a true end on a time-limit step
    return rewards, next_max_q, terminated | both, truncated | both


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gamma, lam", [(0.99, 0.65), (0.9, 0.0), (0.97, 1.0), (1.0, 0.5)])
def test_matches_the_reference_loop(seed, gamma, lam):
    rewards, next_max_q, terminated, truncated = random_rollout(13, 6, seed)
    cut = truncated.clone()
    cut[-1] = True
    got = q_lambda_returns(rewards, next_max_q, terminated, cut, gamma, lam)
    want = reference_returns(rewards, next_max_q, terminated, cut, gamma, lam)
    assert got.dtype == next_max_q.dtype and got.shape == (13, 6)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    # 0/1 floats for the flags give the same result as bools.
    same = q_lambda_returns(rewards, next_max_q, terminated.float(), cut.float(), gamma, lam)
    torch.testing.assert_close(same, got)


def test_lambda_zero_gives_one_step_targets():
    rewards, next_max_q, terminated, truncated = random_rollout(9, 4, 5)
    got = q_lambda_returns(rewards, next_max_q, terminated, truncated, 0.9, 0.0)
    want = rewards + 0.9 * (~terminated).float() * next_max_q
    torch.testing.assert_close(got, want)


def test_hand_computed_small_cases():
    r = torch.tensor([[1.0], [2.0], [3.0]])
    q = torch.tensor([[10.0], [20.0], [30.0]])
    no = torch.zeros(3, 1, dtype=torch.bool)
    g = 0.5
    # lam = 1: Monte-Carlo returns bootstrapped only at the end: 1 + .5 * 2 + .25 * 3 + .125 * 30.
    got = q_lambda_returns(r, q, no, no, g, 1.0)
    assert got[:, 0].tolist() == [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 30, 2 + 0.5 * 3 + 0.25 * 30, 18]
    # lam = 1 with a cut at t = 1 (a time limit): the return bootstraps from q[1] there.
    cut = torch.tensor([[False], [True], [False]])
    got = q_lambda_returns(r, q, no, cut, g, 1.0)
    assert got[:, 0].tolist() == [1 + 0.5 * (2 + 0.5 * 20), 2 + 0.5 * 20, 3 + 0.5 * 30]
    # terminated at t = 1: no bootstrap there, and nothing from after it reaches t = 0 or 1.
    term = torch.tensor([[False], [True], [False]])
    got = q_lambda_returns(r, q, term, no, g, 1.0)
    assert got[:, 0].tolist() == [1 + 0.5 * 2, 2.0, 3 + 0.5 * 30]
    # lam = 0.5 by hand: G2 = 3 + .5 * 30 = 18; G1 = 2 + .5 * (.5 * 20 + .5 * 18) = 11.5;
    # G0 = 1 + .5 * (.5 * 10 + .5 * 11.5) = 6.375.
    got = q_lambda_returns(r, q, no, no, g, 0.5)
    assert got[:, 0].tolist() == [6.375, 11.5, 18.0]
    # A true end on the last step: no bootstrap, even though it is also the trace's end.
    got = q_lambda_returns(r, q, torch.tensor([[False], [False], [True]]), no, g, 0.5)
    assert float(got[2, 0]) == 3.0


def test_shape_errors_name_the_argument():
    x = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="rewards has shape"):
        q_lambda_returns(torch.zeros(3, 2), x, x.bool(), x.bool(), 0.9, 0.5)
    with pytest.raises(ValueError, match="scalars"):
        s = torch.tensor(1.0)
        q_lambda_returns(s, s, s.bool(), s.bool(), 0.9, 0.5)


def test_rollout_targets_bootstrap_like_the_definition():
    """The rollout glue: next max-Q from the next step's record, the held observation at the
    last step, final_obs where a time limit ended an episode; time limits and the last step cut
    the trace."""
    g = torch.Generator().manual_seed(3)
    t_len, n_env = 11, 5
    rewards, max_q, terminated, truncated = random_rollout(t_len, n_env, 4)
    trunc_max_q = torch.randn(t_len, n_env, generator=g)
    boot = torch.randn(n_env, generator=g)
    got = rollout_targets(rewards, max_q, terminated, truncated, trunc_max_q, boot, 0.95, 0.7)
    want = torch.zeros(t_len, n_env, dtype=torch.float64)
    for n in range(n_env):
        later = 0.0
        for t in reversed(range(t_len)):
            if truncated[t, n]:
                q, cut = float(trunc_max_q[t, n]), True
            elif t == t_len - 1:
                q, cut = float(boot[n]), True
            else:
                q, cut = float(max_q[t + 1, n]), False
            trace = q if cut else later
            boot_v = 0.0 if terminated[t, n] else 0.3 * q + 0.7 * trace
            later = float(rewards[t, n]) + 0.95 * boot_v
            want[t, n] = later
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    assert not truncated[-1].all()  # the rollout's own last-step cut was exercised
