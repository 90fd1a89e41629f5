"""Recurrent actor-critic (torso -> LSTM -> actor/critic heads) and fast sequence training.

Rollout layout (time-major, as stored by the PPO rollout buffer):

- ``obs [T, B, *obs_shape]``, ``starts [T, B]`` bool: ``starts[t, b]`` is True where ``obs[t, b]``
  is the first observation of an episode (= the env's ``terminated | truncated`` of the previous
  step; at ``t = 0`` the flag carried over from the previous rollout).
- ``state = (h0, c0)``, each ``[num_layers, B, H]``: the LSTM state each env had before step 0 of
  the rollout (before the reset that ``starts[0]`` asks for).

The LSTM state is zeroed where an episode starts. Three ways to run a rollout, equal up to float
rounding (``tests/nets/test_recurrent.py``):

- ``"loop"`` (reference): one ``nn.LSTM`` call per step, the state multiplied by ``1 - start``.
- ``"packed"`` (default): split each env's rollout at episode starts into segments,
  sort them by length, group them into a few length buckets (a tiny dynamic program on a cost
  model, see ``choose_buckets``), pad each bucket only to its own longest segment, run ``nn.LSTM``
  once per bucket (once in all when no episode starts inside the rollout: then no copy either), and
  gather the outputs back to ``[T, B]``. A segment's initial state is the stored state for the
  first segment of an env (zeros if ``starts[0]``), zeros for every later one (a new episode).
  On the 2-core CPU: 4-13x faster than the loop for the LSTM core, and less memory than the loop
  (0.6-0.8x), where one call padded to the longest segment needs ~3-4x with frequent resets.
- ``"packed_sequence"``: the same segments as one ``torch.nn.utils.rnn.PackedSequence`` built
  straight from index math (no padded copy at all): least memory (~0.25x the loop), one call; on
  CPU as fast as "packed" for short segments, up to 2x slower for long ones (a generic kernel
  that pays per step, where "packed" runs oneDNN's fused LSTM).

All index math is vectorized torch (``plan_segments``); the only Python loops run over length
buckets (a handful) and over distinct segment lengths in the bucket choice (at most ``T``, numpy).

Acting uses the same module one step at a time with a per-env state store indexed by env id, so an
asynchronous vector env that returns a subset of envs works: ``act(obs, state, env_ids, start)``.

Input and value normalization (``obs_norm``, ``value_norm``) as in the feed-forward net, by the
same :class:`rapidrl.nets.normalize.NormalizedActorCritic`: the observation normalizer before the
torso, values in the return scale for acting code, the head's output for the loss.

Only discrete action spaces (a categorical head) for now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from rapidrl.nets.distributions import categorical_entropy, categorical_logprob
from rapidrl.nets.normalize import NormalizedActorCritic
from rapidrl.nets.torso import make_torso

__all__ = [
    "SEQUENCE_MODES",
    "ActOutput",
    "EvalOutput",
    "RecurrentActorCritic",
    "SegmentPlan",
    "SequenceOutput",
    "choose_buckets",
    "lstm_loop",
    "lstm_packed",
    "lstm_packed_sequence",
    "plan_segments",
    "run_lstm",
]

SEQUENCE_MODES = ("loop", "packed", "packed_sequence")

LSTMState = tuple[torch.Tensor, torch.Tensor]

# Bucket cost model, in units of "one padded (step, sequence) slot" of LSTM forward+backward.
# On the 2-core AVX-512 CPU (LSTM 512->128, oneDNN) one slot costs ~8-16 us and is compute-bound;
# an extra call costs some tens of slots, an extra sequential step a few. The optimum is flat:
# call costs 16..64 gave the same times within noise (B = 8 and 64, mean segments 5..128).
BUCKET_CALL_COST = 32.0
BUCKET_STEP_COST = 2.0


# --------------------------------------------------------------------------------------------
# Segment plan: pure index math over the episode-start flags
# --------------------------------------------------------------------------------------------


def choose_buckets(
    sorted_lengths: np.ndarray | list[int],
    call_cost: float = BUCKET_CALL_COST,
    step_cost: float = BUCKET_STEP_COST,
    max_buckets: int | None = None,
) -> list[tuple[int, int]]:
    """Split segments sorted by length (descending) into contiguous buckets ``[lo, hi)``.

    Minimizes ``sum over buckets of call_cost + step_cost * L + L * n`` (``L`` the bucket's longest
    segment, ``n`` its number of segments): padded work plus per-call and per-step overheads.
    Exact dynamic program over the distinct lengths (at most ``T`` of them); equal lengths always
    share a bucket. ``max_buckets=1`` gives the single padded call of the classic trick.
    """
    ls = np.asarray(sorted_lengths, dtype=np.int64)
    num = len(ls)
    if num == 0:
        return []
    if np.any(np.diff(ls) > 0):
        raise ValueError("choose_buckets: lengths must be sorted in descending order")
    group_lo = np.concatenate([[0], np.flatnonzero(np.diff(ls)) + 1])  # rank where group starts
    u = ls[group_lo].astype(np.float64)  # distinct lengths, descending
    k = len(u)
    bounds = np.append(group_lo, num)
    if k == 1 or (max_buckets is not None and max_buckets <= 1):
        return [(0, num)]

    def cost(i: np.ndarray, j: int) -> np.ndarray:  # buckets made of groups [i, j)
        return call_cost + step_cost * u[i] + u[i] * (bounds[j] - bounds[i])

    out = []
    if max_buckets is None or max_buckets >= k:  # unconstrained: O(k^2)
        best = np.zeros(k + 1)
        arg = np.zeros(k + 1, dtype=np.int64)
        for j in range(1, k + 1):
            cand = best[:j] + cost(np.arange(j), j)
            arg[j] = cand.argmin()
            best[j] = cand[arg[j]]
        j = k
        while j > 0:
            out.append((int(bounds[arg[j]]), int(bounds[j])))
            j = int(arg[j])
        return out[::-1]
    # at most m buckets: best[b, j] = least cost covering groups [0, j) with b buckets
    m = max_buckets
    best = np.full((m + 1, k + 1), np.inf)
    arg = np.zeros((m + 1, k + 1), dtype=np.int64)
    best[0, 0] = 0.0
    for j in range(1, k + 1):
        cand = best[:-1, :j] + cost(np.arange(j), j)  # [m, j]: previous layer + this bucket
        arg[1:, j] = cand.argmin(1)
        best[1:, j] = cand[np.arange(m), arg[1:, j]]
    b = int(best[1:, k].argmin()) + 1
    j = k
    while j > 0:
        i = int(arg[b, j])
        out.append((int(bounds[i]), int(bounds[j])))
        j, b = i, b - 1
    return out[::-1]


@dataclass(frozen=True)
class SegmentPlan:
    """Where every element of a ``[T, B]`` rollout goes when split into episode segments.

    Segments are ranked by length (longest first, stable). All index tensors live on the device
    of ``starts``; ``batch_sizes`` on the CPU (as ``PackedSequence`` requires).
    """

    num_steps: int
    num_envs: int
    num_segments: int
    identity: bool  # no episode starts after t = 0: the padded layout *is* [T, B]
    row: torch.Tensor  # [T*B] time-major element -> row of the concatenated bucket buffers
    padded_rows: int  # rows of that buffer (sum over buckets of L * n)
    buckets: tuple[tuple[int, int, int, int], ...]  # (row_offset, L, n, rank_lo)
    first_rank: torch.Tensor  # [B] rank of each env's first segment
    keep: torch.Tensor  # [B] bool: first segment continues the stored state (not starts[0])
    last_rank: torch.Tensor  # [B] rank of each env's last segment
    packed_row: torch.Tensor  # [T*B] time-major element -> row of PackedSequence.data
    batch_sizes: torch.Tensor  # [L_max] int64 CPU: segments longer than t
    lengths: torch.Tensor  # [S] int64 CPU: segment lengths by rank (descending)

    @property
    def padding_efficiency(self) -> float:
        """Real elements / padded elements of the bucketed layout (1.0: no padding)."""
        return self.num_steps * self.num_envs / max(self.padded_rows, 1)


def plan_segments(
    starts: torch.Tensor,
    *,
    call_cost: float = BUCKET_CALL_COST,
    step_cost: float = BUCKET_STEP_COST,
    max_buckets: int | None = None,
) -> SegmentPlan:
    """Index plan for ``starts [T, B]`` (bool or 0/1): vectorized torch, one CPU sync."""
    if starts.dim() != 2:
        raise ValueError(f"plan_segments: starts must be [T, B], got {tuple(starts.shape)}")
    t_len, n_env = starts.shape
    if t_len == 0 or n_env == 0:
        raise ValueError("plan_segments: empty rollout")
    dev = starts.device
    n = t_len * n_env
    begin = starts.to(torch.bool).clone()
    begin[0] = True  # every env's rollout opens a segment
    bflat = begin.t().reshape(-1)  # env-major: k = b * T + t
    seg = torch.cumsum(bflat, 0) - 1  # segment id of each element, env-major numbering
    seg_start = torch.nonzero(bflat).squeeze(1)  # [S] env-major index where each segment starts
    num_seg = seg_start.numel()
    lengths = torch.diff(seg_start, append=torch.tensor([n], device=dev))
    pos = torch.arange(n, device=dev) - seg_start[seg]  # step within the segment
    order = torch.argsort(lengths, descending=True, stable=True)  # rank -> segment
    rank = torch.empty_like(order)
    rank[order] = torch.arange(num_seg, device=dev)
    sorted_len = lengths[order].cpu()  # the one sync: bucket sizes must be Python ints

    # env-major -> time-major permutation: element (t, b) is env-major k = b*T + t.
    k_of_tm = (
        torch.arange(n_env, device=dev).view(1, n_env) * t_len
        + torch.arange(t_len, device=dev).view(t_len, 1)
    ).reshape(-1)
    seg_tm = seg[k_of_tm]
    pos_tm = pos[k_of_tm]
    rank_tm = rank[seg_tm]

    env_first_seg = seg[torch.arange(n_env, device=dev) * t_len]
    env_last_seg = seg[torch.arange(n_env, device=dev) * t_len + (t_len - 1)]
    first_rank = rank[env_first_seg]
    last_rank = rank[env_last_seg]
    keep = ~starts[0].to(torch.bool)

    # Bucketed padding: bucket q holds ranks [lo, hi), padded to L_q = length of rank lo.
    identity = num_seg == n_env
    if identity:  # one segment per env, all of length T; stable sort keeps env order
        buckets = ((0, t_len, n_env, 0),)
        row = torch.arange(n, device=dev)
    else:
        ranges = choose_buckets(sorted_len.numpy(), call_cost, step_cost, max_buckets)
        bk, off = [], 0
        for lo, hi in ranges:
            length = int(sorted_len[lo])
            bk.append((off, length, hi - lo, lo))
            off += length * (hi - lo)
        buckets = tuple(bk)
        counts = torch.tensor([b[2] for b in buckets])
        r_off = torch.repeat_interleave(torch.tensor([b[0] for b in buckets]), counts).to(dev)
        r_n = torch.repeat_interleave(counts, counts).to(dev)
        r_lo = torch.repeat_interleave(torch.tensor([b[3] for b in buckets]), counts).to(dev)
        row = r_off[rank_tm] + pos_tm * r_n[rank_tm] + (rank_tm - r_lo[rank_tm])
    padded_rows = sum(b[1] * b[2] for b in buckets)

    # PackedSequence layout: time-major over ranks; at step t the first batch_sizes[t] ranks.
    max_len = int(sorted_len[0])
    longer = torch.bincount(sorted_len, minlength=max_len + 1).flip(0).cumsum(0).flip(0)
    batch_sizes = longer[1:].contiguous()  # [L_max]: segments with length > t
    step_off = (torch.cumsum(batch_sizes, 0) - batch_sizes).to(dev)
    packed_row = step_off[pos_tm] + rank_tm

    return SegmentPlan(
        num_steps=t_len,
        num_envs=n_env,
        num_segments=num_seg,
        identity=identity,
        row=row,
        padded_rows=padded_rows,
        buckets=buckets,
        first_rank=first_rank,
        keep=keep,
        last_rank=last_rank,
        packed_row=packed_row,
        batch_sizes=batch_sizes,
        lengths=sorted_len,
    )


# --------------------------------------------------------------------------------------------
# The three ways to run an nn.LSTM over a rollout with episode starts
# --------------------------------------------------------------------------------------------


def _check(x: torch.Tensor, starts: torch.Tensor, state: LSTMState) -> None:
    if x.dim() != 3 or starts.shape != x.shape[:2]:
        raise ValueError(
            f"expected x [T, B, F] and starts [T, B], got {tuple(x.shape)}, {tuple(starts.shape)}"
        )
    if state[0].shape[1] != x.shape[1]:
        raise ValueError(f"state has {state[0].shape[1]} envs, x has {x.shape[1]}")


def lstm_loop(
    lstm: nn.LSTM, x: torch.Tensor, starts: torch.Tensor, state: LSTMState
) -> tuple[torch.Tensor, LSTMState]:
    """Reference: one call per step, state zeroed (``* (1 - start)``) where an episode starts."""
    _check(x, starts, state)
    keep = (~starts.to(torch.bool)).to(x.dtype).unsqueeze(-1)  # [T, B, 1]
    h, c = state
    outs = []
    for t in range(x.shape[0]):
        h, c = h * keep[t], c * keep[t]
        o, (h, c) = lstm(x[t : t + 1], (h, c))
        outs.append(o)
    return torch.cat(outs), (h, c)


def _segment_state(state: LSTMState, plan: SegmentPlan, dtype: torch.dtype) -> LSTMState:
    """Initial state per segment, in rank order: stored state for first segments, else zeros."""
    keep = plan.keep.to(dtype).view(1, -1, 1)
    h0, c0 = state
    layers, _, hidden = h0.shape
    hs = h0.new_zeros(layers, plan.num_segments, hidden).index_copy(1, plan.first_rank, h0 * keep)
    cs = c0.new_zeros(layers, plan.num_segments, hidden).index_copy(1, plan.first_rank, c0 * keep)
    return hs, cs


def lstm_packed_sequence(
    lstm: nn.LSTM,
    x: torch.Tensor,
    starts: torch.Tensor,
    state: LSTMState,
    plan: SegmentPlan | None = None,
) -> tuple[torch.Tensor, LSTMState]:
    """All segments as one ``PackedSequence`` (no padding), one call; exact final states."""
    _check(x, starts, state)
    plan = plan_segments(starts) if plan is None else plan
    t_len, n_env, feat = x.shape
    flat = x.reshape(t_len * n_env, feat)
    data = flat.new_empty(flat.shape).index_copy(0, plan.packed_row, flat)
    hs, cs = _segment_state(state, plan, x.dtype)
    out, (hn, cn) = lstm(PackedSequence(data, plan.batch_sizes), (hs, cs))
    y = out.data.index_select(0, plan.packed_row).view(t_len, n_env, -1)
    return y, (hn.index_select(1, plan.last_rank), cn.index_select(1, plan.last_rank))


def lstm_packed(
    lstm: nn.LSTM,
    x: torch.Tensor,
    starts: torch.Tensor,
    state: LSTMState,
    plan: SegmentPlan | None = None,
    return_final_state: bool = False,
) -> tuple[torch.Tensor, LSTMState | None]:
    """Segments sorted by length, padded per bucket, one ``nn.LSTM`` call per bucket.

    The final state is only exact at a segment's padded end, so with ``return_final_state`` this
    runs ``lstm_packed_sequence`` instead (training never needs the final state).
    """
    if return_final_state:
        return lstm_packed_sequence(lstm, x, starts, state, plan)
    _check(x, starts, state)
    plan = plan_segments(starts) if plan is None else plan
    t_len, n_env, feat = x.shape
    if plan.identity:  # no episode start inside the rollout: plain call, no copies
        keep = plan.keep.to(x.dtype).view(1, -1, 1)
        out, _ = lstm(x, (state[0] * keep, state[1] * keep))
        return out, None
    flat = x.reshape(t_len * n_env, feat)
    # Padding must be finite (zeros): padded steps are computed and their zero gradient is
    # multiplied through them in backward; garbage could turn into NaN.
    buf = flat.new_zeros(plan.padded_rows, feat).index_copy(0, plan.row, flat)
    hs, cs = _segment_state(state, plan, x.dtype)
    # split, not slicing: the backward of one split is one cat, while the backward of each slice
    # of a shared buffer would build a zero tensor of the whole buffer (once per bucket).
    rows = [length * count for _, length, count, _ in plan.buckets]
    counts = [count for _, _, count, _ in plan.buckets]
    outs = []
    for (_, length, count, _), xb, hb, cb in zip(
        plan.buckets, buf.split(rows), hs.split(counts, 1), cs.split(counts, 1)
    ):
        ob, _ = lstm(xb.view(length, count, feat), (hb, cb))
        outs.append(ob.reshape(length * count, -1))
    out = outs[0] if len(outs) == 1 else torch.cat(outs)
    return out.index_select(0, plan.row).view(t_len, n_env, -1), None


def run_lstm(
    lstm: nn.LSTM,
    x: torch.Tensor,
    starts: torch.Tensor,
    state: LSTMState,
    mode: str = "packed",
    plan: SegmentPlan | None = None,
    return_final_state: bool = False,
) -> tuple[torch.Tensor, LSTMState | None]:
    """Run ``lstm`` over ``x [T, B, F]`` with episode ``starts [T, B]`` in the given mode.

    Returns outputs ``[T, B, H]`` and the final state (``None`` unless asked for, in "packed").
    """
    if mode == "loop":
        return lstm_loop(lstm, x, starts, state)
    if mode == "packed":
        return lstm_packed(lstm, x, starts, state, plan, return_final_state)
    if mode == "packed_sequence":
        return lstm_packed_sequence(lstm, x, starts, state, plan)
    raise ValueError(f"unknown sequence mode {mode!r}; expected one of {SEQUENCE_MODES}")


# --------------------------------------------------------------------------------------------
# The actor-critic module
# --------------------------------------------------------------------------------------------


class SequenceOutput(NamedTuple):
    logits: torch.Tensor  # [T, B, A]
    values: torch.Tensor  # [T, B] (forward_sequence: in the return scale)
    state: LSTMState | None  # final (h, c) [num_layers, B, H] if asked for


class EvalOutput(NamedTuple):
    logprob: torch.Tensor  # [T, B]
    entropy: torch.Tensor  # [T, B]
    values: torch.Tensor  # [T, B] the head's output (normalized with value_norm)


class ActOutput(NamedTuple):
    action: torch.Tensor  # [n] int64
    logprob: torch.Tensor  # [n]
    value: torch.Tensor  # [n]
    logits: torch.Tensor  # [n, A]
    state: LSTMState  # the whole per-env store, rows env_ids updated


def _init_linear(layer: nn.Linear, std: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.zeros_(layer.bias)
    return layer


class RecurrentActorCritic(NormalizedActorCritic, nn.Module):
    """``torso -> nn.LSTM -> (actor logits, critic value)`` for discrete actions.

    ``torso`` defaults to ``make_torso(obs_shape)`` (NatureCNN for ``[C, 84, 84]``, MLP for
    ``[D]``); a custom torso must map ``[N, *obs_shape]`` to ``[N, torso.out_dim]``.
    ``sequence_mode`` picks how rollouts are run in training (see the module docstring); the
    ``call_cost`` / ``step_cost`` / ``max_buckets`` knobs tune the "packed" bucketing.

    ``obs_norm`` / ``value_norm``: as :class:`rapidrl.nets.actor_critic.ActorCritic` (see
    :class:`rapidrl.nets.normalize.NormalizedActorCritic`): uint8 frames normalized by
    ``obs_rms`` before the torso; the critic head predicts returns normalized by ``value_rms``.
    ``forward_sequence``, ``act`` and ``value`` return values in the return scale (for GAE),
    ``evaluate`` the head's output (what the loss compares with normalized returns).
    """

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        num_actions: int,
        *,
        hidden_size: int = 128,
        num_layers: int = 1,
        torso: nn.Module | None = None,
        sequence_mode: str = "packed",
        call_cost: float = BUCKET_CALL_COST,
        step_cost: float = BUCKET_STEP_COST,
        max_buckets: int | None = None,
        obs_norm: bool = False,
        value_norm: bool = False,
    ):
        super().__init__()
        if sequence_mode not in SEQUENCE_MODES:
            raise ValueError(f"unknown sequence_mode {sequence_mode!r}; one of {SEQUENCE_MODES}")
        self.obs_shape = tuple(obs_shape)
        self.init_normalizers(self.obs_shape, obs_norm=obs_norm, value_norm=value_norm)
        self.num_actions = num_actions
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.sequence_mode = sequence_mode
        self.call_cost, self.step_cost, self.max_buckets = call_cost, step_cost, max_buckets
        self.torso = make_torso(self.obs_shape) if torso is None else torso
        feat = int(self.torso.out_dim)
        self.lstm = nn.LSTM(feat, hidden_size, num_layers=num_layers)
        for name, p in self.lstm.named_parameters():  # CleanRL's init
            if "bias" in name:
                nn.init.zeros_(p)
            else:
                nn.init.orthogonal_(p, 1.0)
        self.actor = _init_linear(nn.Linear(hidden_size, num_actions), 0.01)
        self.critic = _init_linear(nn.Linear(hidden_size, 1), 1.0)

    # -- state ---------------------------------------------------------------------------------
    def initial_state(self, num_envs: int, device: torch.device | str | None = None) -> LSTMState:
        """Zero state store ``(h, c)``, each ``[num_layers, num_envs, H]``."""
        p = self.lstm.weight_hh_l0
        shape = (self.num_layers, num_envs, self.hidden_size)
        dev = p.device if device is None else device
        return torch.zeros(shape, dtype=p.dtype, device=dev), torch.zeros(
            shape, dtype=p.dtype, device=dev
        )

    def plan(self, starts: torch.Tensor) -> SegmentPlan:
        """The segment plan this module's bucketing settings would use for ``starts``."""
        return plan_segments(
            starts, call_cost=self.call_cost, step_cost=self.step_cost, max_buckets=self.max_buckets
        )

    # -- training ------------------------------------------------------------------------------
    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """Torso over ``[T, B, *obs_shape]`` in one batch (normalized first with ``obs_norm``)
        -> ``[T, B, F]``."""
        t_len, n_env = obs.shape[:2]
        x = self.normalize_obs(obs.reshape(t_len * n_env, *obs.shape[2:]))
        return self.torso(x).view(t_len, n_env, -1)

    def _heads(
        self,
        obs: torch.Tensor,
        starts: torch.Tensor,
        state: LSTMState,
        mode: str | None,
        plan: SegmentPlan | None,
        return_final_state: bool,
    ) -> SequenceOutput:
        """The sequence with the values as the critic head gives them (normalized with
        ``value_norm``)."""
        mode = self.sequence_mode if mode is None else mode
        if plan is None and mode != "loop":
            plan = self.plan(starts)
        x = self.features(obs)
        out, final = run_lstm(self.lstm, x, starts, state, mode, plan, return_final_state)
        return SequenceOutput(self.actor(out), self.critic(out).squeeze(-1), final)

    def forward_sequence(
        self,
        obs: torch.Tensor,
        starts: torch.Tensor,
        state: LSTMState,
        *,
        mode: str | None = None,
        plan: SegmentPlan | None = None,
        return_final_state: bool = False,
    ) -> SequenceOutput:
        """Logits ``[T, B, A]`` and values ``[T, B]`` (in the return scale) over a rollout (see
        module docstring)."""
        out = self._heads(obs, starts, state, mode, plan, return_final_state)
        return out._replace(values=self.value_out(out.values))

    def forward(self, *args, **kwargs) -> SequenceOutput:
        """Same as ``forward_sequence``."""
        return self.forward_sequence(*args, **kwargs)

    def evaluate(
        self,
        obs: torch.Tensor,
        starts: torch.Tensor,
        state: LSTMState,
        actions: torch.Tensor,
        *,
        mode: str | None = None,
        plan: SegmentPlan | None = None,
    ) -> EvalOutput:
        """What the PPO loss needs: log-prob of ``actions [T, B]``, entropy, values (the head's
        output: normalized with ``value_norm``)."""
        logits, values, _ = self._heads(obs, starts, state, mode, plan, False)
        return EvalOutput(categorical_logprob(logits, actions), categorical_entropy(logits), values)

    # -- acting --------------------------------------------------------------------------------
    def _lstm_step(
        self, x: torch.Tensor, hs: torch.Tensor, cs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of ``self.lstm`` through ``torch.lstm_cell`` (same weights, same math).

        A ``T = 1`` call of ``nn.LSTM`` goes through oneDNN on CPU and costs ~0.2 ms at batch 8
        vs ~0.06 ms here (one thread); the results agree to float rounding.
        """
        h_out, c_out = [], []
        for k in range(self.num_layers):
            h, c = torch.lstm_cell(
                x,
                (hs[k], cs[k]),
                getattr(self.lstm, f"weight_ih_l{k}"),
                getattr(self.lstm, f"weight_hh_l{k}"),
                getattr(self.lstm, f"bias_ih_l{k}"),
                getattr(self.lstm, f"bias_hh_l{k}"),
            )
            h_out.append(h)
            c_out.append(c)
            x = h
        return x, torch.stack(h_out), torch.stack(c_out)

    def act(
        self,
        obs: torch.Tensor,
        state: LSTMState,
        env_ids: torch.Tensor | None = None,
        episode_start: torch.Tensor | None = None,
        *,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> ActOutput:
        """One step for the envs ``env_ids`` (default: all, in order) of a per-env state store.

        ``obs [n, *obs_shape]``; ``state`` the whole store ``(h, c)`` ``[num_layers, N, H]``;
        ``episode_start [n]`` True where ``obs`` is an episode's first observation (its state is
        zeroed first). Returns the sampled (or, ``deterministic``, greedy) action, its log-prob,
        the value (in the return scale) and a new store with rows ``env_ids`` replaced (out of
        place: the old store stays valid, e.g. as the rollout's stored initial state). Call under
        ``torch.no_grad()``.
        """
        h, c = state
        n = obs.shape[0]
        if env_ids is None:
            if h.shape[1] != n:
                raise ValueError(f"act: {n} observations for a store of {h.shape[1]} envs")
            hs, cs = h, c
        else:
            env_ids = torch.as_tensor(env_ids, dtype=torch.long, device=h.device)
            hs, cs = h.index_select(1, env_ids), c.index_select(1, env_ids)
        if episode_start is not None:
            keep = (~torch.as_tensor(episode_start, device=h.device).to(torch.bool)).to(h.dtype)
            keep = keep.view(1, n, 1)
            hs, cs = hs * keep, cs * keep
        out, hn, cn = self._lstm_step(self.torso(self.normalize_obs(obs)), hs, cs)
        logits = self.actor(out)
        value = self.value_out(self.critic(out).squeeze(-1))
        if deterministic:
            action = logits.argmax(-1)
        else:
            probs = torch.softmax(logits.float(), -1)
            action = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        logprob = categorical_logprob(logits, action)
        if env_ids is None:
            new_state = (hn, cn)
        else:
            new_state = (h.index_copy(1, env_ids, hn), c.index_copy(1, env_ids, cn))
        return ActOutput(action, logprob, value, logits, new_state)

    def value(
        self, obs: torch.Tensor, state: LSTMState, env_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``V(obs)`` (return scale) for the envs ``env_ids`` continuing their stored state; the
        store is unchanged.

        For GAE's bootstrap of a time-limit end: with same-step autoreset, call
        ``value(infos["final_obs"][ids], store, ids)`` with the store *before* ``act`` consumes
        the new episode's first observation (the ended episode's state, no reset).
        """
        h, c = state
        if env_ids is not None:
            env_ids = torch.as_tensor(env_ids, dtype=torch.long, device=h.device)
            h, c = h.index_select(1, env_ids), c.index_select(1, env_ids)
        out, _, _ = self._lstm_step(self.torso(self.normalize_obs(obs)), h, c)
        return self.value_out(self.critic(out).squeeze(-1))
