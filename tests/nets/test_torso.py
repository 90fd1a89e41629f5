"""The conv torso's precision switch: bf16 autocast inside the torso, float32 outside it."""

import dataclasses

import numpy as np
import pytest
import torch

from rapidrl.algos.dqn.config import PRESETS as DQN_PRESETS
from rapidrl.algos.dqn.learner import make_q_network
from rapidrl.algos.ppo.config import PRESETS as PPO_PRESETS
from rapidrl.algos.ppo.learner import make_policy
from rapidrl.nets.q import QNetwork
from rapidrl.nets.torso import (
    NatureCNN,
    SmallCNN,
    make_torso,
    native_bf16,
    resolve_precision,
    to_channels_last,
    use_precision,
)
from rapidrl.train import list_checkpoints


def _obs(n: int = 8) -> torch.Tensor:
    return torch.randint(
        0, 256, (n, 4, 84, 84), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )


def test_resolve_precision():
    assert resolve_precision("fp32", "cpu") is None
    assert resolve_precision("bf16", "cpu") is torch.bfloat16
    assert resolve_precision("auto", "cpu") is (torch.bfloat16 if native_bf16("cpu") else None)
    with pytest.raises(ValueError, match="fp32, bf16, auto"):
        resolve_precision("fp16", "cpu")


def test_bf16_torso_close_to_fp32_and_returns_float32():
    torch.manual_seed(0)
    torso = NatureCNN()
    obs = _obs()
    ref = torso(obs)
    use_precision(torso, torch.bfloat16)
    out = torso(obs)
    assert out.dtype == torch.float32  # heads and losses see float32
    assert not torch.equal(out, ref)  # it did run in bf16 (8-bit mantissa rounds)
    torch.testing.assert_close(out, ref, atol=0.05 * ref.abs().max().item(), rtol=0.05)
    use_precision(torso, None)
    assert torch.equal(torso(obs), ref)


def test_bf16_input_cast_equals_autocast_of_scaled_float():
    """The torso casts uint8 frames straight to bf16 and divides there; that must be the very
    input autocast made from float32 frames / 255 (the old path), to the last bit."""
    torch.manual_seed(0)
    torso = use_precision(NatureCNN(), torch.bfloat16)
    obs = _obs()
    all_bytes = torch.arange(256, dtype=torch.uint8)
    direct = all_bytes.to(torch.bfloat16).div_(255.0)
    via_float = all_bytes.float().div_(255.0).to(torch.bfloat16)
    assert torch.equal(direct, via_float)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = torso.net(obs.float().div_(255.0)).float()
    assert torch.equal(torso(obs), ref)


def test_bf16_q_network_gradients_are_float32_and_close():
    torch.manual_seed(0)
    q32 = QNetwork((4, 84, 84), 6, dueling=True)
    q16 = QNetwork((4, 84, 84), 6, dueling=True, compute_dtype=torch.bfloat16)
    q16.load_state_dict(q32.state_dict())
    obs = _obs()
    grads = []
    for q in (q32, q16):
        q.zero_grad()
        q(obs).square().mean().backward()
        grads.append(torch.cat([p.grad.flatten() for p in q.parameters()]))
    assert all(p.dtype == torch.float32 for p in q16.parameters())
    assert grads[1].dtype == torch.float32
    cos = torch.nn.functional.cosine_similarity(grads[0], grads[1], dim=0)
    assert cos > 0.99


@pytest.mark.parametrize("recurrent", [False, True])
def test_ppo_config_precision_reaches_the_torso(recurrent):
    cfg = PPO_PRESETS["ppo-lstm" if recurrent else "ppo"]
    net = make_policy(dataclasses.replace(cfg, precision="bf16"), (4, 84, 84), 6)
    assert net.torso.compute_dtype is torch.bfloat16
    assert make_policy(cfg, (4, 84, 84), 6).torso.compute_dtype is None


def test_dqn_config_precision_reaches_the_torso():
    cfg = DQN_PRESETS["dqn"]
    assert (
        make_q_network(
            dataclasses.replace(cfg, precision="bf16"), (4, 84, 84), 6
        ).torso.compute_dtype
        is torch.bfloat16
    )
    assert make_q_network(cfg, (4, 84, 84), 6).torso.compute_dtype is None
    assert DQN_PRESETS["fast"].precision == "auto" and PPO_PRESETS["fast"].precision == "auto"


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_prepared_obs_give_the_same_evaluation(precision, channels_last):
    """PPO converts a rollout's frames once (ActorCritic.prepare) and evaluates minibatches of
    the converted copy: that must be the same computation as evaluating the uint8 frames."""
    cfg = dataclasses.replace(PPO_PRESETS["fast"], precision=precision, channels_last=channels_last)
    torch.manual_seed(0)
    net = make_policy(cfg, (4, 84, 84), 6)
    obs = _obs(16)
    actions = torch.randint(0, 6, (16,), generator=torch.Generator().manual_seed(1))
    prepared = net.prepare(obs)
    assert prepared.dtype == (torch.bfloat16 if precision == "bf16" else torch.float32)
    # A minibatch of the converted copy against the same minibatch of frames (same batch size:
    # float32 GEMMs may round differently for another size).
    ref = net.evaluate(obs[3:11], actions[3:11])
    out = net.evaluate(prepared[3:11], actions[3:11])
    for a, b in zip(out, ref, strict=True):
        assert torch.equal(a, b)


# --- frame sizes and the small torso (PPO/PQN --obs-size, --torso) -----------------------------
@pytest.mark.parametrize(
    "kind, size, flat, out_dim",
    [
        ("nature", 84, 64 * 7 * 7, 512),
        ("nature", 64, 64 * 4 * 4, 512),
        ("small", 42, 32 * 3 * 3, 256),
    ],
)
def test_torso_shapes_for_each_frame_size(kind, size, flat, out_dim):
    torso = make_torso((4, size, size), kind=kind)
    linear = [m for m in torso.modules() if isinstance(m, torch.nn.Linear)]
    assert linear[0].in_features == flat and torso.out_dim == out_dim
    obs = torch.randint(0, 256, (3, 4, size, size), dtype=torch.uint8)
    out = torso(obs)
    assert out.shape == (3, out_dim) and out.dtype == torch.float32
    # uint8 in == the same frames scaled by hand (the torso scales inside)
    torch.testing.assert_close(torso.net(obs.float() / 255.0), out)


def test_nature_cnn_at_84_is_the_protocol_network():
    """The frame-size parameter leaves the 84x84 network as it was: same layers, same shapes."""
    shapes = [tuple(p.shape) for p in NatureCNN(4, 512).parameters()]
    assert shapes == [
        (32, 4, 8, 8), (32,), (64, 32, 4, 4), (64,), (64, 64, 3, 3), (64,), (512, 3136), (512,)
    ]  # fmt: skip


def test_nature_cnn_widths_and_features():
    """--torso-channels / --torso-dim: the same three convolutions and linear layer, narrower;
    the default widths build the default net with the same initial draw."""
    torso = make_torso((2, 52, 52), out_dim=256, channels=(16, 32, 24))
    convs = [m for m in torso.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.stride) for c in convs] == [
        (16, (8, 8), (4, 4)), (32, (4, 4), (2, 2)), (24, (3, 3), (1, 1))
    ]  # fmt: skip
    linear = [m for m in torso.modules() if isinstance(m, torch.nn.Linear)]
    assert linear[0].in_features == 24 * 3 * 3 and torso.out_dim == 256
    assert torso(torch.zeros(2, 2, 52, 52, dtype=torch.uint8)).shape == (2, 256)
    torch.manual_seed(0)
    default = make_torso((2, 52, 52)).state_dict()
    torch.manual_seed(0)
    explicit = make_torso((2, 52, 52), channels=(32, 64, 64), out_dim=512).state_dict()
    assert default.keys() == explicit.keys()
    assert all(torch.equal(default[k], explicit[k]) for k in default)
    with pytest.raises(ValueError, match="apply to the nature torso, not 'small'"):
        make_torso((2, 42, 42), kind="small", channels=(16, 32, 32))
    # Vector observations get the MLP whatever the conv widths (the default preset off Atari).
    mlp = make_torso((4,), channels=(32, 32, 32))
    assert not any(isinstance(m, torch.nn.Conv2d) for m in mlp.modules()) and mlp.out_dim == 64
    with pytest.raises(ValueError, match="3 positive conv widths"):
        NatureCNN(2, 512, input_hw=(52, 52), channels=(16, 0, 32))


@pytest.mark.parametrize("recurrent", [False, True])
def test_ppo_torso_widths_reach_the_net(recurrent):
    cfg = dataclasses.replace(
        PPO_PRESETS["lean"],
        torso_channels=(16, 32, 32),
        torso_dim=128,
        recurrent=recurrent,
        precision="fp32",
    )
    net = make_policy(cfg, (2, 52, 52), 6)
    convs = [m for m in net.torso.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in convs] == [16, 32, 32] and net.torso.out_dim == 128
    if not recurrent:
        logits, values = net(torch.zeros(3, 2, 52, 52, dtype=torch.uint8))
        assert logits.shape == (3, 6) and values.shape == (3,)


def test_torso_rejects_frames_it_cannot_take():
    with pytest.raises(ValueError, match="at least 36x36.*--torso small"):
        NatureCNN(4, 512, input_hw=(32, 32))
    with pytest.raises(ValueError, match="unknown torso 'resnet'"):
        make_torso((4, 84, 84), kind="resnet")


def test_small_torso_runs_under_bf16_switch():
    torch.manual_seed(0)
    torso = SmallCNN(4, 256, input_hw=(42, 42))
    obs = torch.randint(0, 256, (4, 4, 42, 42), dtype=torch.uint8)
    ref = torso(obs)
    use_precision(torso, torch.bfloat16)
    assert torso.compute_dtype is torch.bfloat16
    out = torso(obs)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ref, atol=0.05 * ref.abs().max().item(), rtol=0.05)


@pytest.mark.parametrize("torso, size", [("nature", 64), ("small", 42)])
def test_ppo_policy_for_smaller_frames(torso, size):
    cfg = dataclasses.replace(PPO_PRESETS["fast"], obs_size=size, torso=torso, precision="fp32")
    net = make_policy(cfg, (4, size, size), 6)
    obs = torch.randint(0, 256, (5, 4, size, size), dtype=torch.uint8)
    logits, values = net(obs)
    assert logits.shape == (5, 6) and values.shape == (5,)
    assert isinstance(net.torso, SmallCNN if torso == "small" else NatureCNN)


@pytest.mark.parametrize("torso, size", [("nature", 64), ("small", 42)])
def test_dqn_q_network_for_smaller_frames(torso, size):
    cfg = dataclasses.replace(DQN_PRESETS["fast"], obs_size=size, torso=torso, precision="fp32")
    q = make_q_network(cfg, (4, size, size), 6)
    obs = torch.randint(0, 256, (5, 4, size, size), dtype=torch.uint8)
    assert q(obs).shape == (5, 6)
    assert isinstance(q.torso, SmallCNN if torso == "small" else NatureCNN)


def test_dqn_obs_size_reaches_the_env_and_the_replay(tmp_path):
    """``--obs-size 64`` on Pong: the Atari stack gives 64x64 frames, the replay stores them,
    the network takes them (a few real updates)."""
    from rapidrl.algos.dqn.train import train

    cfg = dataclasses.replace(
        DQN_PRESETS["fast"], obs_size=64, num_envs=2, backend="serial", buffer_size=1_000,
        learning_starts=200, max_frames=1_200, log_every_seconds=0, log_every_frames=400,
        checkpoint_every_seconds=1e9, no_progress=True, tensorboard=False, torch_threads=1,
        run_dir=str(tmp_path / "run"), save_replay=True,
    )  # fmt: skip
    summary = train(cfg)
    assert summary["updates"] > 0
    ckpt = list_checkpoints(tmp_path / "run" / "checkpoints")[-1]
    with np.load(str(ckpt).replace(".pt", ".npz")) as z:
        assert z["frames"].shape[-2:] == (64, 64)


@pytest.mark.parametrize(
    "shape",
    [(3, 2, 5, 7), (2, 4, 6, 6), (1, 1, 4, 4), (2, 3, 5, 5), (2, 8, 3, 3), (160, 2, 52, 52)],
)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_to_channels_last_equals_torch_layout_change(shape, dtype):
    # Every byte value, 255 (whose shift into the top byte wraps negative) included, in every
    # channel; (160, 2, 52, 52) is a replay-sized batch (chunking: the test below).
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, shape, generator=g, dtype=torch.int64).to(dtype)
    x[0, :, 0, 0] = 255
    ref = x.contiguous(memory_format=torch.channels_last)
    got = to_channels_last(x)
    assert torch.equal(got, ref) and got.dtype == dtype
    assert got.stride() == ref.stride() and got.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(got, x)  # the values, in the new layout


def test_to_channels_last_chunks_and_views(monkeypatch):
    import rapidrl.nets.torso as torso

    monkeypatch.setattr(torso, "_PACK_CHUNK_BYTES", 3 * 2 * 4 * 4)  # 3 rows a chunk
    x = torch.randint(0, 256, (10, 2, 4, 4), dtype=torch.uint8)
    assert torch.equal(to_channels_last(x), x)
    view = torch.randint(0, 256, (10, 4, 6, 5), dtype=torch.uint8)[:, :, 1:5]  # not contiguous
    assert torch.equal(to_channels_last(view), view)
    already = x.contiguous(memory_format=torch.channels_last)
    assert to_channels_last(already) is already
    flat = torch.zeros(3, 4)
    assert to_channels_last(flat) is flat


def test_the_mlp_torso_takes_widths_and_an_activation_and_keeps_its_default_layout():
    from torch import nn

    from rapidrl.nets.torso import MLP

    # The default is CleanRL's 64 x 64 tanh, with the parameter names checkpoints already hold.
    default = make_torso((11,))
    assert [type(m) for m in default.net] == [nn.Linear, nn.Tanh, nn.Linear, nn.Tanh]
    assert list(default.state_dict()) == [
        "net.0.weight",
        "net.0.bias",
        "net.2.weight",
        "net.2.bias",
    ]
    assert list(MLP(11).state_dict()) == list(default.state_dict())
    # rl_games' MuJoCo torso: 256 128 64, elu; --torso-dim replaces the last width.
    wide = make_torso((11,), mlp_widths=(256, 128, 64), mlp_activation="elu")
    linears = [m for m in wide.net if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(11, 256), (256, 128), (128, 64)]
    assert all(isinstance(m, nn.ELU) for m in wide.net[1::2]) and wide.out_dim == 64
    assert make_torso((11,), out_dim=32, mlp_widths=(256, 128, 64)).out_dim == 32
    x = torch.randn(5, 11)
    assert wide(x).shape == (5, 64)
    one = make_torso((11,), mlp_widths=(16,), mlp_activation="relu")
    assert [type(m) for m in one.net] == [nn.Linear, nn.ReLU] and one(x).shape == (5, 16)
    with pytest.raises(ValueError, match="unknown MLP activation 'gelu'"):
        make_torso((11,), mlp_activation="gelu")
    with pytest.raises(ValueError, match="MLP widths must be one or more positive ints"):
        make_torso((11,), mlp_widths=())
