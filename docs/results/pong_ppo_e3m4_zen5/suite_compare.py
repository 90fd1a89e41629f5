"""Each game's 3-epoch run(s) (NEW_DIR/GAME/ppo-lean/seed-S/summary.json) against `lean`'s three
4-epoch seeds (OLD suite.json): final mean-100, HNS, minutes, frames/s; then the median HNS of
the games that have both.  Usage: python suite_compare.py OLD/suite.json NEW_DIR"""
import json
import statistics
import sys
from pathlib import Path

from rapidrl.bench.atari import human_normalized

old = [r for r in json.load(open(sys.argv[1]))["runs"] if "failed" not in r]
new_dir = Path(sys.argv[2])
print("| game | 4 epochs: seeds 1 / 2 / 3 (median) | **3 epochs** (seed) | 3 epochs against the 4-epoch median | minutes (frames/s): 4-epoch median / 3 epochs |")
print("| --- | --- | --- | --- | --- |")
old_hns, new_hns = [], []
for game in dict.fromkeys(r["game"] for r in old):
    runs = sorted(new_dir.glob(f"{game}/ppo-lean/seed-*/summary.json"))
    runs = [json.loads(p.read_text()) | {"seed": p.parent.name[5:]} for p in runs]
    runs = [r for r in runs if r["frames"] >= 10_000_000]
    if not runs:
        continue
    o = sorted((x for x in old if x["game"] == game), key=lambda x: x["seed"])
    finals = [x["return_mean_100"] for x in o]
    med = statistics.median(finals)
    mins = statistics.median(x["minutes"] for x in o)
    fps = statistics.median(x["frames_per_second"] for x in o)
    cells = ", ".join(f"**{r['return_mean_100']:,.1f}** ({r['seed']})" for r in runs)
    rel = ", ".join(f"{(r['return_mean_100'] - med) / abs(med):+.0%}" for r in runs)
    times = ", ".join(f"{r['seconds'] / 60:.1f} ({r['frames_per_second']:,.0f})" for r in runs)
    print(f"| {game} | {' / '.join(f'{v:,.1f}' for v in finals)} ({med:,.1f}) | {cells} | {rel} | "
          f"{mins:.1f} ({fps:,.0f}) / {times} |")
    old_hns.append(human_normalized(game, med))
    new_hns.append(human_normalized(game, statistics.median(r["return_mean_100"] for r in runs)))
print(f"\nmedian HNS over these {len(new_hns)} games: 4 epochs {statistics.median(old_hns):.2f}, "
      f"3 epochs {statistics.median(new_hns):.2f}")
