"""RunningMeanStd against numpy over the concatenated samples, and the actor-critics' input and
value normalization (feed-forward and recurrent): prepared batches equal raw ones, the inputs are
numpy's normalized pixels, the values they act with are the head's output in the return scale."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rapidrl.nets.actor_critic import ActorCritic
from rapidrl.nets.normalize import RunningMeanStd
from rapidrl.nets.recurrent import RecurrentActorCritic, lstm_loop
from rapidrl.nets.torso import make_torso


def test_running_stats_equal_numpy_over_all_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 3, 2)) for n in (1, 7, 50, 200)]
    rms = RunningMeanStd((3, 2))
    for b in batches:
        rms.update(torch.as_tensor(b, dtype=torch.float32))
    every = np.concatenate(batches).astype(np.float32).astype(np.float64)
    # The prior count (1e-4 at mean 0, variance 1) shifts the result by ~1e-4 / 258.
    np.testing.assert_allclose(rms.mean.numpy(), every.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rms.var.numpy(), every.var(0), rtol=1e-5, atol=1e-5)
    assert float(rms.count) == pytest.approx(258, abs=1e-3)


def test_uint8_frames_are_summed_in_chunks_exactly():
    """A batch larger than one chunk (2**22 elements) of uint8 frames gives numpy's statistics."""
    rng = np.random.default_rng(1)
    frames = rng.integers(0, 256, size=(700, 2, 52, 52), dtype=np.uint8)  # 3.8M elements x 2
    frames = np.concatenate([frames, frames[:300] // 3])
    rms = RunningMeanStd((2, 52, 52))
    rms.update(torch.as_tensor(frames))
    ref = frames.astype(np.float64)
    np.testing.assert_allclose(rms.mean.numpy(), ref.mean(0), rtol=1e-6)
    np.testing.assert_allclose(rms.var.numpy(), ref.var(0), rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8])
def test_8bit_samples_give_the_float64_statistics_bit_for_bit(dtype):
    """8-bit samples are summed through float32 blocks; every partial sum must stay an exact
    integer, so the statistics equal those of the same values given as float64, bit for bit,
    including at the extremes (all 255 or -128) and over several blocks."""
    rng = np.random.default_rng(2)
    lo, hi = (0, 256) if dtype == torch.uint8 else (-128, 128)
    for n in (1, 255, 256, 257, 1000):
        x = torch.as_tensor(rng.integers(lo, hi, size=(n, 2, 5, 5)), dtype=dtype)
        x[: n // 2] = hi - 1 if dtype == torch.uint8 else lo  # the largest squares
        a, b = RunningMeanStd((2, 5, 5)), RunningMeanStd((2, 5, 5))
        for _ in range(2):
            a.update(x)
            b.update(x.to(torch.float64))
        assert torch.equal(a.mean, b.mean) and torch.equal(a.var, b.var), n


def test_update_leaves_its_input_as_it_was():
    x = torch.randn(300, 3, dtype=torch.float64)
    before = x.clone()
    RunningMeanStd((3,)).update(x)
    assert torch.equal(x, before)


def test_normalize_in_chunks_equals_the_formula_in_any_layout_and_dtype():
    """normalize runs in place over chunks of rows: the same values as the formula written out,
    channels-last frames stay channels-last, bf16 output is the float32 result rounded once,
    and the input is not touched (a float32 input included)."""
    rng = np.random.default_rng(3)
    frames = torch.as_tensor(rng.integers(0, 256, size=(300, 2, 52, 52), dtype=np.uint8))
    rms = RunningMeanStd((2, 52, 52), clip=5.0)
    rms.update(frames[:100])
    mean, std = rms.mean.float(), (rms.var + rms.eps).sqrt().float()
    expected = ((frames.float() - mean) / std).clamp(-5.0, 5.0)
    assert torch.equal(rms.normalize(frames), expected)  # 300 rows: several chunks
    cl = frames.contiguous(memory_format=torch.channels_last)
    out = rms.normalize(cl)
    assert out.is_contiguous(memory_format=torch.channels_last) and torch.equal(out, expected)
    assert torch.equal(rms.normalize(frames, torch.bfloat16), expected.to(torch.bfloat16))
    values = torch.as_tensor(rng.normal(2.0, 3.0, size=(7, 5)), dtype=torch.float32)
    kept = values.clone()
    v = RunningMeanStd(())
    v.update(values.reshape(-1))
    want = (kept - v.mean.float()) / (v.var + v.eps).sqrt().float()
    assert torch.equal(v.normalize(values), want) and torch.equal(values, kept)
    assert torch.equal(v.normalize(values[0, 0]), want[0, 0])  # a 0-d tensor


def test_normalize_clamps_and_denormalize_inverts():
    rms = RunningMeanStd((), clip=2.0)
    rms.update(torch.tensor([1.0, 3.0]))  # mean ~2, var ~1
    x = torch.tensor([2.0, 2.5, 100.0, -100.0])
    y = rms.normalize(x)
    assert y[0] == pytest.approx(0.0, abs=1e-3) and y[1] == pytest.approx(0.5, abs=1e-3)
    assert y[2] == 2.0 and y[3] == -2.0
    free = RunningMeanStd(())
    free.load_state_dict(rms.state_dict())
    torch.testing.assert_close(free.denormalize(free.normalize(x)), x)
    with pytest.raises(ValueError, match="expected \\(\\)"):
        rms.update(torch.zeros(4, 2))
    rms.update(torch.zeros(0))  # no samples: unchanged
    assert float(rms.count) == pytest.approx(2.0, abs=1e-3)


def _net(**kw) -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic((2, 52, 52), 6, channels_last=True, **kw)


def test_obs_norm_normalizes_raw_frames_and_prepared_batches_alike():
    net = _net(obs_norm=True)
    frames = torch.randint(0, 256, (16, 2, 52, 52), dtype=torch.uint8)
    net.obs_rms.update(torch.randint(0, 120, (64, 2, 52, 52), dtype=torch.uint8))
    logits, values = net(frames)
    # By hand: the torso on the clamped normalized pixels (no / 255).
    x = ((frames.double() - net.obs_rms.mean) / (net.obs_rms.var + 1e-5).sqrt()).clamp(-5, 5)
    h = net.torso(x.float().contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(logits, net.actor(h))
    # A prepared batch (normalized once for all PPO epochs) gives the same outputs.
    out = net.evaluate(net.prepare(frames), torch.zeros(16, dtype=torch.long))
    torch.testing.assert_close(out.values, values)
    # Without obs_norm the same weights see pixels / 255: a different function.
    plain = _net()
    plain.load_state_dict({k: v for k, v in net.state_dict().items() if "rms" not in k})
    assert not torch.allclose(plain(frames)[0], logits)
    with pytest.raises(ValueError, match=r"image \[C, H, W\] or vector \[D\]"):
        ActorCritic((3, 4), 2, obs_norm=True)


def test_value_norm_acts_in_the_return_scale_and_trains_on_the_head():
    net = _net(value_norm=True)
    net.value_rms.update(torch.tensor([10.0, 30.0, 20.0, 40.0]))
    frames = torch.randint(0, 256, (8, 2, 52, 52), dtype=torch.uint8)
    head = net.evaluate(frames, torch.zeros(8, dtype=torch.long)).values
    with torch.no_grad():
        acted = net.act(frames).value
        boot = net.value(frames)
    rms = net.value_rms
    assert float(rms.mean) == pytest.approx(25.0, abs=1e-2)
    std = (rms.var + 1e-5).sqrt().float()
    torch.testing.assert_close(acted, head.detach() * std + rms.mean.float())
    torch.testing.assert_close(boot, acted)
    with torch.no_grad():  # forward too (the Ray workers' ActorCriticPolicy calls it)
        torch.testing.assert_close(net(frames)[1], acted)
    keys = set(net.state_dict())
    assert {"value_rms.mean", "value_rms.var", "value_rms.count"} <= keys
    assert not any(k.startswith("obs_rms") for k in keys)


def test_recurrent_net_normalizes_its_input_and_values_as_numpy():
    """RecurrentActorCritic with obs_norm and value_norm: the torso sees numpy's normalized
    pixels ((x - mean) / sqrt(var + eps), clamped to +-5, statistics over every frame merged) in
    training and in acting; forward_sequence, act and value give the head's output in the
    return scale, evaluate the head's output itself; the statistics are state-dict buffers."""
    shape, n_act, t_len, n_env = (2, 16, 16), 5, 6, 3
    torch.manual_seed(0)
    torso = make_torso(shape, kind="small")
    net = RecurrentActorCritic(
        shape, n_act, hidden_size=8, torso=torso, obs_norm=True, value_norm=True
    )
    rng = np.random.default_rng(2)
    seen = [rng.integers(0, 120, (n, *shape), dtype=np.uint8) for n in (5, 40)]
    for frames in seen:
        net.obs_rms.update(torch.as_tensor(frames))
    returns = np.array([10.0, 30.0, 20.0, 40.0, -5.0])
    net.value_rms.update(torch.as_tensor(returns))
    every = np.concatenate(seen).astype(np.float64)
    frames = torch.as_tensor(rng.integers(0, 256, (t_len, n_env, *shape), dtype=np.uint8))
    x_np = np.clip((frames.numpy() - every.mean(0)) / np.sqrt(every.var(0) + 1e-5), -5, 5)
    v_mean, v_std = returns.mean(), np.sqrt(returns.var() + 1e-5)
    starts = torch.as_tensor(rng.random((t_len, n_env)) < 0.3)
    state = net.initial_state(n_env)
    actions = torch.as_tensor(rng.integers(0, n_act, (t_len, n_env)))
    with torch.no_grad():
        seq = net.forward_sequence(frames, starts, state, mode="loop")
        packed = net.forward_sequence(frames, starts, state, mode="packed")
        head_out = net.evaluate(frames, starts, state, actions)
        # By hand: the torso on numpy's normalized pixels, the LSTM loop, the heads.
        x = torch.as_tensor(x_np, dtype=torch.float32).flatten(0, 1)
        feats = net.torso(x).view(t_len, n_env, -1)
        out, _ = lstm_loop(net.lstm, feats, starts, state)
        logits, head = net.actor(out), net.critic(out).squeeze(-1)
        act = net.act(frames[0], state, None, starts[0])
        boot = net.value(frames[0], state)
    assert seq.logits.shape == (t_len, n_env, n_act) and seq.values.shape == (t_len, n_env)
    assert head_out.values.shape == head_out.logprob.shape == (t_len, n_env)
    assert act.action.shape == act.value.shape == (n_env,) and act.logits.shape == (n_env, n_act)
    tol = dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(seq.logits, logits, **tol)
    want = (head.double() * v_std + v_mean).float()
    torch.testing.assert_close(seq.values, want, **tol)
    torch.testing.assert_close(packed.values, want, **tol)
    torch.testing.assert_close(head_out.values, head, **tol)  # the loss sees the head's output
    # Acting: one step from the zero store is the sequence's first step.
    torch.testing.assert_close(act.logits, logits[0], **tol)
    torch.testing.assert_close(act.value, want[0], **tol)
    torch.testing.assert_close(boot, want[0], **tol)
    sd = net.state_dict()
    assert sd["obs_rms.mean"].shape == shape and sd["value_rms.mean"].shape == ()
    assert float(sd["obs_rms.count"]) == pytest.approx(45, abs=1e-3)
    assert float(sd["value_rms.count"]) == pytest.approx(5, abs=1e-3)
    with pytest.raises(ValueError, match=r"image \[C, H, W\] or vector \[D\]"):
        RecurrentActorCritic((3, 4), 2, obs_norm=True)
    plain = RecurrentActorCritic((4,), 2, value_norm=True)
    assert plain.obs_rms is None and not any(k.startswith("obs_rms") for k in plain.state_dict())


def test_vector_obs_norm_normalizes_every_input_once_and_clamps_at_10():
    """MuJoCo-style vectors: every input (float) is raw and normalized, clamped to +-10; a
    prepared batch is the raw one, so evaluate normalizes it exactly once."""
    torch.manual_seed(0)
    net = ActorCritic((3,), 2, obs_norm=True, shared_torso=False, continuous=True)
    net.obs_rms.update(torch.tensor([[0.0, 10.0, -5.0], [2.0, 14.0, -5.0]], dtype=torch.float64))
    obs = torch.tensor([[1.0, 12.0, -5.0], [1e6, 10.0, -5.0]], dtype=torch.float64)
    x = ((obs - net.obs_rms.mean) / (net.obs_rms.var + 1e-5).sqrt()).clamp(-10, 10)
    assert float(x[1, 0]) == 10.0  # the clamp
    mean, _ = net(obs)
    torch.testing.assert_close(mean, net.actor(net.torso(x.float())))
    assert net.prepare(obs) is obs
    actions = torch.zeros(2, 2)
    torch.testing.assert_close(
        net.evaluate(net.prepare(obs), actions).logprob, net.evaluate(obs, actions).logprob
    )
