"""``python benchmarks/ray_sampler.py``: experience arriving at the learner vs Ray workers, beside one process.

For each worker count ``W`` a :class:`rapidrl.distributed.RaySampler` on a local Ray runs ``W``
actors (1 CPU each) that act with a Nature-CNN Q-network (Ape-X epsilons) in their own vector env
and send :class:`TransitionBatch` es (uint8 frames) through the object store. The driver plays a
learner that does nothing but receive: it takes batches as they complete and publishes new
weights after each receive (``publish_every`` versions per ``ray.put``), so the figure is the
sampler's ceiling, not a training speed. Warm-up: until every actor delivered one batch (actor
start, torch import, env build are excluded); then ``seconds`` of measurement.

Beside it, measured in the same run: the same :class:`RolloutWorker` in this process (no Ray,
no transport): ``mode = "serial"``. With ``--learner-batch N``: the CPU learner's consumption,
timed DQN updates (online + target forward, Huber TD loss, backward, fused Adam) at batch N.

Records (JSON list): ``mode``, ``workers``, ``frames_per_s`` (emulator frames; agent steps x
frame skip), ``steps_per_s``, ``bytes_per_s`` (batch bytes arriving at the driver; for serial:
produced in-process), ``bytes_per_frame``, ``weight_bytes_per_s`` (weights put in the object
store), ``policy_lag_mean``, ``frames_per_s_per_worker``, ``cpu_count``. Ray oversubscribes the
machine when ``W`` > cores (Ray is told it has ``max(W, cores)`` CPUs).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rapidrl.config import ConfigError, parse_or_report

__all__ = [
    "RaySamplerConfig",
    "main",
    "measure_learner",
    "measure_ray",
    "measure_serial",
    "run_ray_bench",
]

PROG = "python benchmarks/ray_sampler.py"


def _spaces(env: str, env_options: dict | None) -> tuple[tuple[int, ...], int]:
    from rapidrl.vector import make_vec

    venv = make_vec(env, 1, backend="serial", env_options=env_options)
    try:
        return tuple(venv.single_observation_space.shape), int(venv.single_action_space.n)
    finally:
        venv.close()


def _record(mode: str, workers: int, frames: int, steps: int, nbytes: int, secs: float, **kw):
    return {
        "mode": mode,
        "workers": workers,
        "frames_per_s": frames / secs,
        "steps_per_s": steps / secs,
        "bytes_per_s": nbytes / secs,
        "bytes_per_frame": nbytes / max(frames, 1),
        "frames_per_s_per_worker": frames / secs / max(workers, 1),
        "seconds": secs,
        **kw,
    }


def measure_serial(
    env: str,
    factory,
    envs_per_worker: int,
    steps_per_batch: int,
    seconds: float,
    *,
    backend: str = "serial",
    env_options: dict | None = None,
) -> dict[str, Any]:
    """One :class:`RolloutWorker` in this process, epsilon 0.4, weights loaded once."""
    import torch

    from rapidrl.distributed import RolloutWorker, weights_to_numpy

    threads = torch.get_num_threads()
    w = RolloutWorker(
        env, factory, envs_per_worker, backend=backend, env_options=env_options, torch_threads=1
    )
    try:
        w.set_weights(weights_to_numpy(factory()), 0)
        w.collect_transitions(steps_per_batch, 0.4)  # warm-up
        frames = steps = nbytes = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            b = w.collect_transitions(steps_per_batch, 0.4)
            frames, steps, nbytes = (
                frames + b.meta.frames,
                steps + b.meta.env_steps,
                nbytes + b.nbytes,
            )
        secs = time.perf_counter() - t0
    finally:
        w.close()
        torch.set_num_threads(threads)  # the worker acted with 1 thread, like an actor
    return _record(
        "serial", 1, frames, steps, nbytes, secs, weight_bytes_per_s=0.0, policy_lag_mean=0.0
    )


def measure_ray(
    env: str,
    factory,
    workers: int,
    envs_per_worker: int,
    steps_per_batch: int,
    seconds: float,
    *,
    backend: str = "serial",
    env_options: dict | None = None,
    publish_every: int = 10,
) -> dict[str, Any]:
    """``workers`` Ray actors into this driver; see the module docstring."""
    from rapidrl.distributed import RaySampler

    policy = factory()
    t_start = time.perf_counter()
    s = RaySampler(
        env,
        factory,
        workers,
        envs_per_worker,
        backend=backend,
        env_options=env_options,
        publish_every=publish_every,
    )
    try:
        s.set_weights(policy, 0, force=True)
        seen: set[int] = set()
        while len(seen) < workers:  # warm-up: every actor delivered once
            seen.update(b.meta.worker_id for b in s.next_transitions(steps_per_batch))
            s.set_weights(policy)
        startup = time.perf_counter() - t_start
        frames = steps = nbytes = 0
        puts0, lags = s.weight_puts, []
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for b in s.next_transitions(steps_per_batch):
                frames, steps = frames + b.meta.frames, steps + b.meta.env_steps
                nbytes += b.nbytes
                lags.append(s.policy_lag(b))
            s.set_weights(policy)  # one "update" per receive
        secs = time.perf_counter() - t0
        weight_bytes = (s.weight_puts - puts0) * s.weight_bytes
        nodes = len(s.batches_per_node)
    finally:
        s.shutdown()
    return _record(
        "ray",
        workers,
        frames,
        steps,
        nbytes,
        secs,
        weight_bytes_per_s=weight_bytes / secs,
        policy_lag_mean=float(np.mean(lags)) if lags else float("nan"),
        startup_seconds=startup,
        nodes=nodes,
    )


def measure_learner(
    obs_shape: tuple[int, ...],
    n_actions: int,
    batch_size: int,
    seconds: float,
    device: str = "cpu",
) -> dict[str, Any]:
    """DQN updates/s: online + target forward, Huber TD loss, backward, fused Adam (on
    ``device``; the CPU learner uses every core)."""
    import torch
    import torch.nn.functional as F

    from rapidrl.nets.q import QNetwork

    torch.set_num_threads(os.cpu_count() or 1)  # a learner has the machine
    dev = torch.device(device)
    q, target = QNetwork(obs_shape, n_actions).to(dev), QNetwork(obs_shape, n_actions).to(dev)
    target.load_state_dict(q.state_dict())
    try:
        opt = torch.optim.Adam(q.parameters(), lr=1e-4, fused=True)
    except (RuntimeError, TypeError):
        opt = torch.optim.Adam(q.parameters(), lr=1e-4)
    dtype = torch.uint8 if len(obs_shape) == 3 else torch.float32
    obs = torch.randint(0, 255, (batch_size, *obs_shape)).to(dev, dtype)
    nxt = torch.randint(0, 255, (batch_size, *obs_shape)).to(dev, dtype)
    act = torch.randint(0, n_actions, (batch_size,), device=dev)
    rew = torch.randn(batch_size, device=dev)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def update() -> None:
        with torch.no_grad():
            y = rew + 0.99 * target(nxt).max(-1).values
        loss = F.smooth_l1_loss(q(obs).gather(1, act[:, None]).squeeze(1), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()

    for _ in range(3):
        update()
    times = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or len(times) < 5:
        t = time.perf_counter()
        update()
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    return {
        "mode": "learner",
        "workers": 0,
        "batch_size": batch_size,
        "ms_per_update": 1000 * med,
        "updates_per_s": 1.0 / med,
        "samples_per_s": batch_size / med,
        "torch_threads": torch.get_num_threads(),
        "device": str(dev),
    }


def run_ray_bench(
    env: str = "pong",
    workers: tuple[int, ...] = (1, 2, 4),
    envs_per_worker: int = 4,
    steps_per_batch: int = 32,
    seconds: float = 10.0,
    *,
    backend: str = "serial",
    publish_every: int = 10,
    serial: bool = True,
    learner_batch: int | None = None,
    learner_device: str = "cpu",
) -> list[dict[str, Any]]:
    from rapidrl.distributed import make_q_policy, require_ray

    ray = require_ray()
    obs_shape, n_actions = _spaces(env, None)
    factory = functools.partial(make_q_policy, obs_shape, n_actions)
    common = {
        "env": env,
        "backend": backend,
        "envs_per_worker": envs_per_worker,
        "steps_per_batch": steps_per_batch,
        "cpu_count": os.cpu_count(),
    }
    records = []
    if serial:
        print(f"serial: 1 in-process worker x {envs_per_worker} envs ...", file=sys.stderr)
        rec = measure_serial(
            env, factory, envs_per_worker, steps_per_batch, seconds, backend=backend
        )
        records.append({**rec, **common})
    started = False
    if not ray.is_initialized():
        ray.init(
            address="local",  # a new local Ray, never another one running on this machine
            num_cpus=max(max(workers), os.cpu_count() or 1),
            include_dashboard=False,
            log_to_driver=False,
        )
        started = True
    try:
        for w in workers:
            print(f"ray: {w} workers x {envs_per_worker} envs ...", file=sys.stderr)
            rec = measure_ray(
                env,
                factory,
                w,
                envs_per_worker,
                steps_per_batch,
                seconds,
                backend=backend,
                publish_every=publish_every,
            )
            records.append({**rec, **common, "publish_every": publish_every})
    finally:
        if started:
            ray.shutdown()
    if learner_batch:
        print(f"learner: DQN updates at batch {learner_batch} ...", file=sys.stderr)
        rec = measure_learner(
            obs_shape, n_actions, learner_batch, min(seconds, 5.0), device=learner_device
        )
        records.append({**rec, **common})
    return records


def format_table(records: list[dict[str, Any]]) -> str:
    lines = [
        f"{'mode':<8}{'workers':>8}{'frames/s':>11}{'per worker':>12}{'MB/s':>8}"
        f"{'B/frame':>9}{'weights MB/s':>14}{'lag':>6}"
    ]
    for r in records:
        if r["mode"] == "learner":
            lines.append(
                f"learner: batch {r['batch_size']}: {r['ms_per_update']:.1f} ms/update "
                f"({r['updates_per_s']:.1f} updates/s, {r['samples_per_s']:.0f} samples/s, "
                f"{r['device']}, {r['torch_threads']} threads)"
            )
            continue
        lines.append(
            f"{r['mode']:<8}{r['workers']:>8}{r['frames_per_s']:>11.0f}"
            f"{r['frames_per_s_per_worker']:>12.0f}{r['bytes_per_s'] / 1e6:>8.1f}"
            f"{r['bytes_per_frame']:>9.0f}{r['weight_bytes_per_s'] / 1e6:>14.2f}"
            f"{r['policy_lag_mean']:>6.1f}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class RaySamplerConfig:
    """Experience arriving at a learner that only receives, against the number of Ray workers on
    a local Ray, beside one worker in this process; one table."""

    env: str = "pong"
    """Env id or alias."""
    workers: str = "1,2,4"
    """Comma list of Ray worker counts to measure, e.g. 1,2,4 (one setting each)."""
    envs_per_worker: int = 4
    """Envs in each worker's vector env."""
    backend: str = "serial"
    """Vector backend inside each worker."""
    steps_per_batch: int = 32
    """Agent steps a worker collects per request (per batch)."""
    seconds: float = 10.0
    """Measured seconds per setting (after every worker delivered its first batch)."""
    publish_every: int = 10
    """Weight versions per ray.put (the driver publishes a version after each receive)."""
    serial: bool = True
    """Also measure one worker in this process, no Ray (--no-serial skips it)."""
    learner_batch: int = 0
    """Also time DQN updates at this batch size (0: no learner timing)."""
    learner_device: str = "cpu"
    """Device of the learner timing (cpu, cuda, ...)."""
    json: str | None = None
    """Write the records to this JSON file."""

    def worker_counts(self) -> tuple[int, ...]:
        try:
            out = tuple(int(x) for x in self.workers.split(",") if x.strip())
        except ValueError:
            out = ()
        if not out or min(out) < 1:
            raise ConfigError(
                f"--workers needs a comma list of ints >= 1 like 1,2,4, got {self.workers!r}"
            )
        return out

    def validate(self) -> None:
        self.worker_counts()
        for flag, value in (
            ("--envs-per-worker", self.envs_per_worker),
            ("--steps-per-batch", self.steps_per_batch),
            ("--publish-every", self.publish_every),
        ):
            if value < 1:
                raise ConfigError(f"{flag} must be >= 1, got {value}")
        if not self.seconds > 0:
            raise ConfigError(f"--seconds must be > 0, got {self.seconds}")
        if self.learner_batch < 0:
            raise ConfigError(f"--learner-batch must be >= 0 (0: none), got {self.learner_batch}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python benchmarks/ray_sampler.py``: table on stdout, optional ``--json`` list of
    records; 2 on bad input (the message, no traceback)."""
    cfg = parse_or_report(RaySamplerConfig, sys.argv[1:] if argv is None else argv, PROG, __doc__)
    if cfg is None:
        return 2
    records = run_ray_bench(
        cfg.env,
        cfg.worker_counts(),
        cfg.envs_per_worker,
        cfg.steps_per_batch,
        cfg.seconds,
        backend=cfg.backend,
        publish_every=cfg.publish_every,
        serial=cfg.serial,
        learner_batch=cfg.learner_batch or None,
        learner_device=cfg.learner_device,
    )
    print(format_table(records))
    if cfg.json:
        meta = {"python": platform.python_version(), "machine": platform.machine()}
        with open(cfg.json, "w") as f:
            json.dump([{**r, **meta} for r in records], f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
