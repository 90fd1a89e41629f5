"""Milestones of a bench atari suite's runs, from their metrics.csv: mean-100 at given frame
counts and the first row at or past given scores (the README's eight-DQN-systems table).

    python scripts/suite_milestones.py docs/results/pong_eight_dqn_4m [--game pong]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rapidrl.train.launch import read_curve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out_dir")
    ap.add_argument("--game", default="pong")
    ap.add_argument("--frames", default="1e6,2e6,3e6,4e6")
    ap.add_argument("--scores", default="-15,0")
    a = ap.parse_args()
    marks = [float(x) for x in a.frames.split(",")]
    scores = [float(x) for x in a.scores.split(",")]
    print(
        "| run | mean-100 at "
        + " / ".join(f"{m / 1e6:g}M" for m in marks)
        + " frames | "
        + " | ".join(f"first at {s:g}" for s in scores)
        + " | minutes | frames/s | update ms |"
    )
    for run in sorted(Path(a.out_dir, a.game).glob("*/seed-*")):
        if not (run / "summary.json").exists():
            continue
        s = json.loads((run / "summary.json").read_text())
        curve = read_curve(run)  # (minutes, frames, mean-100) of every row that has one
        at = [next((v for _, f, v in curve if f >= m), None) for m in marks]
        first = [
            next((f"{f / 1e6:.2f}M ({t:.1f} min)" for t, f, v in curve if v >= sc), "-")
            for sc in scores
        ]
        ms = sorted(v for _, _, v in read_curve(run, "update_ms"))
        print(
            f"| {run.parent.name} {run.name} | "
            + " / ".join("-" if v is None else f"{v:.1f}" for v in at)
            + " | "
            + " | ".join(first)
            + f" | {s['seconds'] / 60:.1f} | {s['frames_per_second']:,.0f} | "
            + (f"{ms[len(ms) // 2]:.1f} |" if ms else "- |")
        )


if __name__ == "__main__":
    main()
