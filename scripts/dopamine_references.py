"""Regenerate ``src/rapidrl/bench/dopamine_reference.json`` from a clone of google/dopamine:
the mean over its 5 seeds of each agent's training return per 1M-frame iteration, at the frame
counts the suite compares against (1, 2, 5, 10, 20, 50M frames; iteration i covers frames
i..i+1 M, so "10M" is iteration 9).

    git clone --depth 1 https://github.com/google/dopamine /tmp/dopamine
    python scripts/dopamine_references.py /tmp/dopamine src/rapidrl/bench/dopamine_reference.json
"""

from __future__ import annotations

import collections
import json
import statistics
import sys
from pathlib import Path

AGENTS = ("DQN", "C51", "Rainbow", "IQN")
FRAMES_M = (1, 2, 5, 10, 20, 50)


def main(repo: str, out: str) -> None:
    table = {}
    for path in sorted(Path(repo, "baselines/atari/data").glob("*.json")):
        if "_" in path.stem or path.stem.endswith(".vg"):
            continue  # the CNN/Impala and "vg" variants: not the default agents
        by = collections.defaultdict(lambda: collections.defaultdict(list))
        for r in json.loads(path.read_text()):
            by[r["Agent"]][int(r["Iteration"])].append(float(r["Value"]))
        game = {}
        for agent in AGENTS:
            its = by.get(agent, {})
            game[agent] = {
                str(m): round(statistics.mean(its[m - 1]), 1) for m in FRAMES_M if its.get(m - 1)
            }
        table[path.stem] = game
    doc = {
        "source": "google/dopamine baselines/atari/data/<game>.json (Apache-2.0)",
        "protocol": (
            "Dopamine defaults: sticky actions p=0.25, no life-loss signal, minimal action set, "
            "1 env, 4-frame skip, 108k-frame episode cap, no noop starts; values are the mean "
            "training-episode return (epsilon 0.01) over the 1M frames ending at the key, "
            "averaged over 5 seeds"
        ),
        "frames_millions": list(FRAMES_M),
        "games": table,
    }
    Path(out).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"{len(table)} games -> {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
