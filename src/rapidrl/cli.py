"""The ``rapidrl`` command line (see ``USAGE``). Each subcommand parses its own typed config;
``--help`` on any of them lists every option."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

USAGE = """usage: rapidrl COMMAND [ARGS]

commands:
  train dqn      DQN family, one agent (--preset lean|lean-long|fast|dqn|rainbow; default lean)
  train rainbow  the same, default preset rainbow-lean (--preset rainbow: the paper's Rainbow)
  train ppo      PPO (--preset lean|ppo|fast|cartpole; default lean)
  train ppo-lstm recurrent PPO, whole sequences in one LSTM call (sequence_mode packed|loop)
  train pqn      PQN: online Q(lambda), no replay, no target net (--preset fast|pqn|cartpole)
  train sac      SAC for continuous actions (MuJoCo): twin critics, tuned temperature
  eval RUN_DIR   play a trained agent: scores, optional --video out.mp4
  bench envs     steps/s of every vector backend and layout vs gymnasium's and ale_py's
                 (--autotune stores the fastest layout for backend='auto')
  bench solve    minutes and frames to solve a game, several seeds one after the other
  bench atari    a suite: games x algorithms x seeds at one budget, one table (local or Ray)
  bench profile  where one update's time goes: rollout (acting, envs), advantages, update;
                 DQN/Rainbow/SAC: acting, envs, replay, each pass of the updates
  sweep SPEC     hyperparameter search on Ray Tune (Optuna, ASHA), seeds per trial
  envs           list the env ids and aliases rapidrl knows

Run 'rapidrl COMMAND --help' for the options of a command.
"""


def _bench_envs(argv: Sequence[str]) -> int:
    from rapidrl.bench.envs import main_bench_envs
    from rapidrl.config import BenchEnvsConfig, parse_config

    cfg = parse_config(BenchEnvsConfig, {}, argv, prog="rapidrl bench envs")
    return main_bench_envs(cfg)


def _envs(argv: Sequence[str]) -> int:
    from rapidrl.envs import atari_games, list_options

    games = atari_games()
    print(f"Atari games ({len(games)}), as alias / ALE id / classic id, e.g. pong, ALE/Pong-v5,")
    print("PongNoFrameskip-v4; any other registered gymnasium id (CartPole-v1, ...) also works.")
    print("  " + ", ".join(sorted(games)))
    print("Atari options (make_env(env_id, **options); defaults):")
    for k, v in list_options("pong").items():
        print(f"  {k} = {v!r}")
    return 0


def _lazy(target: str) -> Callable[[Sequence[str]], int]:
    """``"module:function"`` imported on first use: ``rapidrl --help`` never pays for torch."""

    def run(argv: Sequence[str]) -> int:
        import importlib

        module, fn = target.split(":")
        return int(getattr(importlib.import_module(module), fn)(list(argv)) or 0)

    return run


COMMANDS: dict[tuple[str, ...], Callable[[Sequence[str]], int]] = {
    ("train", "dqn"): _lazy("rapidrl.algos.dqn.train:main_dqn"),
    ("train", "rainbow"): _lazy("rapidrl.algos.dqn.train:main_rainbow"),
    ("train", "ppo"): _lazy("rapidrl.algos.ppo.train:main_ppo"),
    ("train", "ppo-lstm"): _lazy("rapidrl.algos.ppo.train:main_ppo_lstm"),
    ("train", "pqn"): _lazy("rapidrl.algos.pqn.train:main_pqn"),
    ("train", "sac"): _lazy("rapidrl.algos.sac.train:main_sac"),
    ("eval",): _lazy("rapidrl.algos.eval:main"),
    ("bench", "envs"): _bench_envs,
    ("bench", "solve"): _lazy("rapidrl.bench.solve:main"),
    ("bench", "atari"): _lazy("rapidrl.bench.atari:main"),
    ("bench", "profile"): _lazy("rapidrl.bench.profile:main"),
    ("sweep",): _lazy("rapidrl.sweep.run:main"),
    ("envs",): _envs,
}


# Commands that were the project's own experiments, now scripts in the checkout's benchmarks/
# (not installed with the package): where each went.
MOVED: dict[tuple[str, ...], str] = {
    ("bench", "dqn"): "benchmarks/dqn_ladder.py",
    ("bench", "lstm"): "benchmarks/lstm_phase.py",
    ("bench", "ray"): "benchmarks/ray_sampler.py",
}


def _user_errors() -> tuple[type[BaseException], ...]:
    from rapidrl.config import ConfigError
    from rapidrl.envs import InvalidOptionError, UnknownEnvError

    errors: tuple[type[BaseException], ...] = (ConfigError, UnknownEnvError, InvalidOptionError)
    # A bad checkpoint names the file and the fix. Only if its module is loaded: importing it
    # imports torch, and a command that never loaded it cannot have raised it.
    checkpoint = sys.modules.get("rapidrl.train.checkpoint")
    if checkpoint is not None:
        errors += (checkpoint.CheckpointError,)
    return errors


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    for words, fn in sorted(COMMANDS.items(), key=lambda kv: -len(kv[0])):
        if tuple(argv[: len(words)]) == words:
            try:
                if words[0] == "train":
                    # The trainers' malloc setting is the command's choice, made for this whole
                    # process before the first large tensors; a library call leaves malloc alone.
                    from rapidrl.train.loop import keep_freed_memory

                    keep_freed_memory()
                return fn(argv[len(words) :])
            except _user_errors() as exc:
                # Bad input gets its message, not a traceback: the message names the fix.
                print(f"rapidrl: error: {exc}", file=sys.stderr)
                return 2
            except KeyboardInterrupt:
                print("interrupted", file=sys.stderr)
                return 130
    for words, script in MOVED.items():
        if tuple(argv[: len(words)]) == words:
            print(
                f"rapidrl: error: 'rapidrl {' '.join(words)}' moved out of the installed "
                f"package: run 'python {script}' (the same flags) in a checkout of the rapidrl "
                "repository (benchmarks/README.md)",
                file=sys.stderr,
            )
            return 2
    print(f"rapidrl: unknown command {' '.join(argv[:2])!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
