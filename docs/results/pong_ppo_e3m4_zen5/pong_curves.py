"""Mean-100 at every 0.5M frames of Pong runs given as NAME=RUN_DIR (the last metrics row at or
below each mark), as a markdown table, with each run's frames to solve from its summary.json."""
import csv
import json
import sys


def rows(run_dir):
    with open(f"{run_dir}/metrics.csv") as f:
        return [r for r in csv.DictReader(f) if r["return_mean_100"]]


runs = dict(arg.split("=", 1) for arg in sys.argv[1:])
data = {name: rows(d) for name, d in runs.items()}
print("| frames | " + " | ".join(runs) + " |")
print("| --- |" + " --- |" * len(runs))
for m in range(1, 7):
    cells = []
    for rs in data.values():
        below = [r for r in rs if int(r["frames"]) <= m * 500_000]
        cells.append(f"{float(below[-1]['return_mean_100']):.1f}" if below else "-")
    print(f"| {m * 0.5:.1f}M | " + " | ".join(cells) + " |")
solved = []
for d in runs.values():
    summary = json.load(open(f"{d}/summary.json"))
    solved.append(f"{summary['frames_to_solve'] / 1e6:.2f}M" if summary["solved"] else "no")
print("| solved at | " + " | ".join(solved) + " |")
