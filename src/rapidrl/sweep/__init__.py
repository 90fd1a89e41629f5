"""Sweeps: hyperparameter search over any config field, with seeds per trial.

:mod:`.spec` reads and checks a sweep described by one file; :mod:`.run` runs it on Ray Tune
(``rapidrl sweep SPEC``; output in ``OUT/NAME/``: ``sweep.md``, ``best.json``, ...), with
:mod:`.tune_hooks` (Tune's callback for the progress lines, the time budget) and :mod:`.lines`
(how each trial ended, the lines printed and tabulated about it; no Ray).
"""

from rapidrl.sweep.spec import Range, SweepSpec, load_spec, parse_spec, trial_config

__all__ = ["Range", "SweepSpec", "load_spec", "parse_spec", "trial_config"]
