"""Packed-sequence LSTM training == the step-by-step masked loop (outputs and gradients)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from torch import nn

from rapidrl.nets.recurrent import (
    RecurrentActorCritic,
    choose_buckets,
    plan_segments,
    run_lstm,
)
from rapidrl.nets.torso import MLP, NatureCNN

FAST_MODES = ("packed", "packed_sequence")


def make_starts(kind: str, num_steps: int, num_envs: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if kind == "none":
        return torch.zeros(num_steps, num_envs, dtype=torch.bool)
    if kind == "every":
        return torch.ones(num_steps, num_envs, dtype=torch.bool)
    starts = torch.rand(num_steps, num_envs, generator=g) < 0.25
    starts[0, 0] = True  # an episode starts right at t = 0 (the stored state is dropped)
    starts[:, -1] = False  # one env without any start: a segment as long as the rollout
    starts[-1, 1 % num_envs] = True  # a one-step segment at the end
    return starts


def max_rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max().clamp_min(1.0)).item()


# ---------------------------------------------------------------------------------------------
# Index plan
# ---------------------------------------------------------------------------------------------


def test_plan_matches_the_issue_example():
    # env a: [a1 a2 a3 a4 | a5 a6], env b: [b1 b2 | b3 b4 b5 | b6]
    starts = torch.zeros(6, 2, dtype=torch.bool)
    starts[4, 0] = True
    starts[[2, 5], 1] = True
    plan = plan_segments(starts, max_buckets=1)
    assert plan.num_segments == 5
    assert plan.lengths.tolist() == [4, 3, 2, 2, 1]
    assert plan.batch_sizes.tolist() == [5, 4, 2, 1]
    assert plan.buckets == ((0, 4, 5, 0),)
    # scatter element ids into the padded [4, 5] layout and read the segments back
    ids = torch.arange(1, 13).view(2, 6).t().reshape(-1)  # a1..a6 = 1..6, b1..b6 = 7..12
    buf = torch.zeros(plan.padded_rows, dtype=torch.long).index_copy(0, plan.row, ids)
    cols = buf.view(4, 5).t().tolist()
    assert cols == [[1, 2, 3, 4], [9, 10, 11, 0], [5, 6, 0, 0], [7, 8, 0, 0], [12, 0, 0, 0]]
    assert plan.first_rank.tolist() == [0, 3] and plan.last_rank.tolist() == [2, 4]
    packed = torch.zeros(12, dtype=torch.long).index_copy(0, plan.packed_row, ids)
    assert packed.tolist() == [1, 9, 5, 7, 12, 2, 10, 6, 8, 3, 11, 4]


def test_plan_without_starts_is_identity():
    plan = plan_segments(torch.zeros(5, 3, dtype=torch.bool))
    assert plan.identity and plan.padding_efficiency == 1.0
    assert torch.equal(plan.row, torch.arange(15))


def brute_force_buckets(lengths, call, step, max_buckets=None):
    groups = sorted(set(lengths), reverse=True)
    best = None
    for cuts in itertools.product([0, 1], repeat=len(groups) - 1):
        bounds = [i + 1 for i, c in enumerate(cuts) if c] + [len(groups)]
        if max_buckets is not None and len(bounds) > max_buckets:
            continue
        cost, lo = 0.0, 0
        for hi in bounds:
            top = groups[lo]
            n = sum(1 for x in lengths if groups[hi - 1] <= x <= top)
            cost += call + step * top + top * n
            lo = hi
        best = cost if best is None else min(best, cost)
    return best


def bucket_cost(lengths, ranges, call, step):
    return sum(call + step * lengths[lo] + lengths[lo] * (hi - lo) for lo, hi in ranges)


@pytest.mark.parametrize("seed", range(4))
def test_choose_buckets_is_optimal(seed):
    rng = np.random.default_rng(seed)
    lengths = sorted(rng.integers(1, 40, size=int(rng.integers(3, 13))).tolist(), reverse=True)
    call, step = float(rng.uniform(0, 80)), float(rng.uniform(0, 8))
    for max_buckets in (None, 2, 3):
        ranges = choose_buckets(lengths, call, step, max_buckets)
        assert ranges[0][0] == 0 and ranges[-1][1] == len(lengths)
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert max_buckets is None or len(ranges) <= max_buckets
        expected = brute_force_buckets(lengths, call, step, max_buckets)
        assert bucket_cost(lengths, ranges, call, step) == pytest.approx(expected)
    assert choose_buckets(lengths, call, step, max_buckets=1) == [(0, len(lengths))]


# ---------------------------------------------------------------------------------------------
# The LSTM core: packed == loop
# ---------------------------------------------------------------------------------------------


def core_run(mode, lstm, x, starts, h0, c0, grad_out, **kw):
    x = x.clone().requires_grad_()
    h0 = h0.clone().requires_grad_()
    c0 = c0.clone().requires_grad_()
    out, final = run_lstm(lstm, x, starts, (h0, c0), mode, **kw)
    params = list(lstm.parameters())
    grads = torch.autograd.grad(out, [x, h0, c0, *params], grad_out)
    return out.detach(), final, grads


@pytest.mark.parametrize("kind", ["random", "every", "none"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_core_packed_equals_loop(kind, dtype):
    torch.manual_seed(0)
    num_steps, num_envs, feat, hidden = 12, 5, 7, 6
    lstm = nn.LSTM(feat, hidden, num_layers=2).to(dtype)
    x = torch.randn(num_steps, num_envs, feat, dtype=dtype)
    h0 = torch.randn(2, num_envs, hidden, dtype=dtype)
    c0 = torch.randn(2, num_envs, hidden, dtype=dtype)
    grad_out = torch.randn(num_steps, num_envs, hidden, dtype=dtype)
    starts = make_starts(kind, num_steps, num_envs)
    ref_out, ref_final, ref_grads = core_run("loop", lstm, x, starts, h0, c0, grad_out)
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    for mode, kw in [
        ("packed", {}),
        ("packed", {"plan": plan_segments(starts, max_buckets=1)}),  # one padded call
        ("packed", {"plan": plan_segments(starts, call_cost=0.0, step_cost=0.0)}),  # many
        ("packed_sequence", {}),
    ]:
        out, _, grads = core_run(mode, lstm, x, starts, h0, c0, grad_out, **kw)
        assert out.dtype == dtype
        assert max_rel_err(out, ref_out) <= tol, mode
        for name, g, rg in zip(["x", "h0", "c0", "params"], grads, ref_grads):
            assert max_rel_err(g, rg) <= 5 * tol, (mode, name)
    # a stored state dropped by a start at t = 0 gets exactly zero gradient
    assert torch.all(ref_grads[1][:, starts[0]] == 0)
    # exact final states: loop, packed_sequence, and packed when asked for them
    for mode in FAST_MODES:
        _, final, _ = core_run(mode, lstm, x, starts, h0, c0, grad_out, return_final_state=True)
        for a, b in zip(final, ref_final):
            assert max_rel_err(a.detach(), b.detach()) <= tol


def test_core_float32_lstm_sizes_of_the_real_model():
    # oneDNN kernels at the production width (512 -> 128), fewer steps to stay fast
    torch.manual_seed(1)
    num_steps, num_envs = 32, 4
    lstm = nn.LSTM(512, 128)
    x = torch.randn(num_steps, num_envs, 512)
    h0, c0 = torch.randn(1, num_envs, 128), torch.randn(1, num_envs, 128)
    grad_out = torch.randn(num_steps, num_envs, 128)
    starts = make_starts("random", num_steps, num_envs, seed=3)
    ref_out, _, ref_grads = core_run("loop", lstm, x, starts, h0, c0, grad_out)
    for mode in FAST_MODES:
        out, _, grads = core_run(mode, lstm, x, starts, h0, c0, grad_out)
        assert (out - ref_out).abs().max().item() <= 1e-6
        for g, rg in zip(grads, ref_grads):
            assert max_rel_err(g, rg) <= 1e-5


# ---------------------------------------------------------------------------------------------
# The actor-critic module
# ---------------------------------------------------------------------------------------------


class Float64Torso(nn.Module):
    """A torso that keeps the input dtype (the shared MLP casts to float32)."""

    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.out_dim = out_dim
        self.net = nn.Sequential(nn.Linear(in_dim, out_dim), nn.Tanh())

    def forward(self, obs):
        return self.net(obs)


def model_grads(model, mode, obs, starts, state, actions):
    model.zero_grad()
    out = model.evaluate(obs, starts, state, actions, mode=mode)
    (out.logprob.sum() + out.entropy.sum() + out.values.square().sum()).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    return out, grads


@pytest.mark.parametrize(
    "torso_kind,dtype",
    [("mlp", torch.float32), ("custom", torch.float64), ("cnn", torch.float32)],
)
def test_model_packed_equals_loop(torso_kind, dtype):
    torch.manual_seed(2)
    if torso_kind == "cnn":
        obs_shape, num_steps, num_envs = (2, 84, 84), 6, 3
        torso = NatureCNN(2, out_dim=32)
        obs = torch.randint(0, 256, (num_steps, num_envs, *obs_shape), dtype=torch.uint8)
    else:
        obs_shape, num_steps, num_envs = (5,), 10, 4
        torso = MLP(5, out_dim=16) if torso_kind == "mlp" else Float64Torso(5, 16)
        obs = torch.randn(num_steps, num_envs, *obs_shape, dtype=dtype)
    model = RecurrentActorCritic(obs_shape, 3, hidden_size=8, torso=torso).to(dtype)
    for p in model.parameters():  # non-trivial heads (default init makes the actor tiny)
        p.data.normal_(0.0, 0.3)
    state = tuple(torch.randn(1, num_envs, 8, dtype=dtype) for _ in range(2))
    starts = make_starts("random", num_steps, num_envs, seed=5)
    actions = torch.randint(0, 3, (num_steps, num_envs))
    ref, ref_grads = model_grads(model, "loop", obs, starts, state, actions)
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    for mode in FAST_MODES:
        out, grads = model_grads(model, mode, obs, starts, state, actions)
        for a, b in zip(out, ref):
            assert max_rel_err(a.detach(), b.detach()) <= tol
        for g, rg in zip(grads, ref_grads):
            assert max_rel_err(g, rg) <= 10 * tol


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_act_with_env_subsets_matches_training_forward(dtype):
    """Acting step by step with an async-style subset of envs == the training forward pass."""
    torch.manual_seed(3)
    num_steps, num_envs, layers = 7, 4, 2
    torso = Float64Torso(5, 16) if dtype == torch.float64 else MLP(5, out_dim=16)
    model = RecurrentActorCritic((5,), 3, hidden_size=8, num_layers=layers, torso=torso).to(dtype)
    obs = torch.randn(num_steps, num_envs, 5, dtype=dtype)
    starts = make_starts("random", num_steps, num_envs, seed=7)
    store = tuple(torch.randn(layers, num_envs, 8, dtype=dtype) for _ in range(2))
    initial = store
    logits = torch.zeros(num_steps, num_envs, 3, dtype=dtype)
    values = torch.zeros(num_steps, num_envs, dtype=dtype)
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    with torch.no_grad():
        for t in range(num_steps):
            for ids in ([2, 0], [3], [1]):  # envs come back in arbitrary subsets
                ids_t = torch.tensor(ids)
                a = model.act(obs[t, ids_t], store, ids_t, starts[t, ids_t])
                logits[t, ids_t] = a.logits
                values[t, ids_t] = a.value
                assert a.action.shape == (len(ids),)
                torch.testing.assert_close(
                    a.logprob, torch.log_softmax(a.logits, -1).gather(1, a.action[:, None])[:, 0]
                )
                store = a.state
        seq = model.forward_sequence(obs, starts, initial, return_final_state=True)
    torch.testing.assert_close(logits, seq.logits, rtol=0, atol=tol)
    torch.testing.assert_close(values, seq.values, rtol=0, atol=tol)
    for a, b in zip(store, seq.state):
        torch.testing.assert_close(a, b, rtol=0, atol=tol)
    assert not torch.equal(initial[0], store[0])  # the store is updated out of place


def test_value_continues_the_stored_state():
    torch.manual_seed(4)
    model = RecurrentActorCritic((4,), 2, hidden_size=8)
    store = tuple(torch.randn(1, 3, 8) for _ in range(2))
    final_obs = torch.randn(2, 4)
    ids = torch.tensor([2, 0])
    with torch.no_grad():
        v = model.value(final_obs, store, ids)
        a = model.act(final_obs, store, ids, torch.zeros(2, dtype=torch.bool))
        fresh = model.value(final_obs, model.initial_state(3), ids)
    torch.testing.assert_close(v, a.value)
    assert not torch.allclose(v, fresh)


def test_act_all_envs_and_deterministic():
    model = RecurrentActorCritic((4,), 5, hidden_size=8)
    state = model.initial_state(3)
    assert state[0].shape == (1, 3, 8)
    with torch.no_grad():
        out = model.act(torch.randn(3, 4), state, deterministic=True)
    assert torch.equal(out.action, out.logits.argmax(-1))
    with pytest.raises(ValueError):
        model.act(torch.randn(2, 4), state)
    with pytest.raises(ValueError):
        RecurrentActorCritic((4,), 5, sequence_mode="scan")
