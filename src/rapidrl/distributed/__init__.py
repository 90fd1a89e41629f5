"""Scale-out of experience collection on Ray (Ape-X style for DQN, synchronous for PPO).

Pieces (one place each):

- :mod:`.policy` -- the acting protocol ``policy_factory() -> nn.Module`` with
  ``act(obs, epsilon | None) -> dict``; adapters ``QPolicy`` / ``QLambdaPolicy`` / ``ActorCriticPolicy``;
  ``apex_epsilons``.
- :mod:`.batches` -- ``TransitionBatch`` (DQN) and ``RolloutBatch`` (PPO): numpy arrays + meta
  (worker id, node id, weights version, episode stats).
- :mod:`.worker` -- ``RolloutWorker``: a vector env + a policy; plain Python (serial mode), the
  same class runs in every Ray actor.
- :mod:`.sampler` -- ``RaySampler`` (actors, weight broadcast, one request in flight per actor,
  fault handling) and ``SerialSampler`` (the same calls in-process, no Ray).

Ray is optional: importing this package never imports it; ``RaySampler`` / ``require_ray()``
raise ``ImportError("Ray is not installed: pip install -e '.[ray]' in the rapidrl checkout")`` without it.

DQN (Ape-X) learner loop::

    factory = functools.partial(make_q_policy, obs_shape, n_actions)
    policy = factory()                      # learner copy: train policy.q
    sampler = RaySampler("pong", factory, num_workers="auto", envs_per_worker=4, backend="ale",
                         publish_every=10)
    buffer = ReplayBuffer(cap, obs_shape, num_envs=sampler.num_workers * 4, stacked=True)
    sampler.set_weights(policy, version=0, force=True)
    while ...:
        for batch in sampler.next_transitions(num_steps=32):
            batch.add_to(buffer)            # streams cut on a (re)started worker's first batch
            for r, n in zip(batch.meta.episode_returns, batch.meta.episode_lengths):
                tracker.add_episode(r, n, frames, seconds)
            lag = sampler.policy_lag(batch)
        ... updates ...; sampler.set_weights(policy, version=updates)

PPO learner loop::

    rollouts = sampler.collect_rollouts(num_steps=128)   # one per worker, latest weights
    r = concat_rollouts(rollouts)                         # [T, workers * envs_per_worker]
    adv, ret = gae(*map(torch.from_numpy, (r.rewards, r.values, r.next_values(),
                                           r.terminated, r.truncated)), gamma, lam)
"""

from rapidrl.distributed.batches import BatchMeta, RolloutBatch, TransitionBatch, concat_rollouts
from rapidrl.distributed.policy import (
    ActorCriticPolicy,
    Policy,
    QLambdaPolicy,
    QPolicy,
    apex_epsilons,
    make_actor_critic_policy,
    make_q_policy,
    weights_to_numpy,
)
from rapidrl.distributed.sampler import (
    RAY_MISSING,
    RaySampler,
    RolloutWorkerError,
    SerialSampler,
    WorkerFailedError,
    require_ray,
)
from rapidrl.distributed.worker import RolloutWorker, frames_per_step

__all__ = [
    "RAY_MISSING",
    "ActorCriticPolicy",
    "BatchMeta",
    "Policy",
    "QLambdaPolicy",
    "QPolicy",
    "RaySampler",
    "RolloutBatch",
    "RolloutWorker",
    "RolloutWorkerError",
    "SerialSampler",
    "TransitionBatch",
    "WorkerFailedError",
    "apex_epsilons",
    "concat_rollouts",
    "frames_per_step",
    "make_actor_critic_policy",
    "make_q_policy",
    "require_ray",
    "weights_to_numpy",
]
