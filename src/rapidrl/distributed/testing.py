"""Helpers to check that Ray left no process behind (used by the tests; handy after a run)."""

from __future__ import annotations

import time

import psutil


def ray_pids() -> set[int]:
    """Ray processes among this process's descendants: GCS, raylets, agents
    (``python .../ray/...``) and workers (``ray::...``)."""
    pids = set()
    for p in psutil.Process().children(recursive=True):
        try:
            text = (p.name() + " " + " ".join(p.cmdline())).lower()
        except psutil.Error:
            continue
        if "ray" in text or "gcs_server" in text:
            pids.add(p.pid)
    return pids


def wait_gone(pids: set[int], timeout: float = 20.0) -> list[str]:
    """Wait until none of ``pids`` is alive (zombies count as gone); return those still alive."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for pid in pids:
            try:
                p = psutil.Process(pid)
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{pid} {p.name()}")
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)
