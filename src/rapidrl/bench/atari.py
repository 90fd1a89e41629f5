"""``rapidrl bench atari``: a suite of games x algorithms/presets x seeds at one frame (or time)
budget, one table.

Each run is ``rapidrl train ALGO --preset PRESET --env GAME --seed S --max-frames F`` in its own
process, into ``OUT/GAME/ALGO-PRESET/seed-S/`` (its usual run directory), its log beside it.
Locally the runs go one after the other (each alone on the machine: two runs side by side halve
each other's speed); with ``--ray`` each run is a Ray task holding ``--cpus-per-run`` CPUs, so a
cluster runs as many at once as it has room for (:func:`run_on_ray`).

What it writes into ``--out-dir`` (rewritten after every finished run):

- ``suite.json``: every run's record (frames, minutes, frames/s, final and best mean-100 of real
  game scores, human-normalized scores, the reference scores at the same frame count, stop
  reason), the per game x algorithm medians, per algorithm the Atari-5 (and Atari-10) estimate
  of the 57-game median human-normalized score beside Dopamine's at the same frames
  (:func:`subset_estimates`) and the median over the suite's games, the command, the CPU;
- ``suite.md``: the same as tables, ready for a README;
- ``curves-GAME.png``: each run's mean-100 against wall-clock minutes and against frames.

Stopped and started again with the same ``--out-dir`` and the same lists, a suite goes on where it
left off: a finished run (``summary.json`` with a stop reason other than ``interrupted``) is kept
as it is; an unfinished run with a checkpoint resumes from its newest one (``rapidrl train ALGO
--resume``); an unfinished run without one starts again. Each run's recipe (its trainer command
but for the run dir, time budget and threads) is kept beside it (``seed-S.cmd.json``): a run dir
of another recipe (other trainer arguments, another frame budget, or the same command when its
preset gave another config) is refused before anything runs, never mixed into the table.

``rapidrl bench solve`` is this runner with one game and a stop score
(:mod:`rapidrl.bench.solve`).

Scores: ``return_mean_100`` is the mean real game score (unclipped, whole games, every life) of
the last 100 games played while training, as every trainer logs it. The human-normalized score
is ``(score - random) / (human - random)`` with the random and human scores of Mnih et al. (2015)
as tabulated in DeepMind's dqn_zoo (:data:`HUMAN_RANDOM`). The references are Dopamine's
published training curves (:func:`reference_scores`), another protocol: see
``dopamine_reference.json``'s ``protocol`` and the README.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from rapidrl.algos import ALGOS, DEFAULT_PRESETS, default_preset
from rapidrl.config import ConfigError
from rapidrl.hardware import describe, hardware_record
from rapidrl.train.launch import (
    launch_training,
    read_curve,
    read_summary,
    run_state,
    same_recipe,
    scores_at,
    split_extra,
    stopped_from_outside,
    time_split,
    trainer_argv,
)
from rapidrl.train.lock import RunLock
from rapidrl.train.plots import save_png

__all__ = [
    "ATARI_SUBSET_HUMAN_RANDOM",
    "ATARI_SUBSET_WEIGHTS",
    "GAME_SETS",
    "HUMAN_RANDOM",
    "BenchAtariConfig",
    "RunSpec",
    "bench_atari",
    "check_recipes",
    "config_changes",
    "format_tables",
    "human_normalized",
    "main",
    "recipe_command",
    "trainer_config",
    "reference_scores",
    "run_locally",
    "subset_estimate",
    "subset_estimates",
    "suite_medians",
    "summarize_suite",
    "write_results",
]


# (random, human) game scores: Mnih et al. 2015 (Nature DQN), extended to the 57 games as
# tabulated in google-deepmind/dqn_zoo (dqn_zoo/atari_data.py). Keys: our game names without "_".
HUMAN_RANDOM: dict[str, tuple[float, float]] = {
    "alien": (227.8, 7127.7), "amidar": (5.8, 1719.5), "assault": (222.4, 742.0),
    "asterix": (210.0, 8503.3), "asteroids": (719.1, 47388.7), "atlantis": (12850.0, 29028.1),
    "bankheist": (14.2, 753.1), "battlezone": (2360.0, 37187.5), "beamrider": (363.9, 16926.5),
    "berzerk": (123.7, 2630.4), "bowling": (23.1, 160.7), "boxing": (0.1, 12.1),
    "breakout": (1.7, 30.5), "centipede": (2090.9, 12017.0), "choppercommand": (811.0, 7387.8),
    "crazyclimber": (10780.5, 35829.4), "defender": (2874.5, 18688.9),
    "demonattack": (152.1, 1971.0), "doubledunk": (-18.6, -16.4), "enduro": (0.0, 860.5),
    "fishingderby": (-91.7, -38.7), "freeway": (0.0, 29.6), "frostbite": (65.2, 4334.7),
    "gopher": (257.6, 2412.5), "gravitar": (173.0, 3351.4), "hero": (1027.0, 30826.4),
    "icehockey": (-11.2, 0.9), "jamesbond": (29.0, 302.8), "kangaroo": (52.0, 3035.0),
    "krull": (1598.0, 2665.5), "kungfumaster": (258.5, 22736.3),
    "montezumarevenge": (0.0, 4753.3), "mspacman": (307.3, 6951.6),
    "namethisgame": (2292.3, 8049.0), "phoenix": (761.4, 7242.6), "pitfall": (-229.4, 6463.7),
    "pong": (-20.7, 14.6), "privateeye": (24.9, 69571.3), "qbert": (163.9, 13455.0),
    "riverraid": (1338.5, 17118.0), "roadrunner": (11.5, 7845.0), "robotank": (2.2, 11.9),
    "seaquest": (68.4, 42054.7), "skiing": (-17098.1, -4336.9), "solaris": (1236.3, 12326.7),
    "spaceinvaders": (148.0, 1668.7), "stargunner": (664.0, 10250.0), "surround": (-10.0, 6.5),
    "tennis": (-23.8, -8.3), "timepilot": (3568.0, 5229.2), "tutankham": (11.4, 167.6),
    "upndown": (533.4, 11693.2), "venture": (0.0, 1187.5), "videopinball": (16256.9, 17667.9),
    "wizardofwor": (563.5, 4756.5), "yarsrevenge": (3092.9, 54576.9), "zaxxon": (32.5, 9173.3),
}  # fmt: skip


# Named game lists for --games. Atari-5 (Aitchison et al. 2023, "Atari-5: Distilling the Arcade
# Learning Environment down to Five Games"): a regression on these five predicts the 57-game
# median human-normalized score. The 57 are the games of HUMAN_RANDOM, as ALE ROM names.
GAME_SETS: dict[str, tuple[str, ...]] = {
    "atari5": ("battle_zone", "double_dunk", "name_this_game", "phoenix", "qbert"),
    # Atari-10 (the same paper): Atari-5 and five more, a closer estimate (ATARI_SUBSET_WEIGHTS).
    "atari10": (
        "battle_zone", "double_dunk", "name_this_game", "phoenix", "qbert", "amidar", "bowling",
        "frostbite", "kung_fu_master", "riverraid",
    ),
    "atari57": (
        "alien", "amidar", "assault", "asterix", "asteroids", "atlantis", "bank_heist",
        "battle_zone", "beam_rider", "berzerk", "bowling", "boxing", "breakout", "centipede",
        "chopper_command", "crazy_climber", "defender", "demon_attack", "double_dunk", "enduro",
        "fishing_derby", "freeway", "frostbite", "gopher", "gravitar", "hero", "ice_hockey",
        "jamesbond", "kangaroo", "krull", "kung_fu_master", "montezuma_revenge", "ms_pacman",
        "name_this_game", "phoenix", "pitfall", "pong", "private_eye", "qbert", "riverraid",
        "road_runner", "robotank", "seaquest", "skiing", "solaris", "space_invaders",
        "star_gunner", "surround", "tennis", "time_pilot", "tutankham", "up_n_down", "venture",
        "video_pinball", "wizard_of_wor", "yars_revenge", "zaxxon",
    ),
}  # fmt: skip


def _key(game: str) -> str:
    return game.replace("_", "").replace("-", "").lower()


def human_normalized(game: str, score: float | None) -> float | None:
    """``(score - random) / (human - random)``; None for a game without published scores (or no
    score)."""
    if score is None or _key(game) not in HUMAN_RANDOM:
        return None
    rnd, human = HUMAN_RANDOM[_key(game)]
    return (score - rnd) / (human - rnd)


@lru_cache(maxsize=1)
def _dopamine() -> dict[str, Any]:
    return json.loads((Path(__file__).parent / "dopamine_reference.json").read_text())


def reference_scores(game: str, frames: float) -> dict[str, Any] | None:
    """Dopamine's DQN, C51, Rainbow and IQN at the largest tabulated frame count (1, 2, 5, 10,
    20, 50M) not beyond ``frames`` (2% slack: a 10M budget ends a little past 10M): ``{"frames":
    10_000_000, "DQN": 21.5, ...}`` (mean training return of 5 seeds), or None."""
    table = _dopamine()
    game_refs = table["games"].get(_key(game))
    fit = [m for m in table["frames_millions"] if m * 1e6 <= frames * 1.02]
    if game_refs is None or not fit:
        return None
    m = str(max(fit))
    out: dict[str, Any] = {"frames": int(max(fit) * 1e6)}
    for agent, by_frames in game_refs.items():
        if m in by_frames:
            out[agent] = by_frames[m]
    return out


# --------------------------------------------------------------------------------------------
# Atari-5 and Atari-10: the 57-game median HNS estimated from a few games
# --------------------------------------------------------------------------------------------
# Regression weights of Aitchison, Sweetser and Hutter, "Atari-5: Distilling the Arcade Learning
# Environment down to Five Games" (arXiv:2210.02019, 2022; ICML 2023), code at
# github.com/maitchison/Atari-5. Its atari5.py fits them and prints them; the fitted values are
# those of the authors' AtariScoreNormalizer.SUBSETS (github.com/maitchison/PPO,
# tools/plot_util.py, commit d3e3228): "Atari_5" (the paper's 0.38198, 0.06791, 0.31080,
# 0.12413, 0.08049 unrounded) and "Atari_10" (the five plus five more, each game its own weight).
# No intercept: a score of 0 on every game predicts 0.
ATARI_SUBSET_WEIGHTS: dict[str, dict[str, float]] = {
    "atari5": {
        "battlezone": 0.3819751237831753, "doubledunk": 0.0679099488887574,
        "namethisgame": 0.310804148620847, "phoenix": 0.12412619402774641,
        "qbert": 0.08048518286466755,
    },
    "atari10": {
        "amidar": 0.08246357439570691, "bowling": 0.0559032813915904,
        "frostbite": 0.06912572845204429, "kungfumaster": 0.09861731598935165,
        "riverraid": 0.048594292965417056, "battlezone": 0.18882008828001498,
        "doubledunk": 0.08519154019954558, "namethisgame": 0.12869695652405946,
        "phoenix": 0.16432707026384483, "qbert": 0.05922863791062832,
    },
}  # fmt: skip

# (random, human) scores the weights were fitted with: maitchison/Atari-5's Atari-Human.csv
# (commit 118cad5, columns Random and Human). Its random scores keep a second decimal that
# dqn_zoo's (HUMAN_RANDOM) round away, in five of these ten games (Amidar 5.77, Bowling 23.11,
# Double Dunk -18.55, Name This Game 2292.35, Q*bert 163.88); the human scores and the other
# five random scores are the same. The estimate normalizes as its fit did, so it uses these.
ATARI_SUBSET_HUMAN_RANDOM: dict[str, tuple[float, float]] = {
    "amidar": (5.77, 1719.5), "battlezone": (2360.0, 37187.5), "bowling": (23.11, 160.7),
    "doubledunk": (-18.55, -16.4), "frostbite": (65.2, 4334.7),
    "kungfumaster": (258.5, 22736.3), "namethisgame": (2292.35, 8049.0),
    "phoenix": (761.4, 7242.6), "qbert": (163.88, 13455.0), "riverraid": (1338.5, 17118.0),
}  # fmt: skip

# Dopamine's agents the estimate is given for beside ours.
SUBSET_REFERENCE_AGENTS = ("DQN", "Rainbow", "IQN")


def subset_estimate(subset: str, scores: Mapping[str, float | None]) -> float | None:
    """The Atari-5 (``subset="atari5"``) or Atari-10 estimate of the 57-game median
    human-normalized score, as a fraction like every HNS here (0.54 = 54%), from raw game scores
    by game (any spelling :func:`human_normalized` takes); None unless every game of the subset
    has a score.

    ``log10(1 + median) = sum_i w_i * log10(1 + max(HNS_i, 0))`` with the HNS in percent
    (Aitchison, Sweetser and Hutter 2022, "Atari-5: Distilling the Arcade Learning Environment
    down to Five Games"; github.com/maitchison/Atari-5): a negative HNS counts as 0."""
    weights = ATARI_SUBSET_WEIGHTS[subset]
    by_key = {_key(game): s for game, s in scores.items() if s is not None}
    if not weights.keys() <= by_key.keys():
        return None
    log_median = 0.0
    for game, weight in weights.items():
        rnd, human = ATARI_SUBSET_HUMAN_RANDOM[game]
        # Percent, the unit the weights were fitted in: log10(1 + x) is not scale-free.
        hns = 100.0 * (by_key[game] - rnd) / (human - rnd)
        log_median += weight * math.log10(1.0 + max(hns, 0.0))
    return (10.0**log_median - 1.0) / 100.0


def subset_estimates(games: Sequence[dict[str, Any]], subset: str) -> dict[str, Any]:
    """One ALGO:PRESET's :func:`subset_estimate` from its :func:`summarize_suite` rows (each
    game's median final mean-100 over its seeds), beside Dopamine's agents' from their scores on
    the same games at the frames each game's reference is read at: ``{"estimate": 0.54,
    "missing": [], "dopamine": {"frames": 10_000_000, "DQN": 0.10, "Rainbow": 0.43, "IQN":
    0.68}}``. ``missing`` names the games without a finished run (then no estimate, ours or
    Dopamine's); Dopamine's is None where its table has no score at those frames (below 1M) or
    the games' references are at different frame counts."""
    have = {_key(g["game"]): g for g in games if g.get("return_mean_100") is not None}
    weights = ATARI_SUBSET_WEIGHTS[subset]
    missing = [game for game in GAME_SETS[subset] if _key(game) not in have]
    dopamine: dict[str, Any] = {"frames": None, **dict.fromkeys(SUBSET_REFERENCE_AGENTS)}
    if missing:
        return {"estimate": None, "missing": missing, "dopamine": dopamine}
    estimate = subset_estimate(subset, {k: have[k]["return_mean_100"] for k in weights})
    refs = [have[k].get("reference") or {} for k in weights]
    frames = {ref.get("frames") for ref in refs}
    if len(frames) == 1 and None not in frames:  # one frame count: else it mixes budgets
        dopamine["frames"] = frames.pop()
        for agent in SUBSET_REFERENCE_AGENTS:
            dopamine[agent] = subset_estimate(
                subset, {k: ref.get(agent) for k, ref in zip(weights, refs)}
            )
    return {"estimate": estimate, "missing": [], "dopamine": dopamine}


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchAtariConfig:
    """Games x algorithms/presets x seeds at one budget: one table, curves, JSON; resumable."""

    games: str = "breakout,seaquest,space_invaders"
    """Comma-separated games (any alias `rapidrl train --env` takes: breakout, ALE/Qbert-v5, ...)
    and named lists: atari5 (the Atari-5 subset that predicts the 57-game median), atari10
    (Atari-5 and five more: a closer prediction), atari57."""
    algos: str = "ppo:lean"
    """Comma-separated ALGO:PRESET pairs (ppo, ppo-lstm, dqn, rainbow, pqn), e.g.
    ppo:lean,dqn:fast,rainbow:rainbow. ALGO alone takes the preset its trainer takes on each game
    (ppo: lean on Atari, mujoco on a MuJoCo env)."""
    seeds: str = "1"
    """Comma-separated seeds."""
    max_frames: int | None = 10_000_000
    """Frame budget of every run (emulator frames); None: each preset's own."""
    max_minutes: float | None = None
    """Wall-clock budget of every run (training minutes; None: the frame budget only)."""
    stop_at_score: str = "none"
    """Each trainer's --stop-at-score: none = always the whole budget (scores at one frame count);
    auto = stop where solved (Pong: 18), for time-to-solve comparisons; or a number."""
    out_dir: str = "bench_out/atari"
    """Where the runs and suite.json, suite.md, curves-GAME.png go. Run the same command again
    to go on with a suite that was stopped."""
    grace_minutes: float = 10.0
    """A run still alive this long past its budget is killed and reported as failed (only with
    --max-minutes; a frame budget alone has no time limit)."""
    ray: str | None = None
    """Run the suite on Ray: local = start Ray on this machine, else a cluster address (e.g.
    auto, ray://head:10001). Each run is a task with --cpus-per-run CPUs; a run whose node is
    lost is run again on another node, from its last checkpoint when --out-dir is on storage
    every node sees (else from the start). None: one run after the other here."""
    cpus_per_run: float = 2.0
    """CPUs each run holds on Ray (its trainer's threads and env workers share them)."""
    retries: int = 3
    """With --ray: how many times a run whose node or worker died is started again."""
    score_at: tuple[int, ...] = ()
    """Also table each run's mean-100 at these frame counts (env steps off Atari), e.g. 1000000
    for MuJoCo's 1M-step comparisons: the first metrics row at or past each, the update that
    reaches it; "-" where a run stopped before."""
    report: bool = False
    """Run nothing: write suite.json, suite.md and the curves from the runs of these lists that
    have finished (e.g. while a suite is stopped, or from run dirs carried from elsewhere) and
    name the ones that have not."""

    def validate(self) -> None:
        games = self.game_list()
        if not games:
            raise ConfigError("--games needs at least one game, e.g. --games breakout,pong")
        # Every name is checked before the first run: a typo in the last game of a suite would
        # otherwise surface hours in.
        from rapidrl.envs import UnknownEnvError, resolve_env

        for game in games:
            try:
                resolve_env(game)
            except UnknownEnvError as e:
                raise ConfigError(f"--games: {e}") from None
        self.algo_list()
        seeds = self.seed_list()
        if not seeds or len(set(seeds)) != len(seeds):
            raise ConfigError(f"--seeds needs distinct integers, e.g. 1,2,3; got {self.seeds!r}")
        if self.max_frames is not None and self.max_frames < 1:
            raise ConfigError(f"--max-frames must be >= 1 or None, got {self.max_frames}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ConfigError(f"--max-minutes must be > 0 or None, got {self.max_minutes}")
        if self.stop_at_score.lower() not in ("none", "auto"):
            try:
                float(self.stop_at_score)
            except ValueError:
                raise ConfigError(
                    f"--stop-at-score must be none, auto or a number; got {self.stop_at_score!r}"
                ) from None
        if any(n < 1 for n in self.score_at):
            raise ConfigError(f"--score-at takes frame counts >= 1, got {list(self.score_at)}")
        if self.cpus_per_run <= 0:
            raise ConfigError(f"--cpus-per-run must be > 0, got {self.cpus_per_run}")
        if self.retries < 0:
            raise ConfigError(f"--retries must be >= 0, got {self.retries}")

    def game_list(self) -> list[str]:
        """The games in order, named lists (GAME_SETS) expanded, each game once."""
        out: list[str] = []
        for item in (g.strip() for g in self.games.split(",") if g.strip()):
            out += GAME_SETS.get(_key(item), (item,))
        return list(dict.fromkeys(out))

    def algo_list(self, game: str | None = None) -> list[tuple[str, str]]:
        """``(algo, preset)`` pairs; an ALGO without a preset takes the one ``rapidrl train ALGO
        --env GAME`` takes (PPO on a MuJoCo game: ``mujoco``)."""
        out = []
        for item in (a.strip() for a in self.algos.split(",") if a.strip()):
            algo, _, preset = item.partition(":")
            if algo not in ALGOS:
                raise ConfigError(
                    f"--algos: unknown algorithm {algo!r} in {item!r}; choose from "
                    f"{', '.join(ALGOS)} (as ALGO:PRESET, e.g. ppo:lean)"
                )
            out.append((algo, preset or default_preset(algo, game)))
        if not out:
            raise ConfigError("--algos needs at least one ALGO:PRESET, e.g. ppo:lean")
        if len(set(out)) != len(out):
            raise ConfigError(f"--algos lists a pair twice: {self.algos}")
        return out

    def seed_list(self) -> list[int]:
        try:
            return [int(s) for s in self.seeds.split(",") if s.strip()]
        except ValueError:
            raise ConfigError(
                f"--seeds must be comma-separated integers; got {self.seeds!r}"
            ) from None

    def runs(self) -> list[RunSpec]:
        """Every run of the suite, in the order a local suite plays them: game by game."""
        return [
            RunSpec(game, algo, preset, seed)
            for game in self.game_list()
            for algo, preset in self.algo_list(game)
            for seed in self.seed_list()
        ]


@dataclass(frozen=True)
class RunSpec:
    """One run of the suite."""

    game: str
    algo: str
    preset: str
    seed: int

    @property
    def label(self) -> str:
        return f"{self.algo}:{self.preset}"

    def run_dir(self, out_dir: str | os.PathLike) -> Path:
        return Path(out_dir) / self.game / f"{self.algo}-{self.preset}" / f"seed-{self.seed}"


# --------------------------------------------------------------------------------------------
# One run: the command that takes it on in the state its run dir is in, its record
# --------------------------------------------------------------------------------------------
def recipe_command(
    b: BenchAtariConfig, spec: RunSpec, run_dir: Path, extra: Sequence[str]
) -> list[str]:
    """The trainer's command line that starts ``spec`` afresh: the run's recipe."""
    stop = "None" if b.stop_at_score.lower() == "none" else b.stop_at_score
    return trainer_argv(
        spec.algo, "--preset", spec.preset, "--env", spec.game, "--seed", str(spec.seed),
        "--run-dir", str(run_dir), "--stop-at-score", stop, *_budget(b), *extra,
    )  # fmt: skip


def _budget(b: BenchAtariConfig) -> list[str]:
    budget = ["--no-progress"]
    if b.max_frames is not None:
        budget += ["--max-frames", str(b.max_frames)]
    if b.max_minutes is not None:
        budget += ["--max-minutes", str(b.max_minutes)]
    if b.ray:  # the trainer's threads within the CPUs Ray gave the run
        budget += ["--torch-threads", str(max(1, int(b.cpus_per_run)))]
    return budget


def run_command(
    b: BenchAtariConfig, spec: RunSpec, run_dir: Path, extra: Sequence[str]
) -> list[str]:
    """The trainer's command line for ``spec`` in the state its run dir is in."""
    if run_state(run_dir) == "resume":  # the run's own config.json gives everything else
        return trainer_argv(spec.algo, "--resume", str(run_dir), *_budget(b))
    return recipe_command(b, spec, run_dir, extra)


def _recipe_file(run_dir: Path) -> Path:
    return run_dir.parent / f"{run_dir.name}.cmd.json"


def saved_recipe(run_dir: Path) -> list[str] | None:
    """The command that started the run in ``run_dir`` (``seed-S.cmd.json``), or None."""
    try:
        return list(json.loads(_recipe_file(run_dir).read_text())["command"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_recipes(b: BenchAtariConfig, extra: Sequence[str]) -> None:
    """Refuse, before any run, a run dir of this suite that another recipe started: a bench
    never mixes a new run with an old one. (A run dir without a saved recipe, from before they
    were saved, is taken as it is.)"""
    for spec in b.runs():
        run_dir = spec.run_dir(b.out_dir)
        old = saved_recipe(run_dir)
        if old is None or run_state(run_dir) == "fresh":
            continue  # nothing kept from it: it starts again
        new = recipe_command(b, spec, run_dir, extra)
        if same_recipe(old) != same_recipe(new):
            differs = " ".join(same_recipe(old)[4:])
            raise ConfigError(
                f"{run_dir} ran another recipe ({differs}): remove it to run it again, or "
                "choose another --out-dir (a bench never mixes a new run with an old one)"
            )
        changes = config_changes(spec.algo, new, run_dir)
        if changes:
            shown = ", ".join(f"{k} {a} -> {b}" for k, a, b in changes[:4])
            more = f" and {len(changes) - 4} more" if len(changes) > 4 else ""
            raise ConfigError(
                f"{run_dir} ran the same command when it gave another config (the preset "
                f"changed since: {shown}{more}): remove it to run it again, or choose another "
                "--out-dir (a bench never mixes a new run with an old one)"
            )


def trainer_config(algo: str, args: Sequence[str]) -> tuple[Any, tuple[str, ...]]:
    """The config ``rapidrl train ALGO ARGS`` trains with (parsed, nothing run) and the fields
    two runs of one recipe may differ in (those the trainer's resume does not compare)."""
    if algo in ("ppo", "ppo-lstm"):
        from rapidrl.algos.ppo.learner import RESUME_IGNORE_FIELDS
        from rapidrl.algos.ppo.train import LSTM_PRESETS, PRESETS, parse_ppo_args

        presets = PRESETS if algo == "ppo" else LSTM_PRESETS
        cfg = parse_ppo_args(args, f"rapidrl train {algo}", DEFAULT_PRESETS[algo], presets)
        return cfg, RESUME_IGNORE_FIELDS
    if algo in ("dqn", "rainbow"):
        from rapidrl.algos.dqn.learner import RESUME_IGNORE_FIELDS
        from rapidrl.algos.dqn.train import parse_dqn_args

        return parse_dqn_args(args, f"rapidrl train {algo}", DEFAULT_PRESETS[algo]), (
            RESUME_IGNORE_FIELDS
        )
    if algo == "pqn":
        from rapidrl.algos.pqn.learner import RESUME_IGNORE_FIELDS
        from rapidrl.algos.pqn.train import parse_pqn_args

        return parse_pqn_args(args), RESUME_IGNORE_FIELDS
    if algo == "sac":
        from rapidrl.algos.sac.learner import RESUME_IGNORE_FIELDS
        from rapidrl.algos.sac.train import parse_sac_args

        return parse_sac_args(args), RESUME_IGNORE_FIELDS
    raise ValueError(f"unknown trainer {algo!r}; known: {', '.join(ALGOS)}")


def config_changes(algo: str, recipe: Sequence[str], run_dir: Path) -> list[tuple[str, Any, Any]]:
    """What the run in ``run_dir`` trained with (its ``config.json``) against what its recipe
    (a :func:`recipe_command`) gives today, as ``(field, then, now)``: a preset that changed
    since the run makes the same command another recipe. Empty without a ``config.json``."""
    from rapidrl.config import config_from_dict
    from rapidrl.train.run import config_diff

    path = run_dir / "config.json"
    if not path.is_file():
        return []
    now, ignore = trainer_config(algo, list(recipe)[5:])  # after python -m rapidrl.cli train ALGO
    try:
        then = config_from_dict(type(now), json.loads(path.read_text()))
    except ValueError as exc:  # unreadable JSON, or fields this version no longer has
        raise ConfigError(
            f"{path} is not a config this version reads ({exc}): remove {run_dir} to run it "
            "again, or choose another --out-dir"
        ) from exc
    return config_diff(then, now, ignore=ignore)


def execute_run(b: BenchAtariConfig, spec: RunSpec, extra: Sequence[str] = ()) -> dict[str, Any]:
    """Take one run to its end (kept if done, resumed, or started) and return its record."""
    run_dir = spec.run_dir(b.out_dir)
    state = run_state(run_dir)
    where = run_dir.parent / f"seed-{spec.seed}.node"  # the machine (Ray node) it ran on last
    if state != "done":
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(_where() + "\n")
        if state == "fresh":
            if run_dir.exists():
                shutil.rmtree(run_dir)  # a start that died before its first checkpoint
            recipe = recipe_command(b, spec, run_dir, extra)
            _recipe_file(run_dir).write_text(json.dumps({"command": recipe}, indent=1) + "\n")
        cmd = run_command(b, spec, run_dir, extra)
        limit = None if b.max_minutes is None else 60.0 * (b.max_minutes + b.grace_minutes) + 120
        log = run_dir.parent / f"seed-{spec.seed}.log"
        rc, _ = launch_training(cmd, log, limit if limit is not None else 10 * 24 * 3600.0)
        if rc == 0 and stopped_from_outside(run_dir):
            # A signal stopped the trainer alone (kill -INT PID, a scheduler's SIGTERM): it
            # checkpointed and exited 0. Not a failure of the run: the suite stops here.
            why = "interrupted: checkpoint kept, the same command goes on from it"
            return {**asdict(spec), "run_dir": str(run_dir), "failed": why, "interrupted": True}
        if rc != 0 or run_state(run_dir) != "done":
            why = "killed after the time limit" if rc is None else f"exit code {rc}"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            return {**asdict(spec), "run_dir": str(run_dir), "failed": why, "log_tail": tail}
    return {**finished_record(spec, run_dir, b.score_at), "kept": state == "done"}


def finished_record(spec: RunSpec, run_dir: Path, score_at: Sequence[int] = ()) -> dict[str, Any]:
    """The record of a finished run, with the machine it ran on last (its ``.node`` file)."""
    where = run_dir.parent / f"seed-{spec.seed}.node"
    node = where.read_text().strip() if where.exists() else None
    record = run_record(spec, run_dir, score_at)
    return {**record, "node": node, "command": saved_recipe(run_dir)}


def _where() -> str:
    """The machine (and Ray node, inside a Ray task) a run is taken on."""
    import socket

    where = socket.gethostname()
    ray = sys.modules.get("ray")  # imported in a Ray worker; never imported here for this
    if ray is not None and ray.is_initialized():
        where += " ray-node " + ray.get_runtime_context().get_node_id()
    return where


def run_record(spec: RunSpec, run_dir: Path, score_at: Sequence[int] = ()) -> dict[str, Any]:
    """A finished run's row: its summary's numbers, the human-normalized scores and the
    references at its frame count; with ``score_at`` (--score-at), ``at_frames``: the mean-100
    and minutes at the update that reached each count (:func:`scores_at`; None where the run
    stopped before). Made once, where the run dir is (a Ray task's node)."""
    s = read_summary(run_dir) or {}
    final, best = s.get("return_mean_100"), s.get("best_return_mean_100")
    frames = int(s.get("frames") or 0)
    record = {
        **asdict(spec),
        "run_dir": str(run_dir),
        "frames": frames,
        "minutes": float(s.get("seconds") or 0.0) / 60.0,
        "frames_per_second": s.get("frames_per_second"),
        "episodes": s.get("episodes"),
        "return_mean_100": final,
        "best_return_mean_100": best,
        "hns": human_normalized(spec.game, final),
        "best_hns": human_normalized(spec.game, best),
        "stop_reason": s.get("stop_reason"),
        "solved": s.get("solved"),
        "minutes_to_solve": (s["seconds_to_solve"] / 60.0) if s.get("seconds_to_solve") else None,
        "frames_to_solve": s.get("frames_to_solve"),
        "reference": reference_scores(spec.game, frames),
        "eval_mean": s.get("eval_mean"),  # --eval-episodes: the final policy, greedy
        "eval_episodes": s.get("eval_episodes"),
        **time_split(run_dir / "metrics.csv"),
    }
    if score_at:
        hits = scores_at(run_dir, score_at)
        record["at_frames"] = [
            {"frames": n, "return_mean_100": None, "minutes": None}
            if h is None
            else {"frames": n, "return_mean_100": h[0], "minutes": h[1]}
            for n, h in zip(score_at, hits)
        ]
    return record


# --------------------------------------------------------------------------------------------
# The suite: local or on Ray, then the tables
# --------------------------------------------------------------------------------------------
def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _medians_at(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per frame count of the runs' ``at_frames``: the median over the runs that reached it of
    the mean-100 and the minutes, and how many reached it."""
    counts = [a["frames"] for a in next((r["at_frames"] for r in runs if "at_frames" in r), [])]
    out = []
    for i, n in enumerate(counts):
        hits = [r["at_frames"][i] for r in runs if "at_frames" in r]
        hits = [h for h in hits if h["return_mean_100"] is not None]
        out.append(
            {
                "frames": n,
                "return_mean_100": _median([h["return_mean_100"] for h in hits]),
                "minutes": _median([h["minutes"] for h in hits]),
                "reached": len(hits),
            }
        )
    return out


def summarize_suite(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per game x ALGO:PRESET: the median (and min, max) over seeds of the final mean-100, its
    human-normalized score, minutes and frames/s; failed runs are counted, not averaged."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["game"], f"{r['algo']}:{r['preset']}"), []).append(r)
    out = []
    for (game, label), rs in groups.items():
        ok = [r for r in rs if "failed" not in r]
        finals = [r["return_mean_100"] for r in ok if r.get("return_mean_100") is not None]
        evals = [r["eval_mean"] for r in ok if r.get("eval_mean") is not None]
        out.append(
            {
                "game": game,
                "algo": label,
                "seeds": len(rs),
                "failed": len(rs) - len(ok),
                "return_mean_100": _median(finals),
                "min": min(finals) if finals else None,
                "max": max(finals) if finals else None,
                "hns": human_normalized(game, _median(finals)),
                "best_return_mean_100": _median(
                    [
                        r["best_return_mean_100"]
                        for r in ok
                        if r.get("best_return_mean_100") is not None
                    ]
                ),
                "frames": _median([r["frames"] for r in ok]),
                "minutes": _median([r["minutes"] for r in ok]),
                "frames_per_second": _median(
                    [r["frames_per_second"] for r in ok if r.get("frames_per_second")]
                ),
                "reference": next((r["reference"] for r in ok if r.get("reference")), None),
                "at_frames": _medians_at(ok),
                "eval_mean": _median(evals),
                "eval_seeds": [r.get("eval_mean") for r in ok],
            }
        )
    return out


def suite_medians(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per ALGO:PRESET: the Atari-5 and Atari-10 estimates of the 57-game median HNS with
    Dopamine's beside them (:func:`subset_estimates`; each None without all the subset's games):
    the one-number comparison of a suite; then the median over its games of the per-game HNS
    (each game the median of its seeds), and Dopamine's agents' median HNS over the same games
    at the frames each game's reference is read at."""
    by_algo: dict[str, list[dict[str, Any]]] = {}
    for g in summary:
        if g["hns"] is not None:
            by_algo.setdefault(g["algo"], []).append(g)
    out = []
    for label, games in by_algo.items():
        refs: dict[str, float | None] = {}
        for agent in ("DQN", "Rainbow"):
            scores = [(g["game"], (g["reference"] or {}).get(agent)) for g in games]
            hns = [human_normalized(game, s) for game, s in scores if s is not None]
            # Only where the agent has a score for every game: else the medians differ in games.
            refs[agent] = _median(hns) if len(hns) == len(games) else None
        out.append(
            {
                "algo": label,
                "atari5": subset_estimates(games, "atari5"),
                "atari10": subset_estimates(games, "atari10"),
                "games": len(games),
                "hns": _median([g["hns"] for g in games]),
                "reference_hns": refs,
            }
        )
    return out


def _num(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _frames(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e6:.2f}M"


def _refs(ref: dict[str, Any] | None) -> str:
    if not ref:
        return "-"
    at = f"{ref['frames'] / 1e6:g}M"
    return f"{_num(ref.get('DQN'))} / {_num(ref.get('Rainbow'))} @{at}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.0f}%"


def _subset_cells(entry: dict[str, Any]) -> str:
    """``| **54%** | 10% / 43% / 68% @10M `` (ours, then Dopamine's DQN / Rainbow / IQN)."""
    ref = entry["dopamine"]
    dopamine = "-"
    if ref["frames"] is not None:
        agents = " / ".join(_pct(ref[agent]) for agent in SUBSET_REFERENCE_AGENTS)
        dopamine = f"{agents} @{ref['frames'] / 1e6:g}M"
    ours = _pct(entry["estimate"])
    if entry["estimate"] is not None:
        ours = f"**{ours}**"
    return f"| {ours} | {dopamine} "


def _medians_table(medians: list[dict[str, Any]]) -> list[str]:
    """The per ALGO:PRESET table: the Atari-5 estimate (the headline), the Atari-10 one where
    some ALGO:PRESET ran its ten games, the median HNS of the suite's games; beneath it, what
    they are and why a cell is "-"."""
    names = {"atari5": "Atari-5", "atari10": "Atari-10"}
    subsets = ["atari5"]
    if any(m["atari10"]["estimate"] is not None for m in medians):
        subsets.append("atari10")
    head = "| algo:preset "
    for subset in subsets:
        head += f"| {names[subset]} estimate | Dopamine DQN / Rainbow / IQN, {names[subset]} "
    lines = [
        head + "| games | median HNS | Dopamine DQN / Rainbow, same games and frames |",
        "| --- " * (1 + 2 * len(subsets) + 3) + "|",
    ]
    for m in medians:
        ref = m["reference_hns"]
        lines.append(
            f"| {m['algo']} {''.join(_subset_cells(m[subset]) for subset in subsets)}"
            f"| {m['games']} | {_num(m['hns'], '.2f')} "
            f"| {_num(ref['DQN'], '.2f')} / {_num(ref['Rainbow'], '.2f')} |"
        )
    ten = (
        " (Atari-10, those five and Amidar, Bowling, Frostbite, Kung-Fu Master and Riverraid: 7%)"
        if "atari10" in subsets
        else ""
    )
    lines += [
        "",
        "Atari-5 estimate: the 57-game median HNS that Atari-5 (Aitchison, Sweetser and Hutter "
        '2022, "Atari-5: Distilling the Arcade Learning Environment down to Five Games") '
        "predicts from Battle Zone, Double Dunk, Name This Game, Phoenix and Q*bert, each game "
        "the median of its seeds: log10(1 + median) = sum of w_i log10(1 + max(HNS_i, 0)), HNS "
        f"in percent; the paper puts it within about 10% of the true median{ten}. Dopamine's: "
        "the same estimate from its scores on those games at the frames shown. Median HNS: over "
        "this suite's games (the HNS column above; 1.00 = human).",
    ]
    for subset in subsets:
        lacking = [
            f"{m['algo']} has no {', '.join(m[subset]['missing'])}"
            for m in medians
            if m[subset]["missing"]
        ]
        if lacking:
            lines += [
                "",
                f"{names[subset]} estimate -: it needs a finished run of each of its games "
                f"({'; '.join(lacking)}).",
            ]
    if any(
        m[subset]["estimate"] is not None and m[subset]["dopamine"]["frames"] is None
        for m in medians
        for subset in subsets
    ):
        lines += [
            "",
            "Dopamine -: its table starts at 1M frames, and one estimate takes its scores at "
            "one frame count (these games ran to different ones).",
        ]
    return lines


def format_tables(result: dict[str, Any]) -> str:
    """``suite.md``: the per game x algorithm medians, each algorithm's Atari-5 (and Atari-10)
    estimate of the 57-game median HNS and its median HNS over the games, then every run, the
    command and CPU."""
    # --score-at: one more column per frame count, in both tables (the counts of the first
    # game that has them: every run of a suite is read at the same ones).
    first = next((g["at_frames"] for g in result["summary"] if g.get("at_frames")), [])
    at = [a["frames"] for a in first]
    at_head = "".join(f" mean-100 at {_frames(n)} (minutes) |" for n in at)
    at_rule = " --- |" * len(at)
    lines = [
        f"rapidrl bench atari, {result['cpu']}",
        "",
        "| game | algo:preset | seeds | frames | minutes | frames/s | mean-100 (final, median) "
        "| min-max | HNS | best mean-100 | Dopamine DQN / Rainbow |" + at_head,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |" + at_rule,
    ]
    for g in result["summary"]:
        seeds = f"{g['seeds'] - g['failed']}/{g['seeds']}"
        spread = f"{_num(g['min'])}..{_num(g['max'])}" if g["min"] is not None else "-"
        lines.append(
            f"| {g['game']} | {g['algo']} | {seeds} | {_frames(g['frames'])} "
            f"| {_num(g['minutes'])} | {_num(g['frames_per_second'], ',.0f')} "
            f"| **{_num(g['return_mean_100'])}** | {spread} | {_num(g['hns'], '.2f')} "
            f"| {_num(g['best_return_mean_100'])} | {_refs(g['reference'])} |"
            + _at_cells(g.get("at_frames"), len(at), seeds=g["seeds"] - g["failed"])
        )
    medians = suite_medians(result["summary"])
    if medians:  # only games with human scores (Atari) have HNS and the Atari-5 estimate
        lines += ["", *_medians_table(medians)]
    lines += _eval_table(result["summary"])
    lines += [
        "",
        "| game | algo:preset | seed | frames | minutes | frames/s | mean-100 | best | HNS | stop |"
        + at_head,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |" + at_rule,
    ]
    for r in result["runs"]:
        head = f"| {r['game']} | {r['algo']}:{r['preset']} | {r['seed']} "
        if "failed" in r:
            lines.append(head + f"| failed: {r['failed']} | | | | | | |" + " |" * len(at))
            continue
        lines.append(
            head + f"| {_frames(r['frames'])} | {r['minutes']:.1f} "
            f"| {_num(r['frames_per_second'], ',.0f')} | {_num(r['return_mean_100'])} "
            f"| {_num(r['best_return_mean_100'])} | {_num(r['hns'], '.2f')} | {r['stop_reason']} |"
            + _at_cells(r.get("at_frames"), len(at))
        )
    atari = any(g["hns"] is not None or g["reference"] for g in result["summary"])
    lines += [
        "",
        "Scores: mean real game score of the last 100 training games. HNS: human-normalized "
        "(Mnih et al. 2015 random/human scores). Dopamine: mean training return of 5 seeds over the "
        "1M frames ending at the frame count shown, sticky actions 0.25, no life-loss signal."
        if atari
        else "Scores: mean return of the last 100 training episodes. Frames: env steps summed over "
        "the envs (no frame skip off Atari).",
    ]
    if at:
        lines += [
            "",
            "mean-100 at N: at the first metrics row at or past N frames (the update that reaches "
            "N), its minutes in brackets; for a game, the median over the seeds that reached N "
            "(how many, when not all); -: stopped before N.",
        ]
    lines += ["", "`" + " ".join(result["argv"]) + "`"]
    return "\n".join(lines) + "\n"


def _eval_table(summary: list[dict[str, Any]]) -> list[str]:
    """The final evals of ``-- --eval-episodes N`` (the final policy played greedily, the SB3
    zoo's protocol): per game x ALGO:PRESET their median and each seed's; [] when no run has
    one."""
    rows = [g for g in summary if g.get("eval_mean") is not None]
    if not rows:
        return []
    lines = [
        "",
        "| game | algo:preset | final eval, median | each seed's |",
        "| --- | --- | --- | --- |",
    ]
    for g in rows:
        each = " / ".join(_num(x) for x in g["eval_seeds"])
        lines.append(f"| {g['game']} | {g['algo']} | **{_num(g['eval_mean'])}** | {each} |")
    lines += [
        "",
        "Final eval: the mean score of --eval-episodes full episodes of each run's final policy, "
        "greedy (`rapidrl eval RUN --episodes N`; -: a run without one).",
    ]
    return lines


def _at_cells(at: list[dict[str, Any]] | None, columns: int, seeds: int | None = None) -> str:
    """The --score-at cells of a table row: "score (minutes)", "-" where not reached; with
    ``seeds`` (a game's row), "of K" when fewer than ``seeds`` runs reached the count."""
    cells = []
    for a in (at or [])[:columns]:
        if a["return_mean_100"] is None:
            cells.append(" - |")
            continue
        some = seeds is not None and a.get("reached", seeds) < seeds
        of = f", {a['reached']} of {seeds}" if some else ""
        cells.append(f" {_num(a['return_mean_100'])} ({_num(a['minutes'])}{of}) |")
    cells += [" - |"] * (columns - len(cells))
    return "".join(cells)


def plot_games(b: BenchAtariConfig, records: list[dict[str, Any]], out: Path) -> None:
    """``curves-GAME.png``: each run's mean-100 against minutes (left) and frames (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for game in b.game_list():
        fig, (ax_t, ax_f) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for r in (r for r in records if r["game"] == game):
            pts = read_curve(Path(r["run_dir"]))
            if pts:
                mins, frames, ret = zip(*pts)
                label = f"{r['algo']}:{r['preset']} s{r['seed']}"
                ax_t.plot(mins, ret, label=label)
                ax_f.plot(frames, ret, label=label)
        for ax, xlabel in ((ax_t, "minutes"), (ax_f, "frames")):
            ax.set_xlabel(xlabel)
            ax.grid(alpha=0.3)
        ax_t.set_ylabel("return_mean_100")
        if ax_f.get_legend_handles_labels()[0]:
            ax_f.legend(loc="best", fontsize=7)
        fig.suptitle(game)
        fig.tight_layout()
        try:
            save_png(fig, out / f"curves-{game}.png", dpi=90)
        finally:
            plt.close(fig)


def write_results(
    b: BenchAtariConfig, records: list[dict[str, Any]], extra: Sequence[str], argv: Sequence[str]
) -> dict[str, Any]:
    """suite.json and suite.md for the records so far (rewritten after every run)."""
    out = Path(b.out_dir)
    result = {
        "config": asdict(b),
        "extra_args": list(extra),
        "argv": ["rapidrl", "bench", "atari", *argv],
        "cpu": describe(),
        "hardware": hardware_record(),
        "runs": records,
        "summary": summarize_suite(records),
    }
    result["medians"] = suite_medians(result["summary"])
    tmp = out / "suite.json.tmp"
    tmp.write_text(json.dumps(result, indent=2, default=str) + "\n")
    os.replace(tmp, out / "suite.json")
    (out / "suite.md").write_text(format_tables(result))
    return result


def run_locally(
    b: BenchAtariConfig, extra: Sequence[str], done: Callable[[dict[str, Any]], None]
) -> list[dict[str, Any]]:
    """One run after the other in this machine; ``done(record)`` after each."""
    records = []
    for spec in b.runs():
        state = run_state(spec.run_dir(b.out_dir))
        verb = {"done": "kept (finished before)", "resume": "resuming", "fresh": "starting"}[state]
        print(f"  {spec.game} {spec.label} seed {spec.seed}: {verb}", flush=True)
        record = execute_run(b, spec, extra)
        records.append(record)
        done(record)
        if record.get("interrupted"):  # stopped from outside: so is the suite, as with Ctrl-C
            print("  suite stopped: the same command goes on from here", flush=True)
            break
    return records


def run_on_ray(
    b: BenchAtariConfig, extra: Sequence[str], done: Callable[[dict[str, Any]], None]
) -> list[dict[str, Any]]:
    """Every run as a Ray task of ``cpus_per_run`` CPUs (Ray places them where there is room and
    starts a task again, up to ``retries`` times, when its node or worker process dies: the new
    attempt resumes from the run's checkpoint when it can see it). ``done(record)`` as each
    finishes, in the order they finish; the records come back in the suite's order."""
    import ray

    from rapidrl.distributed.training import check_ray

    check_ray(b.ray)
    if not ray.is_initialized():
        ray.init(address=b.ray, log_to_driver=False)  # "local": a new local Ray
    task = ray.remote(execute_run).options(
        num_cpus=b.cpus_per_run, max_retries=b.retries, retry_exceptions=False
    )
    specs = b.runs()
    pending = {task.remote(b, spec, list(extra)): i for i, spec in enumerate(specs)}
    records: list[dict[str, Any] | None] = [None] * len(specs)
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        i = pending.pop(ready[0])
        try:
            records[i] = ray.get(ready[0])
        except ray.exceptions.RayError as exc:  # retries spent: the node or worker kept dying
            spec = specs[i]
            records[i] = {
                **asdict(spec),
                "run_dir": str(spec.run_dir(b.out_dir)),
                "failed": f"Ray task failed after {b.retries} retries: {type(exc).__name__}",
                "log_tail": str(exc)[-2000:],
            }
        done(records[i])
    return [r for r in records if r is not None]


def bench_atari(b: BenchAtariConfig, extra: Sequence[str] = (), argv: Sequence[str] = ()) -> dict:
    """Run (or go on with) the suite; write suite.json, suite.md and the curves; return the
    result."""
    b.validate()
    # One bench writes an out dir at a time (each trainer locks its own run dir too).
    with RunLock(b.out_dir, "suite directory"):
        return _bench_atari(b, extra, argv)


def _bench_atari(b: BenchAtariConfig, extra: Sequence[str] = (), argv: Sequence[str] = ()) -> dict:
    out = Path(b.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    where = f"on Ray ({b.ray}, {b.cpus_per_run:g} CPUs a run)" if b.ray else "one run at a time"
    runs = b.runs()
    budget = "each preset's frames" if b.max_frames is None else f"{b.max_frames:,} frames each"
    print(f"bench atari: {len(runs)} runs, {where}, {budget}; {describe()}")
    finished: list[dict[str, Any]] = []

    def done(record: dict[str, Any]) -> None:
        finished.append(record)
        write_results(b, finished, extra, argv)
        _plot_quietly(b, finished, out)  # a stopped suite keeps the curves of its finished runs
        if "failed" in record:
            what = "stopped" if record.get("interrupted") else "FAILED"
            print(f"  {record['game']} {record['algo']}:{record['preset']} seed {record['seed']}: "
                  f"{what} ({record['failed']})", flush=True)  # fmt: skip
        else:
            print(f"  {record['game']} {record['algo']}:{record['preset']} seed {record['seed']}: "
                  f"mean-100 {_num(record['return_mean_100'])} after "
                  f"{record['frames']:,} frames, {record['minutes']:.1f} min", flush=True)  # fmt: skip

    if b.report:
        records, unfinished = [], []
        for spec in runs:
            run_dir = spec.run_dir(b.out_dir)
            if run_state(run_dir) == "done":
                records.append(finished_record(spec, run_dir, b.score_at))
            else:
                unfinished.append(f"{spec.game} {spec.label} seed {spec.seed}")
        print(f"  report: {len(records)} runs finished; not finished: "
              f"{', '.join(unfinished) or 'none'}", flush=True)  # fmt: skip
    else:
        check_recipes(b, extra)
        records = (run_on_ray if b.ray else run_locally)(b, extra, done)
    result = write_results(b, records, extra, argv)
    print(format_tables(result))
    _plot_quietly(b, records, out)
    return result


def _plot_quietly(b: BenchAtariConfig, records: list[dict[str, Any]], out: Path) -> None:
    """:func:`plot_games`, a failure reported on stderr: a plot must never lose the tables."""
    try:
        plot_games(b, records, out)
    except Exception as exc:
        print(f"could not plot: {exc}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """``rapidrl bench atari [--config FILE] [--games ...] [--algos ppo:lean] [--seeds 1]
    [-- TRAINER ARGS]``: ``--config`` holds the bench's fields (flags override it)."""
    from rapidrl.config import parse_config

    argv = list(sys.argv[1:] if argv is None else argv)
    own, extra = split_extra(argv)
    try:
        b = parse_config(BenchAtariConfig, {}, own, prog="rapidrl bench atari", description=__doc__)
        result = bench_atari(b, extra, argv)
    except ConfigError as exc:
        print(f"rapidrl: error: {exc}", file=sys.stderr)
        return 2
    return 0 if all("failed" not in r for r in result["runs"]) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
