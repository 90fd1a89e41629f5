"""The Atari-5 (and Atari-10) estimate of the 57-game median human-normalized score that
``rapidrl bench atari`` reports for each algorithm beside Dopamine's: the formula by hand, the
clip of a negative score, no estimate without every game, the issue's worked figures (Dopamine
at 10M frames, PPO ``lean``'s 4-epoch suite) and the table ``--report`` writes."""

from __future__ import annotations

import json

import pytest

from rapidrl.bench.atari import (
    ATARI_SUBSET_HUMAN_RANDOM,
    ATARI_SUBSET_WEIGHTS,
    GAME_SETS,
    HUMAN_RANDOM,
    RunSpec,
    format_tables,
    human_normalized,
    main,
    reference_scores,
    subset_estimate,
    suite_medians,
    summarize_suite,
)

TEN_M = 10_027_008  # frames a 10M-frame run ends at (reference_scores reads Dopamine at 10M)

# PPO lean's 4-epoch suite at 10M frames, each game the median of seeds 1-3
# (docs/results/atari_ppo_lean_zen5/suite.md; suite.json in its data.tar.gz).
LEAN_4_EPOCHS = {
    "battle_zone": 19_660.0, "double_dunk": -14.86, "name_this_game": 6_972.5,
    "phoenix": 4_087.3, "qbert": 5_334.5,
}  # fmt: skip


def _score(game: str, hns_percent: float) -> float:
    """The raw score of a game at an HNS (in percent) by the Atari-5 table's random/human."""
    rnd, human = ATARI_SUBSET_HUMAN_RANDOM[game.replace("_", "")]
    return rnd + hns_percent / 100.0 * (human - rnd)


def test_the_estimate_by_hand():
    """HNS (percent) chosen so that each log10(1 + HNS) is a whole number: Battle Zone 99% (2),
    Double Dunk 0% (0), Name This Game 9% (1), Phoenix 0% (0), Q*bert 999% (3). With the
    paper's weights, log10(1 + median) = 0.38198 x 2 + 0.06791 x 0 + 0.31080 x 1 + 0.12413 x 0
    + 0.08049 x 3 = 0.76396 + 0.31080 + 0.24147 = 1.31623; 10^1.31623 = 20.711, so the
    estimate is 20.711 - 1 = 19.71% (0.1971 as a fraction, the unit of every HNS here)."""
    hns = {"battle_zone": 99, "double_dunk": 0, "name_this_game": 9, "phoenix": 0, "qbert": 999}
    scores = {game: _score(game, h) for game, h in hns.items()}
    assert subset_estimate("atari5", scores) == pytest.approx(0.19711, abs=5e-5)
    # Any spelling of the games' names: ours (battle_zone) or CamelCase (BattleZone).
    respelled = {"BattleZone": scores["battle_zone"], "DoubleDunk": scores["double_dunk"],
                 "NameThisGame": scores["name_this_game"], "Phoenix": scores["phoenix"],
                 "qbert": scores["qbert"]}  # fmt: skip
    assert subset_estimate("atari5", respelled) == pytest.approx(0.19711, abs=5e-5)
    # All at random (HNS 0): log10(1) = 0 on every game, no intercept: 10^0 - 1 = 0.
    assert subset_estimate("atari5", {g: _score(g, 0) for g in hns}) == pytest.approx(0.0)
    # All at human (HNS 100%): the weights sum to 0.96531, so log10(1 + median) = 0.96531 x
    # log10(101) = 0.96531 x 2.00432 = 1.93479; 10^1.93479 - 1 = 86.06 - 1 = 85.06%.
    assert sum(ATARI_SUBSET_WEIGHTS["atari5"].values()) == pytest.approx(0.96531, abs=1e-5)
    at_human = subset_estimate("atari5", {g: _score(g, 100) for g in hns})
    assert at_human == pytest.approx(0.8506, abs=1e-4)  # the weights rounded to 5 places


def test_a_negative_hns_counts_as_zero():
    """Double Dunk 4 points below random, -22.55 (HNS 100 x -4 / 2.15 = -186%), and Phoenix at
    a score of 0 (HNS 100 x -761.4 / 6481.2 = -11.7%) give the estimate of both at random (HNS
    0): max(HNS, 0) before the log, as the paper's fit did."""
    at_random = {g: _score(g, 50) for g in GAME_SETS["atari5"]}  # three games at 50%
    at_random.update(double_dunk=_score("double_dunk", 0), phoenix=_score("phoenix", 0))
    below = {**at_random, "double_dunk": -22.55, "phoenix": 0.0}
    assert subset_estimate("atari5", below) == subset_estimate("atari5", at_random)
    # By hand: 0.38198 x log10(51) + 0.31080 x log10(51) + 0.08049 x log10(51) = 0.77327 x
    # 1.70757 = 1.32041; 10^1.32041 - 1 = 19.91%.
    assert subset_estimate("atari5", below) == pytest.approx(0.1991, abs=5e-5)
    # ... while a positive HNS there raises it.
    raised = subset_estimate("atari5", {**at_random, "phoenix": _score("phoenix", 10)})
    assert raised > subset_estimate("atari5", at_random)


def test_no_estimate_without_every_game():
    scores = {g: _score(g, 50) for g in GAME_SETS["atari5"]}
    assert subset_estimate("atari5", scores) is not None
    assert subset_estimate("atari5", {**scores, "qbert": None}) is None  # no finished run
    del scores["qbert"]
    assert subset_estimate("atari5", {**scores, "breakout": 100.0}) is None
    assert subset_estimate("atari10", {g: _score(g, 50) for g in GAME_SETS["atari5"]}) is None


def test_the_subsets_and_their_normalization():
    """Atari-5 and Atari-10 are the paper's games (the named --games lists), each with a weight,
    and their random/human scores are the Atari-5 repo's: HUMAN_RANDOM's (dqn_zoo's) but for the
    second decimal of five random scores (Amidar, Bowling, Double Dunk, Name This Game, Q*bert)."""
    assert set(ATARI_SUBSET_WEIGHTS["atari5"]) == {g.replace("_", "") for g in GAME_SETS["atari5"]}
    assert set(ATARI_SUBSET_WEIGHTS["atari10"]) == {
        g.replace("_", "") for g in GAME_SETS["atari10"]
    }
    assert set(GAME_SETS["atari5"]) < set(GAME_SETS["atari10"]) < set(GAME_SETS["atari57"])
    differ = set()
    for game, (rnd, human) in ATARI_SUBSET_HUMAN_RANDOM.items():
        assert human == HUMAN_RANDOM[game][1]
        assert abs(rnd - HUMAN_RANDOM[game][0]) <= 0.05 + 1e-9  # a rounding apart
        if rnd != HUMAN_RANDOM[game][0]:
            differ.add(game)
    assert differ == {"amidar", "bowling", "doubledunk", "namethisgame", "qbert"}


@pytest.mark.parametrize(
    "subset, expected",
    [
        # The figures: Dopamine at 10M frames, Atari-5: Rainbow 43%, IQN 68% (DQN 10%).
        ("atari5", {"DQN": 10, "Rainbow": 43, "IQN": 68}),
        ("atari10", {"DQN": 11, "Rainbow": 32, "IQN": 58}),
    ],
)
def test_dopamine_at_10m_frames(subset, expected):
    for agent, percent in expected.items():
        scores = {g: reference_scores(g, TEN_M)[agent] for g in GAME_SETS[subset]}
        assert round(100 * subset_estimate(subset, scores)) == percent, agent


def test_ppo_lean_4_epochs_is_54_percent():
    """The issue's worked figure: the 4-epoch lean suite's medians give 54%."""
    assert round(100 * subset_estimate("atari5", LEAN_4_EPOCHS)) == 54


def _record(game, label, seed, final, frames=TEN_M):
    algo, preset = label.split(":")
    return dict(
        game=game, algo=algo, preset=preset, seed=seed, return_mean_100=final,
        best_return_mean_100=final, frames=frames, minutes=17.0, frames_per_second=9_800.0,
        hns=human_normalized(game, final), stop_reason="max_frames",
        reference=reference_scores(game, frames),
    )  # fmt: skip


def test_the_estimate_of_each_algo_over_its_seeds():
    """Each game the median of its seeds (two seeds: their mean); an ALGO:PRESET without one of
    the five games (or whose only run there failed) has none, and says which game it lacks."""
    records = [_record(g, "ppo:lean", 1, s) for g, s in LEAN_4_EPOCHS.items() if g != "qbert"]
    records += [_record("qbert", "ppo:lean", s, 5_334.5 + d) for s, d in ((1, -100), (2, 100))]
    records += [_record(g, "pqn:fast", 1, s) for g, s in LEAN_4_EPOCHS.items() if g != "phoenix"]
    records.append({**_record("phoenix", "pqn:fast", 1, None), "failed": "exit code 1"})
    lean, pqn = suite_medians(summarize_suite(records))
    assert lean["atari5"]["estimate"] == pytest.approx(subset_estimate("atari5", LEAN_4_EPOCHS))
    assert lean["atari5"]["missing"] == []
    dopamine = lean["atari5"]["dopamine"]
    assert dopamine["frames"] == 10_000_000
    assert [round(100 * dopamine[a]) for a in ("DQN", "Rainbow", "IQN")] == [10, 43, 68]
    assert lean["atari10"]["estimate"] is None and len(lean["atari10"]["missing"]) == 5
    assert pqn["atari5"] == {
        "estimate": None,
        "missing": ["phoenix"],
        "dopamine": {"frames": None, "DQN": None, "Rainbow": None, "IQN": None},
    }


def test_dopamine_only_at_one_frame_count():
    """Games that ran to different budgets have references at different frame counts: ours is
    still estimated, Dopamine's is not (it would mix its 5M and 10M scores)."""
    records = [_record(g, "ppo:lean", 1, s) for g, s in LEAN_4_EPOCHS.items()]
    records[0] = _record("battle_zone", "ppo:lean", 1, 19_660.0, frames=5_013_504)
    (m,) = suite_medians(summarize_suite(records))
    assert m["atari5"]["estimate"] is not None and m["atari5"]["dopamine"]["frames"] is None
    table = format_tables({"cpu": "c", "summary": summarize_suite(records), "runs": records,
                           "argv": ["x"]})  # fmt: skip
    assert "| ppo:lean | **54%** | - | 5 |" in table
    assert "Dopamine -: its table starts at 1M frames" in table


def test_the_atari10_columns_appear_with_its_ten_games():
    """Scores equal to Dopamine DQN's on the ten games estimate what Dopamine DQN's do."""
    records = [
        _record(g, "dqn:dqn", 1, reference_scores(g, TEN_M)["DQN"]) for g in GAME_SETS["atari10"]
    ]
    records += [_record(g, "ppo:lean", 1, s) for g, s in LEAN_4_EPOCHS.items()]
    table = format_tables(
        {"cpu": "c", "summary": summarize_suite(records), "runs": records, "argv": ["x"]}
    )
    assert "| algo:preset | Atari-5 estimate | Dopamine DQN / Rainbow / IQN, Atari-5 " in table
    assert "| Atari-10 estimate | Dopamine DQN / Rainbow / IQN, Atari-10 | games |" in table
    assert "| dqn:dqn | **10%** | 10% / 43% / 68% @10M | **11%** | 11% / 32% / 58% @10M | 10 |" in (
        table
    )
    assert "| ppo:lean | **54%** | 10% / 43% / 68% @10M | - | - | 5 |" in table
    assert "Atari-10 estimate -: it needs a finished run of each of its games (ppo:lean has no " \
        "amidar, bowling, frostbite, kung_fu_master, riverraid)." in table  # fmt: skip


def _canned_run(run_dir, *, final):
    run_dir.mkdir(parents=True)
    summary = dict(
        frames=TEN_M, seconds=1000.0, episodes=500, return_mean_100=final,
        best_return_mean_100=final, solved=False, frames_per_second=TEN_M / 1000.0,
        stop_reason="max_frames",
    )  # fmt: skip
    (run_dir / "summary.json").write_text(json.dumps(summary))
    rows = ["frames,seconds,return_mean_100", "0,0,0", f"{TEN_M},1000,{final}"]
    (run_dir / "metrics.csv").write_text("\n".join(rows) + "\n")


def test_the_report_gives_the_estimate(tmp_path, capsys):
    """``--report`` over run dirs of the five games (Breakout beside them, not in Atari-5):
    suite.json holds the estimates, suite.md's per-algo table leads with them, and says what
    the estimate is; an algo:preset without Phoenix gets "-" and the reason."""
    for game, final in {**LEAN_4_EPOCHS, "breakout": 90.03}.items():
        _canned_run(RunSpec(game, "ppo", "lean", 1).run_dir(tmp_path), final=final)
        if game != "phoenix":
            _canned_run(RunSpec(game, "ppo", "fast", 1).run_dir(tmp_path), final=final)
    games = ",".join(["breakout", *LEAN_4_EPOCHS])
    argv = ["--games", games, "--algos", "ppo:lean,ppo:fast", "--out-dir", str(tmp_path)]
    assert main([*argv, "--report"]) == 0
    assert "not finished: phoenix ppo:fast seed 1" in capsys.readouterr().out
    suite = json.loads((tmp_path / "suite.json").read_text())
    lean, fast = suite["medians"]
    assert round(100 * lean["atari5"]["estimate"], 1) == 54.0
    assert {a: round(100 * v) for a, v in lean["atari5"]["dopamine"].items() if a != "frames"} == {
        "DQN": 10, "Rainbow": 43, "IQN": 68
    }  # fmt: skip
    assert lean["atari10"]["estimate"] is None and fast["atari5"]["missing"] == ["phoenix"]
    md = (tmp_path / "suite.md").read_text()
    six = f"{lean['hns']:.2f} | {lean['reference_hns']['DQN']:.2f} / "
    assert f"| ppo:lean | **54%** | 10% / 43% / 68% @10M | 6 | {six}" in md
    assert "| ppo:fast | - | - | 5 |" in md
    assert "Atari-10 estimate" not in md  # no algo:preset ran its ten games
    assert "Atari-5 estimate: the 57-game median HNS that Atari-5 (Aitchison" in md
    assert "Atari-5 estimate -: it needs a finished run of each of its games (ppo:fast has no " \
        "phoenix)." in md  # fmt: skip
