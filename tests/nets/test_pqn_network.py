"""The torsos' ``layer_norm`` option and PQN's Q-network: shapes at 84, 64 and 42 (small torso),
LayerNorm placement, and ``layer_norm=False`` leaves every existing network as it was."""

from __future__ import annotations

import dataclasses
import io

import pytest
import torch
from torch import nn

from rapidrl.algos.pqn.config import PRESETS
from rapidrl.algos.pqn.learner import make_pqn_network
from rapidrl.nets.q import QNetwork
from rapidrl.nets.torso import MLP, LayoutLayerNorm, NatureCNN, SmallCNN, make_torso

NATURE_PARAMS = [
    ("net.0.weight", (32, 4, 8, 8)),
    ("net.0.bias", (32,)),
    ("net.2.weight", (64, 32, 4, 4)),
    ("net.2.bias", (64,)),
    ("net.4.weight", (64, 64, 3, 3)),
    ("net.4.bias", (64,)),
    ("net.7.weight", (512, 3136)),
    ("net.7.bias", (512,)),
]


def _frames(n: int, size: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (n, 4, size, size), dtype=torch.uint8, generator=g)


def test_layer_norm_off_leaves_the_nature_cnn_unchanged():
    torch.manual_seed(0)
    net = NatureCNN()
    assert [(k, tuple(p.shape)) for k, p in net.named_parameters()] == NATURE_PARAMS
    # The same modules, drawn from the generator in the same order, as the network was written
    # before the option: the weights are bit-identical for the same seed.
    torch.manual_seed(0)
    plain = nn.Sequential(
        nn.Conv2d(4, 32, 8, stride=4),
        nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(64 * 7 * 7, 512),
        nn.ReLU(),
    )
    assert [type(m) for m in net.net] == [type(m) for m in plain]
    for (k, a), (_, b) in zip(net.net.state_dict().items(), plain.state_dict().items()):
        assert torch.equal(a, b), k
    assert not any(isinstance(m, nn.LayerNorm) for m in net.modules())


def test_layer_norm_off_leaves_small_cnn_mlp_and_q_network_unchanged():
    for make in (
        lambda ln: SmallCNN(layer_norm=ln),
        lambda ln: MLP(4, layer_norm=ln),
        lambda ln: QNetwork((4, 84, 84), 6, layer_norm=ln),
        lambda ln: make_torso((4, 64, 64), kind="small", layer_norm=ln),
    ):
        torch.manual_seed(0)
        off = make(False)
        torch.manual_seed(0)
        default = make(False)
        keys = [k for k, _ in off.named_parameters()]
        assert not any(isinstance(m, nn.LayerNorm) for m in off.modules())
        for (_, a), (_, b) in zip(off.named_parameters(), default.named_parameters()):
            assert torch.equal(a, b)
        on = make(True)
        # The norm only adds parameters: every conv/linear of the plain network is still there.
        on_shapes = sorted(tuple(p.shape) for p in on.parameters())
        for k, p in off.named_parameters():
            assert tuple(p.shape) in on_shapes, k
        assert len(list(on.parameters())) > len(keys)
    # The DQN network built with no new argument has the Nature CNN's parameter names.
    q = QNetwork((4, 84, 84), 6)
    assert [(k, tuple(p.shape)) for k, p in q.torso.named_parameters()] == NATURE_PARAMS


def test_layer_norm_after_every_layer_before_the_activation():
    net = NatureCNN(layer_norm=True)
    kinds = [type(m).__name__ for m in net.net]
    assert kinds == [
        "Conv2d", "LayoutLayerNorm", "ReLU", "Conv2d", "LayoutLayerNorm", "ReLU", "Conv2d",
        "LayoutLayerNorm", "ReLU", "Flatten", "Linear", "LayerNorm", "ReLU",
    ]  # fmt: skip
    norms = [tuple(m.normalized_shape) for m in net.modules() if isinstance(m, nn.LayerNorm)]
    assert norms == [(32, 20, 20), (64, 9, 9), (64, 7, 7), (512,)]  # CleanRL's PQN network
    mlp = [type(m).__name__ for m in MLP(4, layer_norm=True).net]
    assert mlp == ["Linear", "LayerNorm", "Tanh", "Linear", "LayerNorm", "Tanh"]
    small = SmallCNN(layer_norm=True)
    norms = [tuple(m.normalized_shape) for m in small.modules() if isinstance(m, nn.LayerNorm)]
    assert norms == [(32, 21, 21), (32, 11, 11), (32, 6, 6), (32, 3, 3), (256,)]


@pytest.mark.parametrize(
    "size, torso, channels_last",
    [(84, "nature", False), (64, "nature", True), (42, "small", False), (42, "small", True)],
)
def test_pqn_network_shapes_and_gradients(size, torso, channels_last):
    cfg = dataclasses.replace(
        PRESETS["pqn"], obs_size=size, torso=torso, channels_last=channels_last
    )
    torch.manual_seed(0)
    net = make_pqn_network(cfg, (4, size, size), 6)
    assert sum(isinstance(m, nn.LayerNorm) for m in net.modules()) == (
        4 if torso == "nature" else 5
    )
    if channels_last:  # initialized, then left in the channels-last layout
        conv = next(m for m in net.modules() if isinstance(m, nn.Conv2d))
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    obs = _frames(5, size)
    q = net(obs)
    assert q.shape == (5, 6) and q.dtype == torch.float32 and torch.isfinite(q).all()
    q.gather(1, torch.zeros(5, 1, dtype=torch.long)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    # A rollout converted once (prepare) evaluates the same as the frames themselves.
    with torch.no_grad():
        assert torch.equal(net(net.prepare(obs)), net(obs))


def test_pqn_network_for_vector_observations():
    net = make_pqn_network(PRESETS["cartpole"], (4,), 2)
    assert isinstance(net.torso, MLP)
    assert sum(isinstance(m, nn.LayerNorm) for m in net.modules()) == 2
    assert net(torch.randn(3, 4)).shape == (3, 2)
    assert torch.equal(net.prepare(torch.ones(2, 4)), torch.ones(2, 4))


@pytest.mark.parametrize("channels_last", [False, True])
def test_bf16_precision_reaches_the_torso(channels_last):
    cfg = dataclasses.replace(
        PRESETS["pqn"], precision="bf16", obs_size=64, channels_last=channels_last
    )
    net = make_pqn_network(cfg, (4, 64, 64), 6)
    assert net.torso.compute_dtype is torch.bfloat16
    obs = _frames(2, 64)
    q = net(obs)
    assert q.dtype == torch.float32 and torch.isfinite(q).all()
    # close to the same network in float32 (bf16 keeps ~3 significant digits)
    net.torso.compute_dtype = None
    torch.testing.assert_close(q, net(obs), rtol=0.05, atol=0.05)


def test_layout_layer_norm_equals_layer_norm_and_keeps_channels_last():
    g = torch.Generator().manual_seed(0)
    ref = nn.LayerNorm([8, 5, 6])
    with torch.no_grad():  # a non-trivial affine, so a wrong weight permutation shows
        ref.weight.copy_(torch.randn(8, 5, 6, generator=g))
        ref.bias.copy_(torch.randn(8, 5, 6, generator=g))
    norm = LayoutLayerNorm([8, 5, 6])
    norm.load_state_dict(ref.state_dict())  # the same parameters and keys
    x = torch.randn(3, 8, 5, 6, generator=g)
    for layout in (torch.contiguous_format, torch.channels_last):
        xa = x.clone(memory_format=layout).requires_grad_(True)
        xb = x.clone().requires_grad_(True)
        ya, yb = norm(xa), ref(xb)
        torch.testing.assert_close(ya, yb)
        # No copy to the other layout: the next convolution gets what it was given.
        assert ya.is_contiguous(memory_format=layout)
        grad = torch.randn(3, 8, 5, 6, generator=g)
        ya.backward(grad)
        yb.backward(grad)
        torch.testing.assert_close(xa.grad, xb.grad)
        for p, q in zip(norm.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad = q.grad = None


def _trained_in_both_layouts(size: int, torso: str, precision: str):
    """The network of one seed in each layout, after the same two RAdam steps (lr 1e-3); the
    observations it was trained on."""
    nets = []
    for channels_last in (False, True):
        cfg = dataclasses.replace(
            PRESETS["fast"],
            obs_size=size,
            torso=torso,
            channels_last=channels_last,
            precision=precision,
        )
        torch.manual_seed(0)
        nets.append(make_pqn_network(cfg, (4, size, size), 6))
    obs, actions = _frames(8, size), torch.arange(8) % 6
    targets = torch.linspace(-1.0, 1.0, 8)
    for net in nets:
        opt = torch.optim.RAdam(net.parameters(), lr=1e-3)
        for _ in range(2):
            q = net(obs).gather(1, actions[:, None]).squeeze(1)
            opt.zero_grad()
            torch.nn.functional.mse_loss(q, targets).backward()
            opt.step()
    (k0, p0), (k1, p1) = zip(*nets[0].named_parameters()), zip(*nets[1].named_parameters())
    assert k0 == k1
    return nets, obs, list(zip(k0, p0, p1))


@pytest.mark.parametrize("size, torso", [(64, "nature"), (42, "small")])
def test_pqn_network_equal_in_both_layouts(size, torso):
    """The same seed gives the same network in both layouts: the same Q-values, loss gradients
    and RAdam step (to float rounding: the convolutions sum in another order). fp32 pinned:
    `fast`'s `precision auto` is bf16 on a CPU with AMX or AVX-512 bf16 (test below)."""
    nets, obs, params = _trained_in_both_layouts(size, torso, "fp32")
    for name, a, b in params:
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5, msg=name)
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    with torch.no_grad():
        torch.testing.assert_close(nets[0](obs), nets[1](obs), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size, torso", [(64, "nature"), (42, "small")])
def test_pqn_network_bf16_agrees_in_both_layouts(size, torso):
    """The same under bf16 (the torso autocast; native on AMX / AVX-512 bf16, emulated and
    slower elsewhere, so this runs on every CPU). bf16 keeps 8 bits of mantissa and each layout's
    kernels sum in another order, so single gradient entries may differ by tens of percent (seen:
    up to 0.32 of the tensor's largest entry natively, 0.58 emulated); what must agree is the
    direction of each gradient (cosine >= 0.98; seen >= 0.997 natively, >= 0.989 emulated), the
    step RAdam takes (within 10% of the 2e-3 two steps can move a weight; seen 3e-5) and the
    Q-values (within 0.05 of values ~1.5; seen 0.015)."""
    nets, obs, params = _trained_in_both_layouts(size, torso, "bf16")
    for name, a, b in params:
        cos = torch.nn.functional.cosine_similarity(a.grad.flatten(), b.grad.flatten(), dim=0)
        assert cos >= 0.98, (name, cos.item())
        torch.testing.assert_close(a, b, rtol=0, atol=2e-4, msg=name)
    with torch.no_grad():
        torch.testing.assert_close(nets[0](obs), nets[1](obs), rtol=0, atol=0.05)


def test_channels_last_network_restores_from_its_state_dict():
    """A checkpoint of the channels-last network (conv weights in that layout, LayerNorm weights
    [C, H, W]) restored into a fresh one gives the same Q-values, bit for bit."""
    cfg = dataclasses.replace(PRESETS["fast"], obs_size=52, channels_last=True)
    torch.manual_seed(0)
    net = make_pqn_network(cfg, (4, 52, 52), 6)
    opt = torch.optim.RAdam(net.parameters(), lr=1e-3)
    obs = _frames(8, 52)
    for _ in range(3):  # move the weights off their initialization
        opt.zero_grad()
        net(obs).square().mean().backward()
        opt.step()
    buf = io.BytesIO()
    torch.save({"net": net.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf)
    torch.manual_seed(1)  # another initialization, overwritten by the restore
    fresh = make_pqn_network(cfg, (4, 52, 52), 6)
    fresh.load_state_dict(saved["net"])
    with torch.no_grad():
        assert torch.equal(fresh(obs), net(obs))
    # and the restored optimizer takes the same next step
    fresh_opt = torch.optim.RAdam(fresh.parameters(), lr=1e-3)
    fresh_opt.load_state_dict(saved["opt"])
    for n, o in ((net, opt), (fresh, fresh_opt)):
        o.zero_grad()
        n(obs).square().mean().backward()
        o.step()
    for a, b in zip(net.parameters(), fresh.parameters()):
        assert torch.equal(a, b)
