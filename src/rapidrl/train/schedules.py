"""Schedules every algorithm shares (one place per concept): epsilon, PER beta, ..."""

from __future__ import annotations

__all__ = ["linear_schedule"]


def linear_schedule(start: float, end: float, duration: int, t: int) -> float:
    """``start`` -> ``end`` linearly over ``duration`` steps, then ``end``."""
    if duration <= 0 or t >= duration:
        return end
    return start + (end - start) * t / duration
