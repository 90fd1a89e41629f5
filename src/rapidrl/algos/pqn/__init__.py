"""PQN (parallelized Q-learning, Gallici et al. 2024): online Q(lambda) over vector-env rollouts,
no replay buffer, no target network, a LayerNorm after every layer.

``config`` (``PQNConfig``, presets), ``returns`` (the Q(lambda) targets, one pure function),
``learner`` (network, RAdam, the update, counters, checkpoints: what every loop shares) and
``train`` (the local loop, ``rapidrl train pqn``, the ``rapidrl eval`` loader).
"""

from rapidrl.algos.pqn.returns import q_lambda_returns

__all__ = ["q_lambda_returns"]
