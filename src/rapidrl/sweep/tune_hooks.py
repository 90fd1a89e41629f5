"""What ``rapidrl sweep`` hands Ray Tune besides the trainable: the progress lines (a Tune
``Callback``: one line as each trial starts and ends, and a progress line) and the time budget
(``budget.hours``) that remembers it ran out. Imports Ray: :func:`rapidrl.sweep.run.run_sweep`
imports it once it has checked Ray's version.

Both run in the Tune driver (this process, on a cluster given by its address too; with a Ray
Client address, ``ray://``, Tune runs on the cluster and the lines stay there)."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from ray.tune import Callback
from ray.tune.stopper import TimeoutStopper

from rapidrl.sweep.lines import progress_line, trial_end, trial_line

__all__ = ["Budget", "Progress"]


class Budget(TimeoutStopper):
    """``budget.hours`` as Tune's time budget (what ``TuneConfig(time_budget_s=...)`` makes),
    setting :attr:`spent` once it ran out: the trials still running then were cut by the budget,
    not stopped by a Ctrl-C. A class attribute, since Tune pickles the stopper with the
    experiment and ``--resume`` runs an unpickled copy."""

    spent: ClassVar[bool] = False

    def stop_all(self) -> bool:
        if super().stop_all():
            Budget.spent = True
            return True
        return False


class Progress(Callback):
    """Prints a line as each trial starts and as it ends (parameters, score, frames, how it
    ended), then how many trials have ended and how, as ``rapidrl bench atari`` does. Trials the
    sweep's end cut are printed by ``run_sweep`` from Tune's results."""

    def __init__(self, total: int):
        self.total = total
        self._t0 = time.monotonic()

    def setup(self, **info: Any) -> None:
        self._t0 = time.monotonic()  # this session's start (Tune unpickles us on --resume)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        print(trial_line(trial.trial_id, trial.config, {}, "started"), flush=True)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # Tune calls this when a trial returns and when its scheduler stops it (after marking
        # that result done): the two ends a trial reaches on its own.
        self._ended(trials, trial, trial_end(trial.last_result, None, budget_spent=False))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        try:  # the exception itself where Tune kept it pickled, else its text
            error = trial.get_pickled_error() or trial.get_error()
        except Exception:  # Tune's files; a line without the error beats no line
            error = None
        self._ended(trials, trial, "failed", error or "see its error.txt in the Tune folder")

    def _ended(self, trials: list, trial: Any, end: str, error: Any = None) -> None:
        print(trial_line(trial.trial_id, trial.config, trial.last_result, end, error), flush=True)
        states = []
        for t in trials:
            if t is trial:
                states.append(end)
            elif t.status == "ERROR":
                states.append("failed")
            elif t.status == "TERMINATED":
                states.append(trial_end(t.last_result, None, budget_spent=False))
            else:  # PENDING, RUNNING, PAUSED
                states.append(t.status.lower())
        minutes = (time.monotonic() - self._t0) / 60.0
        print(progress_line(states, self.total, minutes), flush=True)
