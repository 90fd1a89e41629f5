"""PPO loss terms against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from rapidrl.algos.ppo.losses import (
    categorical_entropy,
    categorical_logprob,
    normalize_advantages,
    policy_loss,
    ppo_loss,
    value_loss,
)


def t(*xs):
    return torch.tensor(xs, dtype=torch.float64)


def test_policy_loss_clipping_by_hand():
    # ratios 1.5 (A>0: clipped to 1.2), 0.5 (A>0: unclipped is the max), 1.5 (A<0: unclipped),
    # 0.5 (A<0: clipped to 0.8)
    ratio = t(1.5, 0.5, 1.5, 0.5)
    adv = t(2.0, 1.0, -1.0, -3.0)
    old = t(0.1, -0.2, 0.3, -0.4)
    loss, logratio = policy_loss(old + ratio.log(), old, adv, clip_coef=0.2)
    per_elem = [-2.0 * 1.2, -1.0 * 0.5, 1.0 * 1.5, 3.0 * 0.8]
    assert loss.item() == pytest.approx(sum(per_elem) / 4)
    torch.testing.assert_close(logratio, ratio.log())


def test_value_loss_by_hand():
    v = t(1.0, 3.0)
    ret = t(2.0, 0.0)
    old = t(1.5, 2.0)
    assert value_loss(v, ret).item() == pytest.approx(0.5 * (1.0 + 9.0) / 2)
    # clipped values: 1.5 + clip(-0.5, +-0.2) = 1.3 -> (1.3-2)^2 = 0.49 < 1;
    #                 2.0 + clip(1.0) = 2.2 -> 4.84 < 9: the max keeps the unclipped terms
    assert value_loss(v, ret, old, 0.2).item() == pytest.approx(0.5 * (1.0 + 9.0) / 2)
    ret2 = t(0.0, 4.0)
    # unclipped (1, 1); clipped (1.3^2 = 1.69, 1.8^2 = 3.24): the max takes the clipped ones
    assert value_loss(v, ret2, old, 0.2).item() == pytest.approx(0.5 * (1.69 + 3.24) / 2)
    with pytest.raises(ValueError):
        value_loss(v, ret, None, 0.2)


def test_categorical_terms_match_torch_distributions():
    torch.manual_seed(0)
    logits = torch.randn(5, 3, 6, dtype=torch.float64)
    actions = torch.randint(0, 6, (5, 3))
    dist = torch.distributions.Categorical(logits=logits)
    torch.testing.assert_close(categorical_logprob(logits, actions), dist.log_prob(actions))
    torch.testing.assert_close(categorical_entropy(logits), dist.entropy())
    uniform = torch.zeros(4, dtype=torch.float64)
    assert categorical_entropy(uniform).item() == pytest.approx(math.log(4))


def test_normalize_advantages():
    a = t(1.0, 2.0, 3.0, 6.0)
    n = normalize_advantages(a)
    assert n.mean().item() == pytest.approx(0.0, abs=1e-12)
    assert n.std().item() == pytest.approx(1.0, abs=1e-6)
    expected = (a - 3.0) / (a.std() + 1e-8)
    torch.testing.assert_close(n, expected)
    assert normalize_advantages(t(5.0)).item() == 0.0  # no NaN for a single element


def test_ppo_loss_total_and_diagnostics_by_hand():
    ratio = t(1.5, 0.5, 1.0, 1.05)
    old_lp = t(-1.0, -2.0, -0.5, -1.5)
    new_lp = (old_lp + ratio.log()).requires_grad_()
    adv = t(1.0, -1.0, 2.0, 0.5)
    new_v = t(1.0, 2.0, 0.0, 1.0).requires_grad_()
    old_v = t(1.0, 1.0, 1.0, 1.0)
    ret = t(2.0, 2.0, 2.0, 2.0)
    ent = t(1.0, 1.2, 0.8, 1.0)
    out = ppo_loss(
        new_lp, old_lp, adv, new_v, old_v, ret, ent,
        clip_coef=0.2, vf_coef=0.5, ent_coef=0.01, clip_vloss=False, norm_adv=False,
    )  # fmt: skip
    # per element max(-A r, -A clip(r)): -1.2 (clipped), 0.8 (A<0, r clipped up), -2, -0.525
    pg = (-1.0 * 1.2 + 1.0 * 0.8 - 2.0 * 1.0 - 0.5 * 1.05) / 4
    vl = 0.5 * (1.0 + 0.0 + 4.0 + 1.0) / 4
    assert out["policy_loss"].item() == pytest.approx(pg)
    assert out["value_loss"].item() == pytest.approx(vl)
    assert out["entropy"].item() == pytest.approx(1.0)
    assert out["loss"].item() == pytest.approx(pg - 0.01 * 1.0 + 0.5 * vl)
    lr = ratio.log()
    assert out["approx_kl"].item() == pytest.approx(((ratio - 1) - lr).mean().item())
    assert out["old_approx_kl"].item() == pytest.approx((-lr).mean().item())
    assert out["clipfrac"].item() == pytest.approx(0.5)  # 1.5 and 0.5 are outside [0.8, 1.2]
    for k in ("approx_kl", "old_approx_kl", "clipfrac"):
        assert not out[k].requires_grad
    out["loss"].backward()
    assert new_lp.grad is not None and new_v.grad is not None
    # the clipped element (ratio 1.5, A > 0) passes no policy gradient
    assert new_lp.grad[0].item() == 0.0


def test_ppo_loss_defaults_clip_value_and_normalize():
    torch.manual_seed(1)
    n = 32
    old_lp, new_lp = torch.randn(n), torch.randn(n)
    adv, ret, ent = torch.randn(n) * 3 + 1, torch.randn(n), torch.rand(n)
    old_v, new_v = torch.randn(n), torch.randn(n)
    out = ppo_loss(new_lp, old_lp, adv, new_v, old_v, ret, ent, clip_coef=0.1)
    pg, _ = policy_loss(new_lp, old_lp, normalize_advantages(adv), 0.1)
    vl = value_loss(new_v, ret, old_v, 0.1)
    torch.testing.assert_close(out["policy_loss"], pg)
    torch.testing.assert_close(out["value_loss"], vl)
    out2 = ppo_loss(new_lp, old_lp, adv, new_v, old_v, ret, ent, clip_coef=0.1, vf_clip_coef=10.0)
    torch.testing.assert_close(out2["value_loss"], value_loss(new_v, ret, old_v, 10.0))
