"""The autotuner behind ``backend="auto"``: measure every way this machine can run ``num_envs``
envs (:func:`candidate_layouts`), keep the fastest in the autotune cache
(:mod:`rapidrl.vector.autotune_cache`), where :func:`rapidrl.vector.make_vec` finds it.

>>> from rapidrl.vector.autotune import autotune
>>> autotune("pong", 16)  # ~3 repeats x ~20 layouts x 3 s; then make_vec("pong", 16) uses it

``rapidrl bench envs --autotune`` runs the same measurements beside its baselines (gymnasium's
and ale_py's own vectorizers) and stores the same choice. Each measurement builds the vector env,
resets it, warms up, then steps it with random actions for ``seconds`` and counts the agent steps
that came back; repeats are interleaved (round robin over the layouts) so the slow drift of a
shared machine hits every layout alike, and the choice is the best median.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "AUTO_BACKENDS",
    "SPIN_S",
    "Layout",
    "autotune",
    "candidate_layouts",
    "fastest",
    "layout_record",
    "measure_layout",
    "save_choice",
    "step_until",
    "summarize",
    "timed",
]

SPIN_S = 0.002  # s: the polling window of the spin layouts (longer than one vector step here)
AUTO_BACKENDS = ("serial", "subprocess", "hybrid", "async", "ale", "envpool")
"""The backends ``backend="auto"`` may resolve to."""


@dataclass(frozen=True)
class Layout:
    """One way to run ``num_envs`` envs."""

    backend: str
    """rapidrl backend name (or, in ``rapidrl bench envs``, one of its baselines)."""
    num_envs: int
    num_workers: int = 1
    """Worker processes (1 for in-process backends; threads for the native vectorizers)."""
    batch_size: int | None = None
    """Envs returned per ``recv`` (``None``: all of them, synchronous)."""
    inline: bool = False
    """hybrid/async: the last of the ``num_workers`` groups runs in the calling process."""
    spin: float = 0.0
    """Process layouts: seconds waiting sides poll before blocking (``make_vec(spin=...)``)."""

    @property
    def name(self) -> str:
        if self.backend in ("serial", "gym-sync", "gym-async", "auto"):
            return self.backend
        s = f"{self.backend}[{self.num_workers}x{self.num_envs // max(self.num_workers, 1)}]"
        if self.backend in ("ale", "envpool", "ale-raw"):
            s = self.backend
        if self.backend == "ceiling":
            return f"ceiling[{self.num_workers} procs]"
        if self.inline:  # P groups, one of them in the caller: P-1 worker processes
            s = s[:-1] + ", 1 inline]"
        if self.batch_size is not None and self.batch_size < self.num_envs:
            s += f" b={self.batch_size}"
        if self.spin:
            s += " spin"
        return s

    @classmethod
    def of(cls, choice: dict[str, Any], num_envs: int) -> Layout:
        """The layout of an autotune choice or a measurement record."""
        return cls(
            choice["backend"],
            num_envs,
            1 if choice.get("num_workers") is None else choice["num_workers"],
            choice.get("batch_size"),
            inline=bool(choice.get("inline", False)),
            spin=float(choice.get("spin") or 0.0),
        )


def envpool_available() -> bool:
    try:
        import envpool  # noqa: F401
    except ImportError:
        return False
    return True


def envpool_hosts_mujoco(env_id: str) -> bool:
    """Whether the ``envpool`` backend runs ``env_id`` as a Gymnasium MuJoCo task."""
    from rapidrl.vector.api import LayoutError
    from rapidrl.vector.native import envpool_mujoco_task

    try:
        envpool_mujoco_task(env_id, None)
    except (LayoutError, ImportError):
        return False
    return True


def candidate_layouts(
    env_id: str, num_envs: int, backends: Sequence[str] | None = None, cpus: int | None = None
) -> list[Layout]:
    """Every rapidrl layout worth measuring for ``num_envs`` on a machine with ``cpus`` cores
    (default: this one's), only those of ``backends`` if given."""
    from rapidrl.envs import resolve_env

    cpus = cpus or os.cpu_count() or 1
    out: list[Layout] = [Layout("serial", num_envs)]
    # Process layouts: P workers x M envs, for each divisor P of N up to 2x the cores (more
    # processes than that only add context switches on a small machine).
    divisors = [p for p in range(1, num_envs + 1) if num_envs % p == 0 and p <= max(2 * cpus, 1)]
    for p in divisors:
        if p == num_envs:
            out.append(Layout("subprocess", num_envs, p))
        elif p > 1 or cpus == 1:
            out.append(Layout("hybrid", num_envs, p))
    # First-ready batches: half the envs per recv, whole worker groups.
    for p in divisors:
        m = num_envs // p
        half = num_envs // 2
        if p >= 2 and half % m == 0 and half >= m:
            out.append(Layout("async", num_envs, p, half))
    # One group in the caller: while the worker processes step, the caller's core steps envs
    # instead of waiting on pipes (P-1 processes + the caller, up to one group per core).
    for p in divisors:
        if 2 <= p <= cpus and p < num_envs:
            out.append(Layout("hybrid", num_envs, p, inline=True))
            m, half = num_envs // p, num_envs // 2
            if half % m == 0 and half >= m:
                out.append(Layout("async", num_envs, p, half, inline=True))
    # Polling instead of sleeping between steps (worker processes and the caller): pays off
    # only with a core for each of them.
    for lay in list(out):
        procs = lay.num_workers - lay.inline
        if lay.backend in ("hybrid", "async") and 1 <= procs and procs + 1 <= cpus:
            out.append(replace(lay, spin=SPIN_S))
    atari = resolve_env(env_id).is_atari
    if atari:
        out.append(Layout("ale", num_envs, 0))
        if num_envs >= 2:
            out.append(Layout("ale", num_envs, 0, num_envs // 2))
    if envpool_available() and (atari or envpool_hosts_mujoco(env_id)):
        out.append(Layout("envpool", num_envs, 0))
        if num_envs >= 2:
            out.append(Layout("envpool", num_envs, 0, num_envs // 2))
    if backends:
        out = [lay for lay in out if lay.backend in backends]
    return out


def layout_record(
    layout: Layout, steps: int | None, seconds: float, steps_per_s: float, frameskip: int,
    build_seconds: float | None,
) -> dict[str, Any]:  # fmt: skip
    """One measurement, as ``rapidrl bench envs`` and :func:`summarize` read it."""
    return {
        "layout": layout.name,
        **asdict(layout),
        "steps": steps,
        "seconds": seconds,
        "steps_per_s": steps_per_s,
        "frames_per_s": steps_per_s * frameskip,
        # Wall time of one vector step over all N envs: the classic scaling plot's y axis.
        "ms_per_vector_step": 1000.0 * layout.num_envs / steps_per_s,
        "build_seconds": build_seconds,
    }


def random_actions(space: Any, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` uniformly random actions of a single env's action space: ``Discrete`` (``[n]``
    int64) or a bounded ``Box`` (``[n, *shape]`` in its dtype, e.g. MuJoCo's torques)."""
    if hasattr(space, "n"):
        return rng.integers(0, int(space.n), size=n)
    low, high = np.broadcast_to(space.low, space.shape), np.broadcast_to(space.high, space.shape)
    return rng.uniform(low, high, size=(n, *space.shape)).astype(space.dtype)


def step_until(venv: Any, num_envs: int, rng: np.random.Generator, deadline: float) -> int:
    """Step every env of a synchronous vector env with random actions until ``deadline``
    (``time.perf_counter``); the agent steps taken."""
    space, steps = venv.single_action_space, 0
    while time.perf_counter() < deadline:
        venv.step(random_actions(space, rng, num_envs))
        steps += num_envs
    return steps


def timed(run: Callable[[float], int], seconds: float, warmup: float) -> tuple[int, float]:
    """``run(deadline)`` for ``warmup`` seconds, then for ``seconds``: (steps, elapsed)."""
    run(time.perf_counter() + warmup)
    t0 = time.perf_counter()
    steps = run(t0 + seconds)
    return steps, time.perf_counter() - t0


def measure_layout(
    env_id: str, layout: Layout, seconds: float, warmup: float = 1.0, seed: int = 0
) -> dict[str, Any]:
    """Agent steps/s of one rapidrl layout (or ``auto``): random actions, ``seconds`` of
    stepping after ``warmup``, stepped as a trainer steps it (``step`` when synchronous, else
    ``send`` to the envs of the last ``recv``)."""
    from rapidrl.envs import resolve_env
    from rapidrl.vector.make import make_vec

    frameskip = 4 if resolve_env(env_id).is_atari else 1
    rng = np.random.default_rng(seed)
    t_build = time.perf_counter()
    kwargs: dict[str, Any] = {}
    if layout.backend in ("subprocess", "hybrid", "async"):
        kwargs["num_workers"] = layout.num_workers
    if layout.batch_size is not None:
        kwargs["batch_size"] = layout.batch_size
    if layout.inline:
        kwargs["inline"] = True
    if layout.spin:
        kwargs["spin"] = layout.spin
    venv = make_vec(env_id, layout.num_envs, backend=layout.backend, **kwargs)
    try:
        space = venv.single_action_space
        venv.reset(seed=seed)
        build_s = time.perf_counter() - t_build
        ids = np.arange(layout.num_envs)
        synchronous = venv.batch_size == venv.num_envs

        def run(deadline: float) -> int:
            nonlocal ids
            if synchronous:
                return step_until(venv, layout.num_envs, rng, deadline)
            steps = 0
            while time.perf_counter() < deadline:  # first-ready batches: send to the last ids
                venv.send(random_actions(space, rng, len(ids)), ids)
                *_, ids = venv.recv()
                steps += len(ids)
            return steps

        steps, elapsed = timed(run, seconds, warmup)
    finally:
        venv.close()
    return layout_record(layout, steps, elapsed, steps / elapsed, frameskip, build_s)


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median and spread of steps/s per (layout, num_envs), fastest first within each N."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in records:
        groups.setdefault((r["layout"], r["num_envs"]), []).append(r)
    rows = []
    for (name, n), recs in groups.items():
        sps = [r["steps_per_s"] for r in recs]
        rows.append(
            {
                "layout": name,
                "backend": recs[0]["backend"],
                "num_envs": n,
                "num_workers": recs[0]["num_workers"],
                "batch_size": recs[0]["batch_size"],
                "inline": recs[0].get("inline", False),
                "spin": recs[0].get("spin", 0.0),
                "steps_per_s": statistics.median(sps),
                "min": min(sps),
                "max": max(sps),
                "frames_per_s": statistics.median(r["frames_per_s"] for r in recs),
                "ms_per_vector_step": statistics.median(r["ms_per_vector_step"] for r in recs),
                "repeats": len(recs),
            }
        )
    rows.sort(key=lambda r: (r["num_envs"], -r["steps_per_s"]))
    return rows


def fastest(
    rows: list[dict[str, Any]], num_envs: int, backends: Sequence[str] = AUTO_BACKENDS
) -> dict[str, Any] | None:
    """The summary row of the fastest layout of ``backends`` for ``num_envs``, or None."""
    cands = [r for r in rows if r["num_envs"] == num_envs and r["backend"] in backends]
    return max(cands, key=lambda r: r["steps_per_s"]) if cands else None


def save_choice(env_id: str, row: dict[str, Any], path: str | Path | None = None) -> Path | None:
    """Store a summary row's layout as ``backend="auto"``'s choice for its env and N (the
    cache file's path, or None with a warning when it cannot be written)."""
    from rapidrl.vector.autotune_cache import canonical_env_id, save_autotune

    keys = ("backend", "num_workers", "batch_size", "inline", "spin")
    choice = {k: row.get(k) for k in keys}
    return save_autotune(
        canonical_env_id(env_id), row["num_envs"], choice, steps_per_s=row["steps_per_s"],
        path=path,
    )  # fmt: skip


def autotune(
    env_id: str,
    num_envs: int,
    *,
    seconds: float = 3.0,
    repeats: int = 3,
    backends: Sequence[str] | None = None,
    save: bool = True,
    path: str | Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure every candidate layout ``repeats`` times (interleaved), store the fastest as the
    ``backend="auto"`` choice for this machine, ``env_id`` and ``num_envs`` (unless ``save`` is
    False) and return ``{"best": row, "rows": summary rows, "path": cache file or None}``.

    A layout that cannot run here (e.g. a native backend missing) is logged and left out; if
    none runs, a RuntimeError says so."""
    plan = candidate_layouts(env_id, num_envs, backends)
    records = []
    for rep in range(repeats):
        for lay in plan:
            try:
                rec = measure_layout(env_id, lay, seconds, seed=rep)
            except Exception as exc:  # a backend that cannot run here is reported, not fatal
                log(f"  {lay.name:<24} FAILED: {type(exc).__name__}: {exc}")
                continue
            records.append(rec)
            log(f"  [{rep + 1}/{repeats}] {lay.name:<24} {rec['steps_per_s']:8.0f} steps/s")
    rows = summarize(records)
    best = fastest(rows, num_envs)
    if best is None:
        raise RuntimeError(f"autotune: no layout of {num_envs} {env_id!r} envs ran on this machine")
    where = save_choice(env_id, best, path) if save else None
    log(f"autotune {env_id} N={num_envs}: {best['layout']} ({best['steps_per_s']:.0f} steps/s)")
    return {"best": best, "rows": rows, "path": where}
