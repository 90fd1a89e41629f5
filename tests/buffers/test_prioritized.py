"""Segment trees and prioritized replay: sums, search, proportions, weights, lifecycle."""

from __future__ import annotations

import numpy as np
import pytest

from rapidrl.buffers import MinTree, PrioritizedReplayBuffer, SumTree


def check_tree(tree, op):
    t = tree.tree
    for node in range(1, tree.leaf0):
        assert t[node] == op(t[2 * node], t[2 * node + 1])


def test_trees_consistent_after_random_updates():
    rng = np.random.default_rng(0)
    s, m = SumTree(37), MinTree(37)  # not a power of two
    ref = np.zeros(37)
    for _ in range(60):
        idx = rng.integers(0, 37, rng.integers(1, 20))  # duplicates included
        val = rng.random(idx.size) * rng.choice([0, 1, 100], idx.size)
        s.update(idx, val)
        m.update(idx, np.where(val > 0, val, np.inf))
        for i, v in zip(idx, val):  # sequential semantics: last write wins
            ref[i] = v
        check_tree(s, np.add)
        check_tree(m, np.minimum)
        np.testing.assert_array_equal(s.leaves, ref)
        assert s.total == pytest.approx(ref.sum(), rel=1e-12)
        live = ref[ref > 0]
        assert m.min == (live.min() if live.size else np.inf)
    with pytest.raises(IndexError):
        s.update([37], [1.0])


def test_find_matches_cumsum_and_skips_empty_leaves():
    rng = np.random.default_rng(1)
    s = SumTree(100)
    p = rng.random(100) * (rng.random(100) < 0.6)  # ~40% empty leaves
    s.update(np.arange(100), p)
    cum = np.cumsum(p)
    mass = rng.random(5000) * s.total
    ref = np.searchsorted(cum, mass, side="right")
    np.testing.assert_array_equal(s.find(mass), ref)
    np.testing.assert_array_equal(s._descend(mass, guarded=True) - s.leaf0, ref)  # fallback path
    # Exact segment boundaries and the extremes never land on an empty leaf.
    edges = np.r_[0.0, cum[:-1], np.nextafter(s.total, 0)]
    assert (p[s.find(edges)] > 0).all()


def make_buffer(**kw):
    args = dict(capacity=16, obs_shape=(2,), num_envs=1, obs_dtype=np.float32, alpha=0.7)
    args.update(kw)
    return PrioritizedReplayBuffer(**args)


def fill(buf, steps, num_envs=1, start=0):
    for t in range(start, start + steps):
        o = np.full((num_envs, 2), t, np.float32)
        a = np.arange(num_envs) + t * num_envs
        buf.add(o, a, np.ones(num_envs), np.zeros(num_envs), np.zeros(num_envs), o + 1)


def test_sampling_proportions_chi_square():
    buf = make_buffer(seed=0)
    fill(buf, 16)
    td = np.linspace(0.1, 3.0, 16)
    buf.update_priorities(np.arange(16), td)
    expected = (td + buf.eps) ** buf.alpha
    expected /= expected.sum()
    draws = 40_000
    idx = np.concatenate([buf.sample_indices(256) for _ in range(draws // 256)])
    counts = np.bincount(idx, minlength=16)
    exp_counts = expected * idx.size
    chi2 = ((counts - exp_counts) ** 2 / exp_counts).sum()
    assert chi2 < 37.7  # 99.9% quantile of chi-square with 15 dof (stratified: usually far less)


def test_weights_against_reference():
    buf = make_buffer(seed=1, normalize="buffer")
    fill(buf, 16)
    td = np.random.default_rng(2).exponential(size=16)
    buf.update_priorities(np.arange(16), td)
    beta = 0.6
    batch = buf.sample(64, beta=beta)
    p = (np.abs(td) + buf.eps) ** buf.alpha
    prob = p / p.sum()
    w_all = (len(p) * prob) ** -beta
    ref = w_all[batch["indices"]] / w_all.max()
    np.testing.assert_allclose(batch["weights"], ref, rtol=1e-6)
    assert batch["weights"].max() <= 1.0


def test_weights_normalized_by_the_batch():
    """The default divides by the batch's largest weight (1 in every batch), so one near-zero
    TD error elsewhere in the buffer does not shrink every update; "buffer" divides by the
    weight of the buffer's least likely transition."""
    batches = {}
    for normalize in ("batch", "buffer"):
        buf = make_buffer(seed=1, normalize=normalize)
        fill(buf, 16)
        td = np.random.default_rng(2).exponential(size=16)
        td[0] = 0.0  # priority eps**alpha: the buffer's largest weight by far
        buf.update_priorities(np.arange(16), td)
        batch = buf.sample(8, beta=0.6)
        p = (np.abs(td) + buf.eps) ** buf.alpha
        w_all = (len(p) * p / p.sum()) ** -0.6
        w = w_all[batch["indices"]]
        norm = w.max() if normalize == "batch" else w_all.max()
        np.testing.assert_allclose(batch["weights"], w / norm, rtol=1e-6)
        batches[normalize] = batch
    assert 0 not in batches["batch"]["indices"]  # the near-zero one is (almost) never drawn
    assert batches["batch"]["weights"].max() == pytest.approx(1.0)
    assert batches["buffer"]["weights"].max() < 0.1  # what kept PER from learning on Pong
    with pytest.raises(ValueError, match="normalize"):
        make_buffer(seed=1, normalize="max")


def test_new_transitions_get_max_priority_and_evicted_get_zero():
    buf = make_buffer(capacity=8, n_step=3)
    fill(buf, 5)
    assert (buf._sum.leaves > 0).sum() == 3  # the last n-1 wait for their n-step tail
    buf.update_priorities([0, 1], [5.0, 0.5])
    assert buf.max_priority == pytest.approx(5.0 + buf.eps)
    fill(buf, 1, start=5)
    new = buf._ids_of(np.array([0]), np.array([3]))
    assert buf._sum[new] == pytest.approx((5.0 + buf.eps) ** buf.alpha)
    fill(buf, 20, start=6)  # wraps around
    lo, hi = buf._sample_ranges()
    live_ids = buf._ids_of(np.zeros(hi[0] - lo[0], np.int64), np.arange(lo[0], hi[0]))
    assert set(np.flatnonzero(buf._sum.leaves)) == set(live_ids.tolist())
    assert np.isinf(np.delete(buf._min.leaves, live_ids)).all()
    assert np.isin(buf.sample(128)["indices"], live_ids).all()


def test_multi_env_lifecycle_matches_sampleable_set():
    rng = np.random.default_rng(3)
    buf = make_buffer(capacity=30, num_envs=3, n_step=2, seed=3)
    for t in range(60):
        ids = rng.permutation(3)[: rng.integers(1, 4)]
        o = rng.random((len(ids), 2)).astype(np.float32)
        done = rng.random(len(ids)) < 0.2
        buf.add(o, ids + 3 * t, np.ones(len(ids)), done, np.zeros(len(ids)), o, env_ids=ids)
        if t % 5 == 0 and buf.num_sampleable:
            batch = buf.sample(16, beta=0.5)
            buf.update_priorities(batch["indices"], rng.normal(size=16))
        lo, hi = buf._sample_ranges()
        live = np.concatenate(
            [
                buf._ids_of(np.full(h - lo_, e), np.arange(lo_, h))
                for e, (lo_, h) in enumerate(zip(lo, hi))
            ]
        )
        assert set(np.flatnonzero(buf._sum.leaves)) == set(live.tolist())
        assert buf._sum.total == pytest.approx(buf._sum.leaves.sum())


def test_update_priorities_skips_evicted_ids():
    buf = make_buffer(capacity=4)
    fill(buf, 4)
    batch = buf.sample(4)
    fill(buf, 4, start=4)  # all four evicted and replaced (slots reused, now max priority)
    fill(buf, 1, start=8)
    old = int(batch["indices"][0])
    before = buf._sum[old]
    buf.update_priorities(batch["indices"], np.full(4, 100.0))  # slots live again: updated
    assert buf._sum[old] != before
    buf2 = make_buffer(capacity=4, n_step=4)
    fill(buf2, 4)
    b2 = buf2.sample(2)
    fill(buf2, 1, start=4)  # evicts transition 0: its slot now waits for its n-step tail
    buf2.update_priorities(b2["indices"], np.full(2, 100.0))
    assert buf2._sum.total == pytest.approx(buf2.max_priority**buf2.alpha)
    with pytest.raises(ValueError):
        buf2.update_priorities([0], [np.nan])


def test_prioritized_state_dict_roundtrip(tmp_path):
    buf = make_buffer(seed=4)
    fill(buf, 20)
    buf.update_priorities(np.arange(16), np.arange(16.0))
    np.savez(tmp_path / "p.npz", **buf.state_dict())
    other = make_buffer(seed=99)
    with np.load(tmp_path / "p.npz") as z:
        other.load_state_dict(dict(z))
    a, b = buf.sample(32, beta=0.5), other.sample(32, beta=0.5)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert other.max_priority == buf.max_priority
