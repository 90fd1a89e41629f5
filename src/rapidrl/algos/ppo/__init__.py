"""PPO and PPO-LSTM: pure, tested pieces (GAE, losses); the training loop builds on them."""

from rapidrl.algos.ppo.gae import gae
from rapidrl.algos.ppo.losses import (
    categorical_entropy,
    categorical_logprob,
    normalize_advantages,
    policy_loss,
    ppo_loss,
    value_loss,
)

__all__ = [
    "categorical_entropy",
    "categorical_logprob",
    "gae",
    "normalize_advantages",
    "policy_loss",
    "ppo_loss",
    "value_loss",
]
