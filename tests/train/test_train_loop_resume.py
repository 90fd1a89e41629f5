"""End to end: a tiny loop built from the shared pieces; stopped and resumed == uninterrupted."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from rapidrl.train import (
    Checkpointer,
    EpisodeTracker,
    MetricsLogger,
    Progress,
    RunClock,
    RunDir,
    StopOnInterrupt,
    read_metrics,
    seed_everything,
    write_summary,
)


@dataclass(frozen=True)
class Cfg:
    env_id: str = "Fake-v0"
    total_frames: int = 400
    seed: int = 3
    run_dir: str | None = None
    resume: bool = False


class Crash(Exception):
    pass


def train(cfg: Cfg, stop_after: int | None = None, crash_after: int | None = None) -> nn.Module:
    """The shape every trainer has; ``stop_after`` simulates a Ctrl-C at that frame count,
    ``crash_after`` a crash (no checkpoint written at that point)."""
    run = RunDir.create(cfg.run_dir, algo="toy", env_id=cfg.env_id, resume=cfg.resume)
    run.save_config(cfg)
    gen = seed_everything(cfg.seed)
    net = nn.Linear(4, 1)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    tracker, clock, frames = EpisodeTracker(stop_at_score=0.6, window=5), RunClock(), 0
    ckpt = Checkpointer(run.checkpoints, algo="toy", config=cfg, keep=2, every_frames=100)
    if cfg.resume:
        state = ckpt.load_latest()
        state.restore(model=net, optim=opt, tracker=tracker, clock=clock)
        state.restore_rng(gen)
        frames = state.state["frames"]
    log = MetricsLogger(run.metrics_csv, run.tb, resume_frames=frames if cfg.resume else None)
    bar = Progress(cfg.total_frames, initial=frames, enabled=False)
    with StopOnInterrupt() as stop, log, bar:
        while frames < cfg.total_frames and not stop.requested:
            x = torch.randn(8, 4)
            loss = (net(x) - x.sum(1, keepdim=True)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            frames += 20
            ended = gen.random(2) < 0.3
            infos = {
                "episode_end": ended,
                "episode_return": gen.random(2),
                "episode_length": [9, 9],
            }
            tracker.update(infos, frames, clock.seconds)
            bar.update(frames, tracker, loss=loss.item())
            if frames % 40 == 0:
                log.log(
                    frames, {"seconds": clock.seconds, **tracker.metrics(), "loss": loss.item()}
                )
            if crash_after is not None and frames >= crash_after:
                raise Crash
            if stop_after is not None and frames >= stop_after:
                stop.request()  # what the first Ctrl-C does
            if ckpt.due(frames) or stop.requested:
                ckpt.save(
                    frames,
                    {
                        "model": net,
                        "optim": opt,
                        "tracker": tracker,
                        "clock": clock,
                        "frames": frames,
                    },
                    np_rng=gen,
                )
    write_summary(run.summary_json, frames=frames, seconds=clock.seconds, tracker=tracker)
    return net


def check_same_as_uninterrupted(tmp_path, name, resumed):
    full = train(Cfg(run_dir=str(tmp_path / "full")))
    for p, q in zip(full.parameters(), resumed.parameters()):
        assert torch.equal(p, q)
    _, rows_a = read_metrics(tmp_path / "full" / "metrics.csv")
    _, rows_b = read_metrics(tmp_path / name / "metrics.csv")
    assert [int(r["frames"]) for r in rows_b] == list(range(40, 401, 40))  # no duplicate tail
    for ra, rb in zip(rows_a, rows_b):
        for k in ("episodes", "return_mean_100", "loss"):
            assert ra[k] == rb[k]
    sa = json.loads((tmp_path / "full" / "summary.json").read_text())
    sb = json.loads((tmp_path / name / "summary.json").read_text())
    for k in ("frames", "episodes", "solved", "frames_to_solve", "best_return_mean_100"):
        assert sa[k] == sb[k]


def test_ctrl_c_then_resume_equals_uninterrupted(tmp_path):
    train(Cfg(run_dir=str(tmp_path / "b")), stop_after=220)  # Ctrl-C at 220: saved there
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["frames"] == 220
    resumed = train(Cfg(run_dir=str(tmp_path / "b"), resume=True))
    check_same_as_uninterrupted(tmp_path, "b", resumed)


def test_crash_then_resume_from_last_checkpoint(tmp_path):
    with pytest.raises(Crash):  # checkpoints at 100 and 200, rows logged up to 240, crash at 260
        train(Cfg(run_dir=str(tmp_path / "b")), crash_after=260)
    _, rows = read_metrics(tmp_path / "b" / "metrics.csv")
    assert rows[-1]["frames"] == "240"
    resumed = train(Cfg(run_dir=str(tmp_path / "b"), resume=True))  # from 200: 240 again
    check_same_as_uninterrupted(tmp_path, "b", resumed)
