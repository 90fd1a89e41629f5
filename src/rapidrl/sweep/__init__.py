"""Sweeps: hyperparameter search over any config field, with seeds per trial.

:mod:`.spec` reads and checks a sweep described by one file; :mod:`.run` runs it on Ray Tune
(``rapidrl sweep SPEC``), with :mod:`.tune_hooks` (its progress lines and time budget).
"""

from rapidrl.sweep.spec import Range, SweepSpec, load_spec, parse_spec, trial_config

__all__ = ["Range", "SweepSpec", "load_spec", "parse_spec", "trial_config"]
