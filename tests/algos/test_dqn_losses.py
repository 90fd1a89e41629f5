"""DQN losses against slow reference loops: n-step targets at episode ends, double DQN, C51."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rapidrl.algos.dqn.losses import (
    categorical_loss,
    categorical_projection,
    categorical_target,
    td_loss,
    td_target,
)
from rapidrl.buffers import ReplayBuffer

# --- n-step targets through the replay buffer ------------------------------------------------


def q_table(obs):
    """A fixed 'target network' on the scalar obs of the stream below: Q(s, a) = s * (a + 1)."""
    s = torch.as_tensor(obs[:, 0], dtype=torch.float64)
    return torch.stack([s, 2 * s], dim=1)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_nstep_target_at_terminated_and_truncated_ends(n):
    gamma = 0.9
    # One stream, three episodes: ends by termination, by truncation, then still running.
    episodes = [(5, "terminated"), (4, "truncated"), (6, None)]
    buf = ReplayBuffer(100, (1,), 1, obs_dtype=np.float32, n_step=n, gamma=gamma)
    steps = []  # (obs, reward, terminated, truncated, next_obs)
    s = 1.0
    for length, end in episodes:
        for i in range(length):
            last = i == length - 1
            te, tr = last and end == "terminated", last and end == "truncated"
            steps.append((s, 0.5 * len(steps) - 1.0, te, tr, s + 1.0))
            buf.add([[s]], [len(steps) - 1], [steps[-1][1]], [te], [tr], [[s + 1.0]])
            s += 1.0
        s += 100.0  # next episode starts elsewhere; final obs above is s_last + 1
    idx = np.arange(buf.num_sampleable)
    batch = buf.get(idx)
    target = td_target(
        torch.as_tensor(batch["rewards"], dtype=torch.float64),
        torch.as_tensor(batch["discounts"], dtype=torch.float64),
        q_table(batch["next_obs"]),
    )
    for row, j in enumerate(batch["actions"]):
        ref = 0.0
        for i in range(n):  # slow reference
            obs, r, te, tr, nxt = steps[j + i]
            ref += gamma**i * r
            if te:
                break
            if tr or i == n - 1:
                ref += gamma ** (i + 1) * 2 * nxt  # max_a Q(nxt, a) = 2 * nxt (nxt > 0)
                break
        assert target[row].item() == pytest.approx(ref, rel=1e-5)


def test_double_dqn_target_against_loop():
    g = torch.Generator().manual_seed(0)
    b, a = 64, 5
    rewards = torch.randn(b, generator=g)
    discounts = torch.rand(b, generator=g) * (torch.rand(b, generator=g) > 0.2)
    q_t = torch.randn(b, a, generator=g)
    q_o = torch.randn(b, a, generator=g)
    plain = td_target(rewards, discounts, q_t)
    double = td_target(rewards, discounts, q_t, q_o)
    for i in range(b):
        best_t = max(range(a), key=lambda k: q_t[i, k].item())
        best_o = max(range(a), key=lambda k: q_o[i, k].item())
        r, d = rewards[i].item(), discounts[i].item()
        assert plain[i].item() == pytest.approx(r + d * q_t[i, best_t].item(), abs=1e-6)
        assert double[i].item() == pytest.approx(r + d * q_t[i, best_o].item(), abs=1e-6)
    assert not double.requires_grad


def test_td_loss_huber_mse_and_weights():
    q = torch.tensor([0.0, 1.0, -3.0, 2.0], requires_grad=True)
    target = torch.tensor([0.5, 3.0, -3.0, -1.0])
    w = torch.tensor([1.0, 0.5, 2.0, 0.25])
    loss, td = td_loss(q, target, w)
    td_ref = [0.5, 2.0, 0.0, -3.0]
    huber = [0.5 * x * x if abs(x) <= 1 else abs(x) - 0.5 for x in td_ref]
    assert loss.item() == pytest.approx(sum(wi * h for wi, h in zip(w.tolist(), huber)) / 4)
    torch.testing.assert_close(td, torch.tensor(td_ref))
    assert not td.requires_grad
    loss.backward()
    assert q.grad is not None
    mse, _ = td_loss(q, target, kind="mse")
    assert mse.item() == pytest.approx(sum(0.5 * x * x for x in td_ref) / 4)
    big, _ = td_loss(q, target, kind="huber", delta=2.0)
    ref2 = [0.5 * x * x if abs(x) <= 2 else 2 * (abs(x) - 1.0) for x in td_ref]
    assert big.item() == pytest.approx(sum(ref2) / 4)
    with pytest.raises(ValueError):
        td_loss(q, target, kind="l1")


# --- C51 -------------------------------------------------------------------------------------


def projection_reference(probs, rewards, discounts, support):
    """Bellemare et al. (2017), Algorithm 1, one sample and one atom at a time, in float64."""
    b, k = probs.shape
    v_min, v_max = support[0], support[-1]
    dz = (v_max - v_min) / (k - 1)
    out = np.zeros((b, k))
    for i in range(b):
        for j in range(k):
            tz = min(max(rewards[i] + discounts[i] * support[j], v_min), v_max)
            pos = (tz - v_min) / dz
            lo, hi = math.floor(pos), math.ceil(pos)
            if lo == hi:
                out[i, lo] += probs[i, j]
            else:
                out[i, lo] += probs[i, j] * (hi - pos)
                out[i, hi] += probs[i, j] * (pos - lo)
    return out


def test_projection_random_against_loop():
    rng = np.random.default_rng(0)
    b, k = 40, 51
    support = np.linspace(-10, 10, k)
    probs = rng.dirichlet(np.ones(k), b)
    rewards = rng.normal(0, 4, b)
    discounts = rng.choice([0.0, 0.99, 0.99**3, 1.0], b)
    ref = projection_reference(probs, rewards, discounts, support)
    for dtype, atol in ((torch.float64, 1e-12), (torch.float32, 2e-5)):  # float32: b ~ 1e-6 off
        got = categorical_projection(
            *(torch.tensor(x, dtype=dtype) for x in (probs, rewards, discounts, support))
        )
        assert got.dtype == dtype
        np.testing.assert_allclose(got.numpy(), ref, atol=atol)
    np.testing.assert_allclose(got.sum(1).numpy(), 1.0, atol=1e-5)


def test_projection_exact_atoms_and_clipping():
    support = np.linspace(-5.0, 5.0, 11)  # dz = 1: integer shifts land exactly on atoms
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(11), 6)
    rewards = np.array([0.0, 2.0, -3.0, 1.0, 100.0, -100.0])
    discounts = np.array([1.0, 1.0, 1.0, 0.0, 0.99, 1.0])
    got = categorical_projection(
        *(torch.tensor(x, dtype=torch.float64) for x in (probs, rewards, discounts, support))
    )
    ref = projection_reference(probs, rewards, discounts, support)
    np.testing.assert_allclose(got.numpy(), ref, atol=1e-12)
    np.testing.assert_allclose(got[0].numpy(), probs[0], atol=1e-12)  # identity
    np.testing.assert_allclose(got[1, 2:-1].numpy(), probs[1, :-3], atol=1e-12)  # shift by 2
    assert got[1, -1].item() == pytest.approx(probs[1, -3:].sum())  # clipped at v_max
    assert got[2, 0].item() == pytest.approx(probs[2, :4].sum())  # clipped at v_min
    assert got[3, 6].item() == pytest.approx(1.0)  # discount 0: all mass on r = 1
    assert got[4, -1].item() == pytest.approx(1.0)  # everything above v_max
    assert got[5, 0].item() == pytest.approx(1.0)  # everything below v_min
    # Half-way between atoms: split evenly.
    half = categorical_projection(
        torch.tensor(np.eye(11)[[5]]),
        torch.tensor([0.5]),
        torch.tensor([1.0]),
        torch.tensor(support),
    )
    np.testing.assert_allclose(half[0, 5:7].numpy(), [0.5, 0.5])


def test_categorical_target_double_and_plain():
    g = torch.Generator().manual_seed(2)
    b, a, k = 8, 3, 21
    support = torch.linspace(-2, 2, k)
    logp = torch.log_softmax(torch.randn(b, a, k, generator=g), -1)
    rewards = torch.randn(b, generator=g)
    discounts = torch.full((b,), 0.9)
    q_online = torch.randn(b, a, generator=g)
    plain = categorical_target(logp, rewards, discounts, support)
    double = categorical_target(logp, rewards, discounts, support, next_q_online=q_online)
    q_target = (logp.exp() * support).sum(-1)
    for i in range(b):
        for got, chooser in ((plain, q_target), (double, q_online)):
            a_star = int(chooser[i].argmax())
            ref = projection_reference(
                logp[i, a_star].exp()[None].double().numpy(),
                rewards[i : i + 1].double().numpy(),
                discounts[i : i + 1].double().numpy(),
                support.double().numpy(),
            )
            np.testing.assert_allclose(got[i].numpy(), ref[0], atol=1e-5)


def test_categorical_loss_cross_entropy_and_weights():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(4, 7, generator=g, requires_grad=True)
    logp = torch.log_softmax(logits, -1)
    m = torch.softmax(torch.randn(4, 7, generator=g), -1)
    w = torch.tensor([1.0, 0.5, 0.0, 2.0])
    loss, ce = categorical_loss(logp, m, w)
    ref = [-(m[i] * logp[i]).sum().item() for i in range(4)]
    torch.testing.assert_close(ce, torch.tensor(ref))
    assert loss.item() == pytest.approx(sum(wi * c for wi, c in zip(w.tolist(), ref)) / 4, rel=1e-6)
    loss.backward()
    assert logits.grad is not None and not ce.requires_grad
