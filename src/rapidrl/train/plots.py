"""Learning-curve PNG from ``metrics.csv``: mean of the last 100 returns vs frames and vs minutes.

Uses matplotlib's Agg canvas directly (no pyplot), so it needs no display and never changes the
backend of a caller's interactive session. Also a command: ``python -m rapidrl.train.plots RUN``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from rapidrl.train.metrics import read_metrics
from rapidrl.train.run import atomic_write

__all__ = ["plot_learning_curve", "save_png"]


def save_png(fig, path: str | os.PathLike, *, dpi: int, what: str | None = None) -> Path:
    """Write a matplotlib figure as a PNG of at most 256 colours, atomically; returns the path.

    A line plot holds a few colours and their antialiasing ramps: a palette PNG of the same
    pixels (median-cut colours, no dithering) looks the same at about a third of the RGBA file,
    and the learning curves are most of what the result records weigh.
    """
    import io

    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    buf.seek(0)
    with Image.open(buf) as im:
        pal = im.convert("RGB").quantize(
            colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )
    return atomic_write(path, lambda f: pal.save(f, format="PNG", optimize=True), what)


def _series(rows, x_key: str, y_key: str, x_scale: float = 1.0):
    xs, ys = [], []
    for r in rows:
        try:
            x, y = float(r[x_key]), float(r[y_key])
        except (KeyError, TypeError, ValueError):
            continue  # empty cell: no episodes finished yet
        if math.isfinite(x) and math.isfinite(y):
            xs.append(x * x_scale)
            ys.append(y)
    return xs, ys


def plot_learning_curve(
    metrics_csv: str | os.PathLike,
    out_png: str | os.PathLike | None = None,
    *,
    title: str | None = None,
    stop_at_score: float | None = None,
    y_key: str = "return_mean_100",
) -> Path:
    """Plot ``y_key`` against frames (left) and wall-clock minutes (right); returns the PNG path.

    ``metrics_csv`` may be a run directory. ``out_png`` defaults to ``learning_curve.png`` next
    to the CSV. ``stop_at_score`` draws the solve threshold as a dashed line.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    metrics_csv = Path(metrics_csv)
    if metrics_csv.is_dir():
        metrics_csv = metrics_csv / "metrics.csv"
    header, rows = read_metrics(metrics_csv)
    if not header:
        raise FileNotFoundError(f"no metrics in {metrics_csv}")
    out_png = Path(out_png) if out_png is not None else metrics_csv.with_name("learning_curve.png")

    fig = Figure(figsize=(11, 4), layout="constrained")
    FigureCanvasAgg(fig)
    panels = (("frames", 1.0, "frames"), ("seconds", 1 / 60, "minutes"))
    for i, (x_key, scale, label) in enumerate(panels):
        ax = fig.add_subplot(1, 2, i + 1)
        xs, ys = _series(rows, x_key, y_key, scale)
        if xs:
            ax.plot(xs, ys, lw=1.5)
        else:
            ax.text(0.5, 0.5, "no finished episodes yet", ha="center", transform=ax.transAxes)
        if stop_at_score is not None:
            ax.axhline(
                stop_at_score, ls="--", color="gray", lw=1, label=f"solved > {stop_at_score:g}"
            )
            ax.legend(loc="lower right")
        ax.set_xlabel(label)
        ax.set_ylabel(y_key)
        ax.grid(alpha=0.3)
    fig.suptitle(title or metrics_csv.parent.name)
    return save_png(fig, out_png, dpi=100)


def main(run: str, out: str | None = None, stop_at_score: float | None = None) -> None:
    """Write the learning curve of RUN (a run directory or its metrics.csv)."""
    print(plot_learning_curve(run, out, stop_at_score=stop_at_score))


if __name__ == "__main__":
    import tyro

    tyro.cli(main)
