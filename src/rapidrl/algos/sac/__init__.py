"""Soft Actor-Critic for continuous actions (``rapidrl train sac``): config.py (SACConfig,
presets), losses.py (the pure update pieces), learner.py (nets, Adam, replay, the update),
train.py (the run loop's algorithm, the eval loader, the command line)."""
