"""Sweeps: hyperparameter search over any config field, with seeds per trial.

:mod:`.spec` reads and checks a sweep described by one file (the runner on Ray Tune comes next).
"""

from rapidrl.sweep.spec import Range, SweepSpec, load_spec, parse_spec, trial_config

__all__ = ["Range", "SweepSpec", "load_spec", "parse_spec", "trial_config"]
