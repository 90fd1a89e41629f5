"""``python benchmarks/lstm_phase.py``: PPO-LSTM's sequences, the step-by-step loop against packed
segments (and a JAX scan where jax is installed: ``pip install 'jax[cpu]'``).

Two scopes:

- ``"core"``: the recurrent part alone. ``nn.LSTM(512 -> 128)`` over precomputed torso features
  ``[T, B, 512]`` (``requires_grad``), forward + backward of a fixed random projection of the
  outputs. The segment plan is built inside the timed region (training builds one per minibatch).
- ``"train"``: the whole PPO update phase in the classic shape: Nature CNN -> LSTM(512 -> 128) on
  uint8 ``[4, 84, 84]`` observations, 4 epochs x 4 minibatches of whole env sequences, Adam,
  gradient clipping 0.5, the real PPO loss (``rapidrl.algos.ppo.losses.ppo_loss``).

Modes: ``loop`` (reference), ``packed`` (bucketed padding, the default of
``RecurrentActorCritic``), ``pad_single`` (all segments padded to the longest, one call: the
classic trick), ``packed_sequence`` (``PackedSequence`` built from index math), ``jax`` (core
only: ``jax.lax.scan`` LSTM, skipped when jax is not importable; its compile time is reported
apart in ``compile_seconds``).

Episode starts are sampled i.i.d. per step with the probability that makes the mean segment
length (rollout length / segments) equal ``mean_segment``; ``mean_segment >= T`` means none.

Memory (``peak_mem_mb``): the peak number of bytes held by torch's CPU allocator during one run
(one forward+backward, or one whole update phase), above what was held when it started. Read from
the allocation/free events of ``torch.profiler`` (``profile_memory=True``) in a separate, untimed
run. It counts every tensor: autograd's saved activations, oneDNN workspaces, gradients, padded
copies. It does not count allocator caching, fragmentation or mallocs outside torch's allocator
(and nothing of JAX: ``None`` there). Process RSS is not used: after the first iteration glibc keeps
freed memory, so RSS high-water marks mostly show the first iteration and the torch import.

Timing: one untimed warm-up run, then ``repeats`` timed runs; ``seconds`` is the median,
``spread`` ``[min, max]``. ``speedup`` = loop seconds / mode seconds and ``mem_ratio`` = mode
peak / loop peak, both from the same invocation.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from rapidrl.algos.ppo.losses import ppo_loss
from rapidrl.config import ConfigError, parse_or_report
from rapidrl.nets.recurrent import RecurrentActorCritic, plan_segments, run_lstm
from rapidrl.nets.torso import resolve_precision, use_channels_last, use_precision

__all__ = ["LstmPhaseConfig", "main", "run_lstm_bench", "sample_starts"]

PROG = "python benchmarks/lstm_phase.py"

ALL_MODES = ("loop", "packed", "pad_single", "packed_sequence", "jax")
FEATURES, HIDDEN, NUM_ACTIONS = 512, 128, 6
EPOCHS, MINIBATCHES = 4, 4


def sample_starts(
    num_steps: int, num_envs: int, mean_segment: float, generator: torch.Generator
) -> torch.Tensor:
    """Episode-start flags ``[T, B]`` whose segments have mean length ``mean_segment``.

    With start probability ``p`` per step an env has ``1 + (T - 1) p`` segments on average
    (``t = 0`` always opens one), so ``p = (T / mean_segment - 1) / (T - 1)``.
    """
    if mean_segment >= num_steps or num_steps == 1:
        return torch.zeros(num_steps, num_envs, dtype=torch.bool)
    p = (num_steps / mean_segment - 1.0) / (num_steps - 1)
    return torch.rand(num_steps, num_envs, generator=generator) < p


def peak_allocated_mb(fn: Callable[[], object]) -> float | None:
    """Peak MiB held by torch's CPU allocator while ``fn`` runs, above the level at its start."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
        events = prof.profiler.kineto_results.events()
        mem = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    except Exception as exc:  # a private profiler API: degrade to "unknown", never crash
        print(f"lstm_phase: memory profile unavailable ({exc!r})", file=sys.stderr)
        return None
    cur = peak = 0
    for _, nbytes in mem:
        cur += nbytes
        peak = max(peak, cur)
    return peak / 2**20


_NOTED: set[str] = set()


def _note(msg: str) -> None:
    """Print a notice to stderr once per process."""
    if msg not in _NOTED:
        _NOTED.add(msg)
        print(msg, file=sys.stderr)


def _time(fn: Callable[[], object], repeats: int) -> tuple[float, float, float, object]:
    """Median, min, max seconds of ``repeats`` timed calls after one warm-up call (returned)."""
    first = fn()  # warm-up: oneDNN primitives, allocator, lazy init
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), max(times), first


# ---------------------------------------------------------------------------------------------
# scope = "core"
# ---------------------------------------------------------------------------------------------


def _core_torch(mode, lstm, x, starts, state, grad_out):
    torch_mode = "packed" if mode == "pad_single" else mode

    def run():
        x.grad = None
        for p in lstm.parameters():
            p.grad = None
        plan = None
        if mode == "pad_single":
            plan = plan_segments(starts, max_buckets=1)
        elif mode != "loop":
            plan = plan_segments(starts)
        out, _ = run_lstm(lstm, x, starts, state, torch_mode, plan)
        out.backward(grad_out)
        return out

    return run


def _jax_available() -> bool:
    try:
        import jax  # noqa: F401
    except Exception:
        return False
    return True


def _core_jax(lstm, x, starts, state, grad_out, repeats):
    """The same computation as a jitted ``lax.scan`` (input projection hoisted out of the scan)."""
    import jax
    import jax.numpy as jnp

    to = lambda t: jnp.asarray(t.detach().cpu().numpy())  # noqa: E731
    params = (to(lstm.weight_ih_l0), to(lstm.weight_hh_l0), to(lstm.bias_ih_l0 + lstm.bias_hh_l0))
    xs, g = to(x), to(grad_out)
    keep = to((~starts).to(x.dtype).unsqueeze(-1))
    h0, c0 = to(state[0][0]), to(state[1][0])

    def loss(p, inp):
        w_ih, w_hh, b = p

        def cell(carry, step_in):
            h, c = carry
            gx, k = step_in
            h, c = h * k, c * k
            i, f, gg, o = jnp.split(gx + h @ w_hh.T, 4, axis=-1)  # PyTorch gate order
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(gg)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        _, hs = jax.lax.scan(cell, (h0, c0), (inp @ w_ih.T + b, keep))
        return jnp.sum(hs * g), hs

    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))
    t0 = time.perf_counter()
    compiled = step.lower(params, xs).compile()
    compile_seconds = time.perf_counter() - t0

    def run():
        (_, hs), grads = compiled(params, xs)
        jax.block_until_ready(grads)
        return hs

    med, lo, hi, hs = _time(run, repeats)
    return med, lo, hi, compile_seconds, torch.from_numpy(jax.device_get(hs).copy())


def _bench_core(num_envs, num_steps, mean_segment, modes, repeats, seed, measure_memory):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    lstm = nn.LSTM(FEATURES, HIDDEN)
    x = torch.randn(num_steps, num_envs, FEATURES, generator=g).requires_grad_()
    state = tuple(0.1 * torch.randn(1, num_envs, HIDDEN, generator=g) for _ in range(2))
    grad_out = torch.randn(num_steps, num_envs, HIDDEN, generator=g)
    starts = sample_starts(num_steps, num_envs, mean_segment, g)
    ref = run_lstm(lstm, x, starts, state, "loop")[0].detach()  # grad mode, like the timed runs
    rows = []
    for mode in modes:
        row = {}
        if mode == "jax":
            if not _jax_available():
                _note("lstm_phase: jax not importable: skipping mode 'jax'")
                continue
            med, lo, hi, compile_s, out = _core_jax(lstm, x, starts, state, grad_out, repeats)
            row.update(compile_seconds=compile_s, peak_mem_mb=None)
        else:
            run = _core_torch(mode, lstm, x, starts, state, grad_out)
            med, lo, hi, out = _time(run, repeats)
            row["peak_mem_mb"] = peak_allocated_mb(run) if measure_memory else None
            if mode in ("packed", "pad_single"):
                plan = plan_segments(starts, max_buckets=1 if mode == "pad_single" else None)
                row.update(buckets=len(plan.buckets), padding_eff=plan.padding_efficiency)
        row.update(
            mode=mode,
            seconds=med,
            spread=[lo, hi],
            max_abs_err=float((out.detach() - ref).abs().max()),
        )
        rows.append(row)
    return rows, starts


# ---------------------------------------------------------------------------------------------
# scope = "train"
# ---------------------------------------------------------------------------------------------


def _make_optimizer(params):
    try:
        return torch.optim.Adam(params, lr=2.5e-4, eps=1e-5, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, lr=2.5e-4, eps=1e-5)


def _bench_train(
    num_envs,
    num_steps,
    mean_segment,
    modes,
    repeats,
    seed,
    measure_memory,
    channels_last=False,
    precision="fp32",
):
    if num_envs % MINIBATCHES:
        raise ValueError(f"train scope: num_envs {num_envs} not divisible by {MINIBATCHES}")
    g = torch.Generator().manual_seed(seed)
    obs = torch.randint(0, 256, (num_steps, num_envs, 4, 84, 84), dtype=torch.uint8, generator=g)
    starts = sample_starts(num_steps, num_envs, mean_segment, g)
    actions = torch.randint(0, NUM_ACTIONS, (num_steps, num_envs), generator=g)
    state = tuple(0.1 * torch.randn(1, num_envs, HIDDEN, generator=g) for _ in range(2))
    torch.manual_seed(seed)
    base = RecurrentActorCritic((4, 84, 84), NUM_ACTIONS, hidden_size=HIDDEN)
    per_mb = num_envs // MINIBATCHES
    with torch.no_grad():  # the rollout's log-probs and values, one minibatch of envs at a time
        parts = [
            base.evaluate(
                obs[:, sl], starts[:, sl], (state[0][:, sl], state[1][:, sl]), actions[:, sl]
            )
            for sl in (slice(k, k + per_mb) for k in range(0, num_envs, per_mb))
        ]
    old_logprob = torch.cat([p.logprob for p in parts], 1)
    old_values = torch.cat([p.values for p in parts], 1)
    advantages = torch.randn(num_steps, num_envs, generator=g)
    returns = old_values + advantages
    rows = []
    for mode in modes:
        if mode == "jax":
            _note("lstm_phase: mode 'jax' is measured in the core scope only")
            continue
        model = RecurrentActorCritic((4, 84, 84), NUM_ACTIONS, hidden_size=HIDDEN)
        model.load_state_dict(base.state_dict())
        if channels_last:  # the same layout for every mode: the trainer's default on Atari
            use_channels_last(model.torso)
        use_precision(model, resolve_precision(precision, "cpu"))  # the CNN only, every mode
        if mode == "pad_single":
            model.max_buckets = 1
        model.sequence_mode = "packed" if mode == "pad_single" else mode
        opt = _make_optimizer(model.parameters())
        perm_gen = torch.Generator().manual_seed(seed + 1)

        def update(model=model, opt=opt, perm_gen=perm_gen):
            for _ in range(EPOCHS):
                perm = torch.randperm(num_envs, generator=perm_gen)
                for k in range(MINIBATCHES):
                    idx = perm[k * per_mb : (k + 1) * per_mb]
                    mb_state = (state[0][:, idx], state[1][:, idx])
                    new = model.evaluate(obs[:, idx], starts[:, idx], mb_state, actions[:, idx])
                    losses = ppo_loss(
                        new.logprob,
                        old_logprob[:, idx],
                        advantages[:, idx],
                        new.values,
                        old_values[:, idx],
                        returns[:, idx],
                        new.entropy,
                        clip_coef=0.1,
                    )
                    opt.zero_grad(set_to_none=True)
                    losses["loss"].backward()
                    nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                    opt.step()

        med, lo, hi, _ = _time(update, repeats)
        peak = peak_allocated_mb(update) if measure_memory else None
        rows.append(dict(mode=mode, seconds=med, spread=[lo, hi], peak_mem_mb=peak))
    return rows, starts


# ---------------------------------------------------------------------------------------------
# Driver, table, plot, CLI
# ---------------------------------------------------------------------------------------------


def run_lstm_bench(
    sizes: Sequence[tuple[int, int]] = ((8, 128), (64, 128)),
    mean_segments: Sequence[float] = (5, 20, 128),
    modes: Sequence[str] = ("loop", "packed", "jax"),
    repeats: int = 3,
    scope: Sequence[str] | str = ("core", "train"),
    *,
    seed: int = 0,
    threads: int | None = None,
    measure_memory: bool = True,
    verbose: bool = True,
    channels_last: bool = False,
    precision: str = "fp32",
) -> list[dict]:
    """Run the benchmark grid and return one record per (scope, size, mean segment, mode).

    ``sizes`` are ``(num_envs, num_steps)``. Each record has: ``scope, mode, num_envs,
    num_steps, mean_segment, realized_mean_segment, seconds, spread, peak_mem_mb, speedup,
    mem_ratio`` (the last two vs "loop" in the same grid cell; ``None`` without "loop"), plus
    ``compile_seconds`` (jax), ``buckets`` / ``padding_eff`` / ``max_abs_err`` (core) and the
    environment (``threads``, ``torch``).
    """
    scopes = (scope,) if isinstance(scope, str) else tuple(scope)
    for s in scopes:
        if s not in ("core", "train"):
            raise ValueError(f"unknown scope {s!r}; expected 'core' or 'train'")
    for m in modes:
        if m not in ALL_MODES:
            raise ValueError(f"unknown mode {m!r}; expected one of {ALL_MODES}")
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    if threads is not None:
        torch.set_num_threads(threads)
    records = []
    for sc in scopes:
        for num_envs, num_steps in sizes:
            for mean_seg in mean_segments:
                args = (num_envs, num_steps, mean_seg, tuple(modes), repeats, seed, measure_memory)
                if sc == "core":
                    rows, starts = _bench_core(*args)
                else:
                    rows, starts = _bench_train(
                        *args, channels_last=channels_last, precision=precision
                    )
                segments = int(starts[1:].sum()) + num_envs
                loop = next((r for r in rows if r["mode"] == "loop"), None)
                for r in rows:
                    rec = dict(
                        scope=sc,
                        mode=r.pop("mode"),
                        num_envs=num_envs,
                        num_steps=num_steps,
                        mean_segment=mean_seg,
                        channels_last=bool(channels_last and sc == "train"),
                        precision=precision if sc == "train" else "fp32",
                        realized_mean_segment=num_steps * num_envs / segments,
                        **r,
                    )
                    rec["speedup"] = loop["seconds"] / rec["seconds"] if loop else None
                    lp, mp = (loop or {}).get("peak_mem_mb"), rec.get("peak_mem_mb")
                    rec["mem_ratio"] = mp / lp if lp and mp is not None else None
                    rec.update(threads=torch.get_num_threads(), torch=torch.__version__)
                    records.append(rec)
                    if verbose:
                        print(format_row(rec), file=sys.stderr, flush=True)
    return records


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


COLUMNS = (
    ("scope", "<5", "scope"),
    ("B", ">3", "num_envs"),
    ("T", ">4", "num_steps"),
    ("seg", ">5", "mean_segment"),
    ("mode", "<15", "mode"),
    ("seconds", ">9.4f", "seconds"),
    ("min", ">8.4f", None),
    ("max", ">8.4f", None),
    ("speedup", ">7.2f", "speedup"),
    ("peak MB", ">8.1f", "peak_mem_mb"),
    ("mem x", ">6.2f", "mem_ratio"),
    ("compile s", ">9.3f", "compile_seconds"),
)


def format_row(rec: dict) -> str:
    cells = []
    for title, spec, key in COLUMNS:
        if title == "min":
            v = rec["spread"][0]
        elif title == "max":
            v = rec["spread"][1]
        else:
            v = rec.get(key)
        width = spec.lstrip("<>").split(".")[0]
        cells.append(_fmt(v, spec) if v is not None else format("-", ">" + width))
    return " ".join(cells)


def format_table(records: Sequence[dict]) -> str:
    head = []
    for title, spec, _ in COLUMNS:
        width = int(spec.lstrip("<>").split(".")[0])
        head.append(format(title, ("<" if spec.startswith("<") else ">") + str(width)))
    lines = [" ".join(head)]
    lines += [format_row(r) for r in records]
    return "\n".join(lines)


def plot(records: Sequence[dict], path: str) -> None:
    """Per (scope, size): seconds (log scale, speedups vs loop on the bars) and peak MB below,
    one bar per mode, grouped by mean segment length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["scope"], r["num_envs"], r["num_steps"]) for r in records})
    modes = [m for m in ALL_MODES if any(r["mode"] == m for r in records)]
    color = {m: f"C{i}" for i, m in enumerate(ALL_MODES)}
    cols = min(2, len(panels)) or 1
    nrows = math.ceil(len(panels) / cols) or 1
    fig, axes = plt.subplots(2 * nrows, cols, figsize=(6 * cols, 6.4 * nrows), squeeze=False)
    width = 0.8 / max(len(modes), 1)
    by_key = {(r["scope"], r["num_envs"], r["num_steps"], r["mean_segment"], r["mode"]): r
              for r in records}  # fmt: skip
    for p, (sc, b, t) in enumerate(panels):
        ax_t = axes[2 * (p // cols), p % cols]
        ax_m = axes[2 * (p // cols) + 1, p % cols]
        segs = sorted({k[3] for k in by_key if k[:3] == (sc, b, t)})
        for j, m in enumerate(modes):
            xs, recs = [], []
            for i, s in enumerate(segs):
                if (sc, b, t, s, m) in by_key:
                    xs.append(i + (j - (len(modes) - 1) / 2) * width)
                    recs.append(by_key[(sc, b, t, s, m)])
            if not recs:
                continue
            ax_t.bar(xs, [r["seconds"] for r in recs], width, label=m, color=color[m])
            for x_, r in zip(xs, recs):
                if r.get("speedup") and m != "loop":
                    ax_t.annotate(f"{r['speedup']:.1f}x", (x_, r["seconds"]), ha="center",
                                  va="bottom", fontsize=7)  # fmt: skip
            mem = [(x_, r["peak_mem_mb"]) for x_, r in zip(xs, recs) if r.get("peak_mem_mb")]
            if mem:
                ax_m.bar([x_ for x_, _ in mem], [v for _, v in mem], width, label=m, color=color[m])
        labels = [f"seg {s:g}" + (" (none)" if s >= t else "") for s in segs]
        for ax in (ax_t, ax_m):
            ax.set_xticks(range(len(segs)))
            ax.set_xticklabels(labels)
        ax_t.set_yscale("log")
        ax_t.set_ylabel("seconds (median)")
        ax_t.set_title(f"{sc}: B={b}, T={t}")
        ax_t.legend(fontsize=7)
        ax_m.set_ylabel("peak MB (torch allocator)")
    for p in range(len(panels), nrows * cols):
        axes[2 * (p // cols), p % cols].axis("off")
        axes[2 * (p // cols) + 1, p % cols].axis("off")
    threads = ",".join(str(n) for n in sorted({r.get("threads") for r in records} - {None}))
    fig.suptitle(f"PPO-LSTM sequences, torch {torch.__version__}, {threads} thread(s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _number(text: str) -> float | int:
    v = float(text)
    return int(v) if v.is_integer() else v


def _items(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


@dataclass(frozen=True)
class LstmPhaseConfig:
    """PPO-LSTM's sequences: seconds (and peak memory) of the recurrent core alone and of the
    whole PPO update phase, the step-by-step loop against packed segments, one table."""

    sizes: str = "8x128,64x128"
    """Comma list of rollout shapes NUM_ENVSxNUM_STEPS, e.g. 8x128,64x128."""
    mean_segments: str = "5,20,128"
    """Comma list of mean episode-segment lengths (>= 1; one >= NUM_STEPS: no episode starts)."""
    modes: str = "loop,packed,jax"
    """Comma list of modes: loop, packed, pad_single, packed_sequence, jax (jax: core scope
    only; skipped with a note where jax is not installed)."""
    scope: str = "core,train"
    """core (the LSTM alone), train (the whole PPO update phase) or core,train."""
    repeats: int = 3
    """Timed runs per measurement, after one untimed warm-up; the table shows the median."""
    threads: int | None = None
    """Torch threads (default: torch's)."""
    seed: int = 0
    """Seed of the data, the weights and the minibatch order."""
    channels_last: bool = False
    """Train scope: a channels-last CNN in every mode."""
    precision: Literal["fp32", "bf16", "auto"] = "fp32"
    """Train scope: the CNN's compute dtype in every mode (bf16, auto: as in rapidrl train)."""
    memory: bool = True
    """Measure each mode's peak memory in one more, untimed run (--no-memory skips it)."""
    json: str | None = None
    """Write the records to this JSON file."""
    png: str | None = None
    """Write the plot (seconds and peak memory per mode) to this PNG file."""

    def size_list(self) -> list[tuple[int, int]]:
        out = []
        for item in _items(self.sizes):
            try:
                b, t = (int(x) for x in item.lower().split("x"))
            except ValueError:
                b = t = 0
            if b < 1 or t < 1:
                raise ConfigError(
                    f"--sizes needs NUM_ENVSxNUM_STEPS pairs of ints >= 1 like 8x128,64x128, "
                    f"got {item!r}"
                )
            out.append((b, t))
        if not out:
            raise ConfigError("--sizes needs at least one NUM_ENVSxNUM_STEPS, e.g. 8x128")
        return out

    def mean_segment_list(self) -> list[float | int]:
        try:
            out = [_number(x) for x in _items(self.mean_segments)]
        except ValueError:
            out = []
        if not out or min(out) < 1 or any(math.isnan(x) for x in out):
            raise ConfigError(
                f"--mean-segments needs numbers >= 1 like 5,20,128, got {self.mean_segments!r}"
            )
        return out

    def mode_list(self) -> list[str]:
        out = _items(self.modes)
        unknown = [m for m in out if m not in ALL_MODES]
        if not out or unknown:
            what = f"unknown {', '.join(unknown)}" if unknown else "no mode given"
            raise ConfigError(f"--modes: {what}; choose from {', '.join(ALL_MODES)}")
        return out

    def scope_list(self) -> list[str]:
        out = _items(self.scope)
        if not out or set(out) - {"core", "train"}:
            raise ConfigError(f"--scope must be core, train or core,train, got {self.scope!r}")
        return out

    def validate(self) -> None:
        sizes = self.size_list()
        self.mean_segment_list()
        self.mode_list()
        if "train" in self.scope_list():
            odd = [f"{b}x{t}" for b, t in sizes if b % MINIBATCHES]
            if odd:
                raise ConfigError(
                    f"--sizes: the train scope splits the envs into {MINIBATCHES} minibatches; "
                    f"NUM_ENVS of {', '.join(odd)} is not a multiple of {MINIBATCHES}"
                )
        if self.repeats < 1:
            raise ConfigError(f"--repeats must be >= 1, got {self.repeats}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"--threads must be >= 1 (or None: torch's), got {self.threads}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python benchmarks/lstm_phase.py``: table on stdout, optional ``--json`` list and
    ``--png`` plot; 2 on bad input (the message, no traceback)."""
    cfg = parse_or_report(LstmPhaseConfig, sys.argv[1:] if argv is None else argv, PROG, __doc__)
    if cfg is None:
        return 2
    records = run_lstm_bench(
        sizes=cfg.size_list(),
        mean_segments=cfg.mean_segment_list(),
        modes=cfg.mode_list(),
        repeats=cfg.repeats,
        scope=cfg.scope_list(),
        seed=cfg.seed,
        threads=cfg.threads,
        measure_memory=cfg.memory,
        channels_last=cfg.channels_last,
        precision=cfg.precision,
    )
    print(format_table(records))
    if cfg.json:
        with open(cfg.json, "w") as f:
            json.dump(records, f, indent=1)
    if cfg.png:
        plot(records, cfg.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
