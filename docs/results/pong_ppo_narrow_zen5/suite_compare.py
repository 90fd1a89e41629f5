"""Today's lean (seed 1, OUT) against the 64-wide torso's three seeds (OLD), game by game, from
the two suites' suite.json records: final mean-100, minutes, frames/s, HNS.
Usage: python suite_compare.py OLD/suite.json NEW1/suite.json [NEW2/suite.json ...]"""
import json
import statistics
import sys

old = json.load(open(sys.argv[1]))["runs"]
new = [r for f in sys.argv[2:] for r in json.load(open(f))["runs"]]
print("| game | 64-wide: seeds 1 / 2 / 3 (median) | **32-wide: seed 1** | minutes (frames/s): 64-wide median / 32-wide |")
print("| --- | --- | --- | --- |")
for r in new:
    if "failed" in r:
        continue
    g = r["game"]
    o = sorted((x for x in old if x["game"] == g and "failed" not in x), key=lambda x: x["seed"])
    finals = [x["return_mean_100"] for x in o]
    mins = statistics.median(x["minutes"] for x in o)
    fps = statistics.median(x["frames_per_second"] for x in o)
    print(f"| {g} | {' / '.join(f'{v:,.1f}' for v in finals)} ({statistics.median(finals):,.1f}) | "
          f"**{r['return_mean_100']:,.1f}** | {mins:.1f} ({fps:,.0f}) / {r['minutes']:.1f} "
          f"({r['frames_per_second']:,.0f}) |")
