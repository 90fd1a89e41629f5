"""``rapidrl bench envs``: agent steps/s of every vector backend and layout against the baselines
a user would otherwise run, and ``--autotune`` (:mod:`rapidrl.vector.autotune`).

The layouts and their measurement are the autotuner's; the baselines, measured in the same run
and interleaved with them: gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` (shared memory)
over gymnasium's own Atari preprocessing (``AtariPreprocessing`` + ``FrameStackObservation``,
the same DQN protocol), ale_py's ``AtariVectorEnv`` through its own API (``ale-raw``), and the
machine's ceiling (one bare env loop per core, no vectorization). The table reports the median
and the spread of the repeats.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rapidrl.vector.autotune import (
    AUTO_BACKENDS,
    Layout,
    candidate_layouts,
    fastest,
    layout_record,
    measure_layout,
    random_actions,
    save_choice,
    step_until,
    summarize,
    timed,
)

PYTHON_BACKENDS = ("serial", "subprocess", "hybrid", "async")
BASELINES = ("ale-raw", "ceiling", "gym-sync", "gym-async")


def bench_layouts(
    env_id: str, num_envs: int, backends: tuple[str, ...] | None = None, cpus: int | None = None
) -> list[Layout]:
    """The autotuner's candidate layouts, then the baselines (``backends`` filters both)."""
    from rapidrl.envs import resolve_env

    cpus = cpus or os.cpu_count() or 1
    out = candidate_layouts(env_id, num_envs, cpus=cpus)
    if resolve_env(env_id).is_atari:
        # ale_py's AtariVectorEnv driven through its own API (sync, and its own async
        # send/recv): the C++ reference, without our adapter.
        out.append(Layout("ale-raw", num_envs, 0))
        if num_envs >= 2:
            out.append(Layout("ale-raw", num_envs, 0, num_envs // 2))
        # The machine's ceiling: one bare env loop per core, no vectorization at all.
        out.append(Layout("ceiling", num_envs, min(cpus, num_envs)))
    out.append(Layout("gym-sync", num_envs))
    if num_envs >= 2:
        out.append(Layout("gym-async", num_envs, num_envs))
    if backends:
        out = [lay for lay in out if lay.backend in backends]
    return out


def _gym_baseline(env_id: str, num_envs: int, asynchronous: bool):
    """gymnasium's own vectorizer and preprocessing: the baseline a user would write."""
    import gymnasium as gym

    from rapidrl.envs import resolve_env

    info = resolve_env(env_id)

    def make():
        if info.is_atari:
            import ale_py

            gym.register_envs(ale_py)
            env = gym.make(
                info.gym_id, frameskip=1, repeat_action_probability=0.0, full_action_space=False
            )
            env = gym.wrappers.AtariPreprocessing(
                env,
                noop_max=30,
                frame_skip=4,
                screen_size=84,
                terminal_on_life_loss=True,
                grayscale_obs=True,
                scale_obs=False,
            )
            env = gym.wrappers.FrameStackObservation(env, 4)
            return env
        return gym.make(info.gym_id)

    fns = [make for _ in range(num_envs)]
    if asynchronous:
        return gym.vector.AsyncVectorEnv(fns, shared_memory=True)
    return gym.vector.SyncVectorEnv(fns)


def _bare_loop(env_id: str, seconds: float, warmup: float, seed: int, out) -> None:
    """One env stepped with random actions in a plain loop (a ``ceiling`` process)."""
    from rapidrl.envs import make_env

    env = make_env(env_id)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)

    def run(deadline: float) -> int:
        steps = 0
        while time.perf_counter() < deadline:
            action = random_actions(env.action_space, rng, 1)[0]
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
            steps += 1
        return steps

    run(time.perf_counter() + warmup)
    t0 = time.perf_counter()
    steps = run(t0 + seconds)
    out.put((steps, time.perf_counter() - t0))


def _measure_ceiling(env_id: str, layout: Layout, seconds: float, warmup: float, seed: int):
    """Total steps/s of ``num_workers`` independent bare env loops in parallel processes."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_bare_loop, args=(env_id, seconds, warmup, seed + k, out), daemon=True)
        for k in range(layout.num_workers)
    ]
    for p in procs:
        p.start()
    try:
        # Each process reports once; the bound covers start-up + warm-up + the run itself.
        results = [out.get(timeout=seconds + warmup + 120) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return sum(s / el for s, el in results)


def ale_raw(env_id: str, num_envs: int, batch_size: int | None = None, num_threads: int = 0):
    """ale_py's AtariVectorEnv with the DQN protocol options, used through its own API
    (``num_threads=0``: ale_py's default)."""
    from ale_py import AtariVectorEnv

    from rapidrl.envs import resolve_env

    return AtariVectorEnv(
        resolve_env(env_id).game,
        num_envs,
        batch_size=batch_size or 0,
        num_threads=num_threads,
        noop_max=30,
        frameskip=4,
        stack_num=4,
        img_height=84,
        img_width=84,
        grayscale=True,
        maxpool=True,
        episodic_life=True,
        use_fire_reset=True,
        reward_clipping=True,
        repeat_action_probability=0.0,
        max_num_frames_per_episode=108_000,
    )


def measure(
    env_id: str, layout: Layout, seconds: float, warmup: float = 1.0, seed: int = 0
) -> dict[str, Any]:
    """Steps/s of one layout or baseline: random actions, ``seconds`` of stepping after
    ``warmup``."""
    from rapidrl.envs import resolve_env

    frameskip = 4 if resolve_env(env_id).is_atari else 1
    rng = np.random.default_rng(seed)
    t_build = time.perf_counter()
    if layout.backend == "ceiling":
        sps = _measure_ceiling(env_id, layout, seconds, warmup, seed)
        return layout_record(layout, None, seconds, sps, frameskip, None)
    if layout.backend == "ale-raw":
        venv = ale_raw(env_id, layout.num_envs, layout.batch_size)
        n_actions = venv.single_action_space.n
        asynchronous = layout.batch_size is not None and layout.batch_size < layout.num_envs
        venv.reset(seed=seed)
        build_s = time.perf_counter() - t_build

        def run(deadline: float) -> int:
            steps = 0
            if asynchronous:  # its own first-ready batches (reset returned the first batch)
                ids = np.arange(layout.batch_size)
                while time.perf_counter() < deadline:
                    # its send() takes actions for the envs of the last recv()
                    venv.send(rng.integers(0, n_actions, size=len(ids)))
                    *_, info = venv.recv()
                    ids = info["env_id"]
                    steps += len(ids)
                return steps
            return step_until(venv, layout.num_envs, rng, deadline)
    elif layout.backend.startswith("gym-"):
        venv = _gym_baseline(env_id, layout.num_envs, layout.backend == "gym-async")
        venv.reset(seed=seed)
        build_s = time.perf_counter() - t_build

        def run(deadline: float) -> int:
            return step_until(venv, layout.num_envs, rng, deadline)
    else:
        return measure_layout(env_id, layout, seconds, warmup, seed)

    try:
        steps, elapsed = timed(run, seconds, warmup)
    finally:
        venv.close()
    return layout_record(layout, steps, elapsed, steps / elapsed, frameskip, build_s)


@dataclass
class BenchResult:
    env_id: str
    machine: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> list[dict[str, Any]]:
        """Median and spread per (layout, num_envs), ratios to baselines of the same N."""
        rows = summarize(self.records)
        by_n: dict[int, dict[str, float]] = {}
        for row in rows:
            by_n.setdefault(row["num_envs"], {})[row["layout"]] = row["steps_per_s"]
        for row in rows:
            base = by_n[row["num_envs"]]
            for key in ("gym-async", "ale"):
                if key in base:
                    row[f"x_{key}"] = row["steps_per_s"] / base[key]
        return rows


def machine_info() -> dict[str, Any]:
    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.processor(),
    }


def run_bench(
    env_id: str,
    num_envs: list[int],
    seconds: float,
    repeats: int,
    backends: tuple[str, ...] | None = None,
    log=print,
) -> BenchResult:
    result = BenchResult(env_id, machine_info())
    plan = [lay for n in num_envs for lay in bench_layouts(env_id, n, backends)]
    log(
        f"{len(plan)} layouts x {repeats} repeats x ~{seconds + 1.5:.0f} s "
        f"≈ {len(plan) * repeats * (seconds + 1.5) / 60:.1f} min"
    )
    for rep in range(repeats):
        for lay in plan:
            try:
                rec = measure(env_id, lay, seconds, seed=rep)
            except Exception as exc:  # a backend that cannot run here is reported, not fatal
                log(f"  {lay.name:<24} N={lay.num_envs:<3} FAILED: {type(exc).__name__}: {exc}")
                continue
            rec["repeat"] = rep
            result.records.append(rec)
            log(
                f"  [{rep + 1}/{repeats}] {lay.name:<24} N={lay.num_envs:<3} "
                f"{rec['steps_per_s']:8.0f} steps/s {rec['frames_per_s']:8.0f} frames/s"
            )
    return result


def format_table(rows: list[dict[str, Any]]) -> str:
    has_async = any("x_gym-async" in r for r in rows)
    has_ale = any("x_ale" in r for r in rows)
    head = f"{'N':>3}  {'layout':<24} {'steps/s':>9} {'spread':>15} {'frames/s':>9} {'ms/vstep':>9}"
    head += "  x gym-async" if has_async else ""
    head += "   x ale" if has_ale else ""
    lines = [head, "-" * len(head)]
    for r in rows:
        s = (
            f"{r['num_envs']:>3}  {r['layout']:<24} {r['steps_per_s']:9.0f} "
            f"{r['min']:7.0f}-{r['max']:<7.0f} {r['frames_per_s']:9.0f} "
            f"{r['ms_per_vector_step']:9.2f}"
        )
        if has_async:
            s += f"  {r['x_gym-async']:9.2f}x" if "x_gym-async" in r else " " * 12
        if has_ale:
            s += f"  {r['x_ale']:5.2f}x" if "x_ale" in r else ""
        lines.append(s)
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: str, env_id: str) -> None:
    """Time per vector step against N for each backend, with the ideal linear line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rapidrl.train.plots import save_png

    fig, ax = plt.subplots(figsize=(8, 5))
    best_per_backend: dict[str, dict[int, float]] = {}
    for r in rows:
        d = best_per_backend.setdefault(r["backend"], {})
        d[r["num_envs"]] = min(d.get(r["num_envs"], float("inf")), r["ms_per_vector_step"])
    for backend, d in sorted(best_per_backend.items()):
        ns = sorted(d)
        ax.plot(ns, [d[n] for n in ns], marker="o", label=backend)
    serial = best_per_backend.get("serial", {})
    if 1 in serial:
        ns = sorted({r["num_envs"] for r in rows})
        ax.plot(ns, [serial[1] * n for n in ns], "k--", label="ideal linear (1 env × N)")
    ax.set_xlabel("number of envs N")
    ax.set_ylabel("ms per vector step (all N envs)")
    ax.set_title(f"{env_id}: time per step vs envs (best layout per backend)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        save_png(fig, path, dpi=100)
    finally:
        plt.close(fig)


def verify_autotune(
    env_id: str, num_envs: int, best: dict[str, Any], seconds: float, repeats: int, log=print
) -> float:
    """Measure ``backend="auto"`` against the best layout, interleaved: ratio of medians."""
    best_layout_ = Layout.of(best, num_envs)
    auto_layout = Layout("auto", num_envs)
    auto, ref = [], []
    for rep in range(repeats):
        ref.append(measure(env_id, best_layout_, seconds, seed=rep)["steps_per_s"])
        auto.append(measure(env_id, auto_layout, seconds, seed=rep)["steps_per_s"])
    ratio = statistics.median(auto) / statistics.median(ref)
    log(
        f"verify N={num_envs}: backend='auto' {statistics.median(auto):.0f} steps/s vs best "
        f"{best_layout_.name} {statistics.median(ref):.0f} steps/s -> {ratio:.3f}x"
    )
    return ratio


def main_bench_envs(cfg) -> int:
    """Entry point for ``rapidrl bench envs`` (``cfg``: :class:`rapidrl.config.BenchEnvsConfig`)."""
    from rapidrl.envs import resolve_env

    env_id = resolve_env(cfg.env).env_id
    num_envs = cfg.num_envs_list()
    backends = tuple(cfg.backends.split(",")) if cfg.backends else None
    result = run_bench(env_id, num_envs, cfg.seconds, cfg.repeats, backends)
    rows = result.summary()
    print()
    print(
        f"{env_id} on {result.machine['cpus']} CPUs, {cfg.repeats} repeats × {cfg.seconds} s "
        "(median, min-max)"
    )
    print(format_table(rows))
    for n in num_envs:
        py = fastest(rows, n, PYTHON_BACKENDS)
        if py is None:
            continue
        line = f"N={n}: best Python backend {py['layout']} {py['steps_per_s']:.0f} steps/s"
        for key in ("gym-async", "ale"):
            base = next((r for r in rows if r["num_envs"] == n and r["layout"] == key), None)
            if base:
                line += f"; {py['steps_per_s'] / base['steps_per_s']:.2f}x {key}"
        raw = fastest(rows, n, ("ale-raw",))  # ale_py's C++ vector env through its own API
        if raw:
            line += f"; {py['steps_per_s'] / raw['steps_per_s']:.2f}x best ale_py ({raw['layout']})"
        print(line)
    if cfg.autotune:
        for n in num_envs:
            best = fastest(rows, n, AUTO_BACKENDS)  # only what "auto" may be, no baseline
            if best is None:
                continue
            path = save_choice(env_id, best)
            where = path or "not saved (see the warning)"
            print(
                f"autotune N={n}: {best['layout']} ({best['steps_per_s']:.0f} steps/s) -> {where}"
            )
            if path is not None:
                verify_autotune(env_id, n, best, cfg.seconds, cfg.repeats)
    if cfg.json:
        with open(cfg.json, "w") as f:
            json.dump(
                {
                    "env_id": env_id,
                    "machine": result.machine,
                    "config": asdict(cfg),
                    "records": result.records,
                    "summary": rows,
                },
                f,
                indent=1,
            )
        print(f"wrote {cfg.json}")
    if cfg.png:
        plot(rows, cfg.png, env_id)
        print(f"wrote {cfg.png}")
    return 0
