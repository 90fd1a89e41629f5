"""Mean-100 at every million frames of runs given as NAME=RUN_DIR (the last metrics row at or
below each mark), as a markdown table; the final row and best mean-100 of each run at the end."""
import csv
import sys


def rows(run_dir):
    with open(f"{run_dir}/metrics.csv") as f:
        return [r for r in csv.DictReader(f) if r["return_mean_100"]]


runs = dict(arg.split("=", 1) for arg in sys.argv[1:])
data = {name: rows(d) for name, d in runs.items()}
print("| frames | " + " | ".join(runs) + " |")
print("| --- |" + " --- |" * len(runs))
for m in range(1, 11):
    cells = []
    for name, rs in data.items():
        below = [r for r in rs if int(r["frames"]) <= m * 1_000_000]
        cells.append(f"{float(below[-1]['return_mean_100']):.1f}" if below else "-")
    print(f"| {m}M | " + " | ".join(cells) + " |")
ends = [
    f"**{float(rs[-1]['return_mean_100']):.1f}** (best {float(rs[-1]['return_best_mean_100']):.1f},"
    f" {int(rs[-1]['frames']) / 1e6:.2f}M)"
    for rs in data.values()
]
print("| end | " + " | ".join(ends) + " |")
