"""GAE against a slow, obviously-correct per-element reference and hand-computed cases."""

from __future__ import annotations

import pytest
import torch

from rapidrl.algos.ppo.gae import gae


def reference_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Per element, the definition: A_t = sum_k (gamma*lam)^(k-t) delta_k until the episode ends."""
    num_steps, num_envs = rewards.shape
    adv = torch.zeros(num_steps, num_envs, dtype=torch.float64)
    for b in range(num_envs):
        for t in range(num_steps):
            total, weight = 0.0, 1.0
            for k in range(t, num_steps):
                bootstrap = 0.0 if terminated[k, b] else gamma * float(next_values[k, b])
                delta = float(rewards[k, b]) + bootstrap - float(values[k, b])
                total += weight * delta
                if terminated[k, b] or truncated[k, b]:
                    break  # the episode ended at step k: nothing after it belongs to it
                weight *= gamma * lam
            adv[t, b] = total
    return adv, adv + values.double()


def random_rollout(num_steps, num_envs, seed, p_term=0.15, p_trunc=0.1):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(num_steps, num_envs, generator=g, dtype=torch.float64)
    values = torch.randn(num_steps, num_envs, generator=g, dtype=torch.float64)
    next_values = torch.randn(num_steps, num_envs, generator=g, dtype=torch.float64)
    terminated = torch.rand(num_steps, num_envs, generator=g) < p_term
    truncated = (torch.rand(num_steps, num_envs, generator=g) < p_trunc) & ~terminated
    # the edges: ends at t = 0 and at t = T - 1, of both kinds, and both flags at once
    terminated[0, 0] = True
    truncated[0, 1] = True
    terminated[-1, 2] = True
    truncated[-1, 3] = True
    terminated[2, 4] = truncated[2, 4] = True
    return rewards, values, next_values, terminated, truncated


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 1.0), (0.97, 0.0)])
def test_matches_reference(seed, gamma, lam):
    data = random_rollout(11, 7, seed)
    adv, ret = gae(*data, gamma, lam)
    ref_adv, ref_ret = reference_gae(*data, gamma, lam)
    torch.testing.assert_close(adv, ref_adv, rtol=0, atol=1e-12)
    torch.testing.assert_close(ret, ref_ret, rtol=0, atol=1e-12)


def test_float32_and_float_flags():
    r, v, nv, term, trunc = random_rollout(16, 6, 3)
    adv32, ret32 = gae(r.float(), v.float(), nv.float(), term.float(), trunc.float(), 0.99, 0.95)
    ref_adv, ref_ret = reference_gae(r, v, nv, term, trunc, 0.99, 0.95)
    assert adv32.dtype == torch.float32
    torch.testing.assert_close(adv32.double(), ref_adv, rtol=0, atol=1e-5)
    torch.testing.assert_close(ret32.double(), ref_ret, rtol=0, atol=1e-5)


def test_hand_computed():
    # one env, 4 steps, gamma 0.5, lam 0.5: step 1 truncated (bootstrap from V(final_obs) = 8),
    # step 3 the rollout's end (bootstrap from next_values[3] = 4), no termination.
    r = torch.tensor([[1.0], [2.0], [3.0], [4.0]], dtype=torch.float64)
    v = torch.tensor([[1.0], [1.0], [2.0], [2.0]], dtype=torch.float64)
    nv = torch.tensor([[1.0], [8.0], [2.0], [4.0]], dtype=torch.float64)
    term = torch.zeros(4, 1, dtype=torch.bool)
    trunc = torch.tensor([[False], [True], [False], [False]])
    adv, ret = gae(r, v, nv, term, trunc, 0.5, 0.5)
    d = [1 + 0.5 * 1 - 1, 2 + 0.5 * 8 - 1, 3 + 0.5 * 2 - 2, 4 + 0.5 * 4 - 2]  # 0.5, 5, 2, 4
    a3 = d[3]
    a2 = d[2] + 0.25 * a3
    a1 = d[1]  # trace cut by the truncation
    a0 = d[0] + 0.25 * a1
    expected = torch.tensor([[a0], [a1], [a2], [a3]], dtype=torch.float64)
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + v)
    # the same step terminated instead: no bootstrap from the final observation
    adv_t, _ = gae(r, v, nv, trunc, term, 0.5, 0.5)
    assert adv_t[1, 0].item() == pytest.approx(2 - 1)


def test_bootstrap_only_where_not_terminated():
    r, v, nv, term, trunc = random_rollout(8, 5, 4)
    base, _ = gae(r, v, nv, term, trunc, 0.99, 0.95)
    nv2 = nv.clone()
    nv2[term] += 100.0  # ignored: terminated steps do not bootstrap
    same, _ = gae(r, v, nv2, term, trunc, 0.99, 0.95)
    torch.testing.assert_close(same, base, rtol=0, atol=0)
    nv3 = nv.clone()
    nv3[trunc & ~term] += 100.0  # used: truncated steps bootstrap from V(final_obs)
    moved, _ = gae(r, v, nv3, term, trunc, 0.99, 0.95)
    assert not torch.equal(moved, base)


def test_lambda_one_is_discounted_return_with_bootstrap():
    torch.manual_seed(0)
    r = torch.randn(6, 3, dtype=torch.float64)
    v = torch.randn(6, 3, dtype=torch.float64)
    nv = torch.cat([v[1:], torch.randn(1, 3, dtype=torch.float64)])  # no ends: V(s_{t+1})
    flags = torch.zeros(6, 3, dtype=torch.bool)
    _, ret = gae(r, v, nv, flags, flags, 0.9, 1.0)
    expected = nv[-1].clone()
    for t in range(5, -1, -1):
        expected = r[t] + 0.9 * expected
        torch.testing.assert_close(ret[t], expected)


def test_shape_mismatch_raises():
    x = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="next_values"):
        gae(x, x, torch.zeros(4, 3), x.bool(), x.bool(), 0.99, 0.95)
