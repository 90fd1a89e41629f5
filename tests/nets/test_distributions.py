"""The policy distributions against torch.distributions on fixed inputs, and the continuous
actor-critic's sampling, log-probs and entropy."""

from __future__ import annotations

import torch
from torch.distributions import Categorical, Normal

from rapidrl.nets.actor_critic import ActorCritic
from rapidrl.nets.distributions import (
    categorical_entropy,
    categorical_logprob,
    gaussian_entropy,
    gaussian_logprob,
)


def test_gaussian_logprob_and_entropy_equal_torch_distributions():
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(5, 7, 3, generator=g, dtype=torch.float64)
    log_std = torch.tensor([-1.5, 0.0, 0.7], dtype=torch.float64)
    actions = mean + 3 * torch.randn(5, 7, 3, generator=g, dtype=torch.float64)
    ref = Normal(mean, log_std.exp())
    torch.testing.assert_close(
        gaussian_logprob(mean, log_std, actions), ref.log_prob(actions).sum(-1)
    )
    ent = gaussian_entropy(log_std, (5, 7))
    assert ent.shape == (5, 7)
    torch.testing.assert_close(ent, ref.entropy().sum(-1))


def test_categorical_helpers_equal_torch_distributions():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(4, 6, generator=g, dtype=torch.float64)
    actions = torch.tensor([0, 5, 2, 2])
    ref = Categorical(logits=logits)
    torch.testing.assert_close(categorical_logprob(logits, actions), ref.log_prob(actions))
    torch.testing.assert_close(categorical_entropy(logits), ref.entropy())


def test_continuous_actor_critic_samples_scores_and_learns_its_log_std():
    torch.manual_seed(0)
    net = ActorCritic((4,), 2, shared_torso=False, continuous=True)
    assert torch.equal(net.log_std.detach(), torch.zeros(2))  # std 1 at the start
    obs = torch.randn(4096, 4)
    with torch.no_grad():
        out = net.act(obs, generator=torch.Generator().manual_seed(3))
        again = net.act(obs, generator=torch.Generator().manual_seed(3))
        greedy = net.act(obs, deterministic=True)
    assert out.action.shape == (4096, 2) and out.action.dtype == torch.float32
    assert torch.equal(out.action, again.action)  # the generator decides the noise
    torch.testing.assert_close(greedy.action, out.logits)  # deterministic: the mean
    noise = out.action - out.logits
    assert abs(float(noise.std()) - 1.0) < 0.05 and abs(float(noise.mean())) < 0.05
    # The rollout's log-probs are the ones evaluate gives the same actions (the PPO ratio 1).
    ev = net.evaluate(obs, out.action)
    torch.testing.assert_close(ev.logprob, out.logprob)
    ref = Normal(out.logits, torch.ones(2))
    torch.testing.assert_close(ev.logprob, ref.log_prob(out.action).sum(-1))
    torch.testing.assert_close(ev.entropy, ref.entropy().sum(-1))
    # The log std is a parameter the loss reaches: higher entropy wanted -> it grows.
    (-ev.entropy.mean()).backward()
    assert net.log_std.grad is not None and bool((net.log_std.grad < 0).all())
