"""EpisodeTracker on scripted infos; MetricsLogger CSV columns, widening and resume truncation."""

from __future__ import annotations

import csv
import gzip
import math

import numpy as np
import pytest

from rapidrl.train import KNOWN_COLUMNS, EpisodeTracker, MetricsLogger, read_metrics


def infos(ended, returns, lengths=None):
    n = len(ended)
    return {
        "env_id": np.arange(n),
        "episode_end": np.asarray(ended, dtype=bool),
        "episode_return": np.asarray(returns, dtype=np.float64),
        "episode_length": np.asarray(lengths if lengths is not None else [10] * n, dtype=np.int64),
    }


def test_tracker_counts_only_ended_envs():
    t = EpisodeTracker(stop_at_score=18)
    assert math.isnan(t.mean)
    # env 1's return is garbage where episode_end is False: it must be ignored
    assert t.update(infos([True, False, True], [1.0, 999.0, 3.0], [5, 7, 9]), 12, 1.0) == 2
    assert t.episodes == 2 and t.mean == 2.0 and t.mean_length == 7.0
    assert t.update(infos([False, False, False], [5.0, 5.0, 5.0]), 15, 1.5) == 0
    assert t.episodes == 2 and math.isnan(t.best_mean)  # no full window yet
    m = t.metrics()
    assert m["episodes"] == 2 and m["return_mean_100"] == 2.0


def test_solved_needs_full_window_and_strictly_greater():
    t = EpisodeTracker(stop_at_score=18)
    for i in range(99):  # 99 perfect games: not solved, the window is not full
        t.update(infos([True], [21.0]), frames=(i + 1) * 100, seconds=i + 1.0)
    assert not t.solved and t.frames_to_solve is None and math.isnan(t.best_mean)

    t = EpisodeTracker(stop_at_score=18)
    t.update(infos([True] * 100, [18.0] * 100), frames=1000, seconds=10.0)
    assert not t.solved and t.best_mean == 18.0  # mean == 18 is not > 18
    # one 20 replaces an 18: mean 18.02 > 18 -> solved at this step
    t.update(infos([True], [20.0]), frames=2000, seconds=20.0)
    assert t.solved and t.frames_to_solve == 2000 and t.seconds_to_solve == 20.0
    t.update(infos([True, False], [20.0, 0.0]), frames=3000, seconds=30.0)
    assert t.frames_to_solve == 2000 and t.mean == pytest.approx(18.04)
    t.update(infos([True] * 100, [-21.0] * 100), frames=4000, seconds=40.0)
    assert t.solved and t.frames_to_solve == 2000  # solved is sticky, first time kept
    assert t.best_mean == pytest.approx(18.04) and t.mean == -21.0


def test_tracker_window_slides_and_state_round_trip():
    t = EpisodeTracker(stop_at_score=None, window=3)
    for r in [1, 2, 3, 4, 5]:
        t.update(infos([True], [r]), frames=r, seconds=r)
    assert t.mean == 4.0 and t.best_mean == 4.0 and t.episodes == 5 and not t.solved
    t2 = EpisodeTracker(window=3)
    t2.load_state_dict(t.state_dict())
    t.update(infos([True], [9]), 6, 6)
    t2.update(infos([True], [9]), 6, 6)
    assert t2.state_dict() == t.state_dict()


def test_tracker_clear_error_without_vector_infos():
    with pytest.raises(KeyError, match="episode_end"):
        EpisodeTracker().update({"episode": {}}, 0, 0.0)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_csv_columns_known_first_and_widening(tmp_path):
    path = tmp_path / "metrics.csv"
    with MetricsLogger(path, columns=("loss",)) as log:
        log.log(100, {"seconds": 1.0, "fps": 100.0, "episodes": 0, "return_mean_100": math.nan})
        log.log(200, {"seconds": 2.0, "loss": 0.5, "epsilon": 0.9})  # epsilon is new
    lines = read_csv(path)
    assert lines[0] == [*KNOWN_COLUMNS, "loss", "epsilon"]
    assert all(len(line) == len(lines[0]) for line in lines)  # never a ragged row
    assert lines[1] == ["100", "1", "100", "0", "", "", ""]  # NaN -> empty cell
    assert lines[2] == ["200", "2", "", "", "", "0.5", "0.9"]


def test_resume_truncates_rows_after_checkpoint(tmp_path):
    path = tmp_path / "metrics.csv"
    with MetricsLogger(path) as log:
        for f in range(1, 6):
            log.log(f * 100, {"seconds": f, "return_mean_100": -21 + f, "loss": 1.0 / f})
    # the checkpoint was taken at 300 frames: rows 400 and 500 will be produced again
    with MetricsLogger(path, resume_frames=300) as log:
        assert log.columns[: len(KNOWN_COLUMNS)] == list(KNOWN_COLUMNS)
        log.log(400, {"seconds": 4.5, "return_mean_100": 0.0, "loss": 0.1, "q_mean": 3.0})
    header, rows = read_metrics(path)
    assert [r["frames"] for r in rows] == ["100", "200", "300", "400"]
    assert rows[-1]["seconds"] == "4.5" and rows[-1]["q_mean"] == "3" and rows[0]["q_mean"] == ""
    assert header[-1] == "q_mean"
    # no resume: a fresh file
    with MetricsLogger(path) as log:
        log.log(1, {})
    assert [r["frames"] for r in read_metrics(path)[1]] == ["1"]


def test_read_metrics_reads_a_gzipped_record_where_the_csv_is_gone(tmp_path):
    """docs/results keeps metrics.csv gzipped: the readers (curves, milestones) find it."""
    from rapidrl.train.launch import read_curve

    path = tmp_path / "metrics.csv"
    with MetricsLogger(path) as log:
        for f in range(1, 4):
            log.log(f * 100, {"seconds": 60.0 * f, "return_mean_100": -21 + f})
    plain = read_metrics(path)
    curve = read_curve(tmp_path)
    assert curve == [(1.0, 100.0, -20.0), (2.0, 200.0, -19.0), (3.0, 300.0, -18.0)]
    (tmp_path / "metrics.csv.gz").write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    assert read_metrics(path) == plain
    assert read_curve(tmp_path) == curve
    (tmp_path / "metrics.csv.gz").unlink()
    assert read_metrics(path) == ([], []) and read_curve(tmp_path) == []


def test_tensorboard_tags(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with MetricsLogger(tmp_path / "m.csv", tmp_path / "tb") as log:
        log.log(10, {"return_mean_100": 1.0, "td_loss": 0.5, "custom/x": 2.0})
        log.log(20, {"return_mean_100": 2.0, "td_loss": 0.25, "custom/x": 3.0})
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"charts/return_mean_100", "losses/td_loss", "custom/x"} <= tags
    assert [e.step for e in acc.Scalars("losses/td_loss")] == [10, 20]
