"""PPO and PPO-LSTM: pure, tested pieces (GAE, losses); the trainer is ``rapidrl.algos.ppo.train``.

Importing this package registers the PPO policy loader of ``rapidrl eval`` (lazily:
``rapidrl.algos.ppo.train:eval_policy``).
"""

from rapidrl.algos.eval import register_policy_loader as _register_policy_loader
from rapidrl.algos.ppo.gae import gae
from rapidrl.algos.ppo.losses import (
    categorical_entropy,
    categorical_logprob,
    normalize_advantages,
    policy_loss,
    ppo_loss,
    value_loss,
)

_register_policy_loader("ppo", "rapidrl.algos.ppo.train:eval_policy")

__all__ = [
    "categorical_entropy",
    "categorical_logprob",
    "gae",
    "normalize_advantages",
    "policy_loss",
    "ppo_loss",
    "value_loss",
]
