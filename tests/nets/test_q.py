"""QNetwork heads (plain, dueling, noisy, C51) and NoisyLinear."""

from __future__ import annotations

import itertools

import pytest
import torch

from rapidrl.nets.q import NoisyLinear, QNetwork

FLAGS = list(itertools.product([False, True], repeat=3))


@pytest.mark.parametrize("dueling,noisy,distributional", FLAGS)
def test_every_combination_shapes_and_gradients(dueling, noisy, distributional):
    torch.manual_seed(0)
    net = QNetwork(
        (6,),
        3,
        dueling=dueling,
        noisy=noisy,
        distributional=distributional,
        num_atoms=11,
        head_hidden=8,
    )
    obs = torch.randn(5, 6)
    q = net(obs)
    assert q.shape == (5, 3)
    if distributional:
        q2, logp = net.forward_dist(obs)
        assert logp.shape == (5, 3, 11)
        torch.testing.assert_close(logp.logsumexp(-1), torch.zeros(5, 3), atol=1e-5, rtol=0)
        torch.testing.assert_close(q2, (logp.exp() * net.support).sum(-1))
        torch.testing.assert_close(q, q2)
        logp[:, 0].sum().backward()
    else:
        with pytest.raises(RuntimeError):
            net.forward_dist(obs)
        q.sum().backward()
    for name, p in net.named_parameters():
        assert p.grad is not None, name
    if noisy:
        assert any(isinstance(m, NoisyLinear) for m in net.modules())
        heads = [m for s in (net.advantage, net.value) if s is not None for m in s.modules()]
        assert not any(type(m) is torch.nn.Linear for m in heads)


def test_dueling_combines_value_and_mean_centred_advantage():
    torch.manual_seed(1)
    net = QNetwork((4,), 5, dueling=True)
    obs = torch.randn(3, 4)
    h = net.torso(obs)
    adv, val = net.advantage(h), net.value(h)
    torch.testing.assert_close(net(obs), val + adv - adv.mean(1, keepdim=True))


def test_dueling_distributional_combines_per_atom_logits():
    torch.manual_seed(2)
    net = QNetwork((4,), 3, dueling=True, distributional=True, num_atoms=7, v_min=-1, v_max=2)
    obs = torch.randn(2, 4)
    h = net.torso(obs)
    adv = net.advantage(h).view(2, 3, 7)
    val = net.value(h).view(2, 1, 7)
    logits = val + adv - adv.mean(1, keepdim=True)
    _, logp = net.forward_dist(obs)
    torch.testing.assert_close(logp, torch.log_softmax(logits, -1))
    torch.testing.assert_close(net.support, torch.linspace(-1, 2, 7))


def test_noisy_linear_factorized_noise_and_modes():
    torch.manual_seed(3)
    layer = NoisyLinear(5, 4, sigma0=0.5)
    assert torch.allclose(layer.weight_sigma, torch.full((4, 5), 0.5 / 5**0.5))
    x = torch.randn(2, 5)
    g = torch.Generator().manual_seed(7)
    layer.reset_noise(g)
    g = torch.Generator().manual_seed(7)
    e_in = torch.randn(5, generator=g)
    e_out = torch.randn(4, generator=g)

    def f(v):
        return v.sign() * v.abs().sqrt()

    w = layer.weight_mu + layer.weight_sigma * torch.outer(f(e_out), f(e_in))
    b = layer.bias_mu + layer.bias_sigma * f(e_out)
    torch.testing.assert_close(layer(x), x @ w.T + b)
    y1 = layer(x)
    torch.testing.assert_close(layer(x), y1)  # fixed until reset_noise
    layer.reset_noise()
    assert not torch.allclose(layer(x), y1)
    layer.eval()
    torch.testing.assert_close(layer(x), x @ layer.weight_mu.T + layer.bias_mu)


def test_reset_noise_changes_network_output():
    torch.manual_seed(4)
    net = QNetwork((4,), 2, noisy=True, dueling=True)
    obs = torch.randn(3, 4)
    q1 = net(obs)
    net.reset_noise()
    assert not torch.allclose(net(obs), q1)
    net.eval()
    q_eval = net(obs)
    net.reset_noise()
    torch.testing.assert_close(net(obs), q_eval)


@pytest.mark.parametrize("distributional", [False, True])
def test_image_obs_uint8_and_channels_last_match(distributional):
    torch.manual_seed(5)
    kw = dict(dueling=True, distributional=distributional, num_atoms=5)
    net = QNetwork((4, 84, 84), 6, **kw)
    net_cl = QNetwork((4, 84, 84), 6, channels_last=True, **kw)
    net_cl.load_state_dict(net.state_dict())
    conv = net_cl.torso.net[0].weight
    assert conv.is_contiguous(memory_format=torch.channels_last)
    obs = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    q, q_cl = net(obs), net_cl(obs)
    assert q.shape == (2, 6)
    torch.testing.assert_close(q_cl, q, atol=1e-4, rtol=1e-4)


def test_bad_arguments():
    with pytest.raises(ValueError):
        QNetwork((4,), 2, distributional=True, v_min=1, v_max=1)


def test_narrow_torso_widths_and_features():
    """torso_channels / torso_dim build the nature torso narrower (the layer shapes say so); the
    defaults build exactly the Nature network (same parameter shapes as before the fields)."""
    narrow = QNetwork((2, 52, 52), 6, dueling=True, torso_channels=(16, 32, 32), torso_dim=256)
    convs = [m for m in narrow.torso.net if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in convs] == [16, 32, 32]
    assert narrow.torso.out_dim == 256
    # 52 -> 12 -> 5 -> 3: the linear layer flattens 32 x 3 x 3
    assert narrow.torso.net[-2].weight.shape == (256, 32 * 3 * 3)
    q = narrow(torch.randint(0, 256, (3, 2, 52, 52), dtype=torch.uint8))
    assert q.shape == (3, 6)
    default = QNetwork((4, 84, 84), 6)
    shapes = {k: tuple(v.shape) for k, v in default.state_dict().items()}
    assert shapes["torso.net.0.weight"] == (32, 4, 8, 8)
    assert shapes["torso.net.7.weight"] == (512, 64 * 7 * 7)


def test_obs_norm_normalizes_each_pixel_by_the_running_statistics():
    """With obs_norm a uint8 stack enters the torso as (x - mean) / sqrt(var + eps), clamped to
    +-5 (not x / 255): the same network without it, given that tensor, gives the same Q-values.
    The statistics are buffers (state_dict: checkpoints, target syncs, actor weights)."""
    from rapidrl.nets.normalize import OBS_CLIP

    torch.manual_seed(0)
    normed = QNetwork((2, 52, 52), 4, dueling=True, obs_norm=True, channels_last=True)
    plain = QNetwork((2, 52, 52), 4, dueling=True, channels_last=True)
    missing, unexpected = plain.load_state_dict(normed.state_dict(), strict=False)
    assert not missing and sorted(unexpected) == ["obs_rms.count", "obs_rms.mean", "obs_rms.var"]
    batch = torch.randint(0, 256, (64, 2, 52, 52), dtype=torch.uint8)
    batch[:, :, :10] = 87  # a constant background: variance 0 there
    normed.obs_rms.update(batch)
    rms = normed.obs_rms
    obs = torch.randint(0, 256, (5, 2, 52, 52), dtype=torch.uint8)
    x = (obs.double() - rms.mean) / (rms.var + rms.eps).sqrt()
    x = x.float().clamp(-OBS_CLIP, OBS_CLIP)
    torch.testing.assert_close(normed(obs), plain(x), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(normed(obs), plain(obs))  # plain scales by 1/255 instead
    # prepare() (a batch converted once) gives the same input as forward's own path
    torch.testing.assert_close(normed(normed.prepare(obs)), normed(obs))
    assert "obs_rms.mean" in normed.state_dict()
    with pytest.raises(ValueError, match="obs_norm is for image observations"):
        QNetwork((4,), 2, obs_norm=True)
