"""Progress bar (on a fake terminal and disabled), summary.json, learning-curve PNG."""

from __future__ import annotations

import io
import json
import math

from rapidrl.train import (
    EpisodeTracker,
    MetricsLogger,
    Progress,
    plot_learning_curve,
    write_summary,
)


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_shows_stats_on_tty_and_nothing_otherwise():
    tracker = EpisodeTracker()
    tracker.add_episode(-20.0, 900, 1000, 1.0)
    out = FakeTTY()
    with Progress(10_000, initial=1000, file=out) as bar:
        assert bar.enabled
        bar.update(2000, tracker, epsilon=0.25, loss=math.nan)
        bar.update(2500, tracker, epsilon=0.2)  # throttled: within min_interval
        bar.update(3000, tracker, force=True, epsilon=0.1)
    text = out.getvalue()
    assert "ep=1" in text and "mean100=-20" in text and "epsilon=0.25" in text
    assert "loss=-" in text and "epsilon=0.2," not in text and "epsilon=0.1" in text
    assert "3.00k/10.0k" in text

    plain = io.StringIO()  # not a terminal: auto-disabled
    with Progress(100, file=plain) as bar:
        bar.update(50, tracker)
    assert not bar.enabled and plain.getvalue() == ""
    with Progress(100, file=FakeTTY(), enabled=False) as bar:  # --no-progress
        assert not bar.enabled


def test_summary_json(tmp_path):
    t = EpisodeTracker(stop_at_score=0.5, window=2)
    t.add_episode(1.0, 10, 100, 2.0)
    write_summary(tmp_path / "s.json", frames=100, seconds=2.5, tracker=t, extra={"algo": "dqn"})
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["best_return_mean_100"] is None and not s["solved"]  # window not full yet
    t.add_episode(1.0, 10, 200, 3.0)
    write_summary(tmp_path / "s.json", frames=250, seconds=4.0, tracker=t)
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["solved"] and s["frames_to_solve"] == 200 and s["seconds_to_solve"] == 3.0
    assert s["best_return_mean_100"] == 1.0 and s["frames"] == 250 and s["episodes"] == 2


def test_learning_curve_png(tmp_path):
    with MetricsLogger(tmp_path / "metrics.csv") as log:
        log.log(0, {"seconds": 0.0, "return_mean_100": math.nan})
        for i in range(1, 20):
            log.log(i * 1000, {"seconds": i * 30.0, "return_mean_100": -21 + i})
    png = plot_learning_curve(tmp_path, stop_at_score=18)
    assert png == tmp_path / "learning_curve.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_save_png_is_a_palette_png_of_the_same_picture(tmp_path):
    """The figure's own RGBA rendering and the palette file: same size, nearly the same pixels
    (a 256-colour line plot loses only antialiasing shades), and a smaller file."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from PIL import Image

    from rapidrl.train.plots import save_png

    fig = Figure(figsize=(6, 3))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    xs = np.linspace(0, 10, 400)
    for k in range(6):
        ax.plot(xs, np.sin(xs + k), label=f"seed {k}")
    ax.legend()
    ax.grid(alpha=0.3)
    rgba_png = tmp_path / "rgba.png"
    fig.savefig(rgba_png, format="png", dpi=80)
    out = save_png(fig, tmp_path / "sub" / "pal.png", dpi=80)
    assert out == tmp_path / "sub" / "pal.png"
    with Image.open(rgba_png) as a, Image.open(out) as b:
        assert b.mode == "P" and b.size == a.size
        ref = np.asarray(a.convert("RGB"), dtype=np.int16)
        got = np.asarray(b.convert("RGB"), dtype=np.int16)
    diff = np.abs(ref - got)
    assert diff.mean() < 1.0 and np.percentile(diff, 99) <= 16, (diff.mean(), diff.max())
    assert out.stat().st_size < rgba_png.stat().st_size
