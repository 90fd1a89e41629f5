"""The ``rapidrl`` command line.

    rapidrl bench envs  [--env pong --num-envs 1,2,4,8,16 --seconds 10 --json F --png F --autotune]
    rapidrl bench lstm  [--json F --png F]
    rapidrl envs        list the env ids and aliases rapidrl knows

Each subcommand parses its own typed config (``--help`` on any of them lists every option).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

USAGE = """usage: rapidrl COMMAND [ARGS]

commands:
  bench envs     steps/s of every vector backend and layout vs gymnasium's (--autotune stores
                 the fastest layout for backend='auto')
  bench lstm     PPO-LSTM training phase: step-by-step loop vs packed sequences (time, memory)
  envs           list the env ids and aliases rapidrl knows

Run 'rapidrl COMMAND --help' for the options of a command.
"""


def _bench_envs(argv: Sequence[str]) -> int:
    from rapidrl.bench.envs import main_bench_envs
    from rapidrl.config import BenchEnvsConfig, parse_config

    cfg = parse_config(BenchEnvsConfig, {}, argv, prog="rapidrl bench envs")
    return main_bench_envs(cfg)


def _bench_lstm(argv: Sequence[str]) -> int:
    from rapidrl.bench.lstm import main

    return int(main(list(argv)) or 0)


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


COMMANDS: dict[tuple[str, ...], Callable[[Sequence[str]], int]] = {
    ("bench", "envs"): _bench_envs,
    ("bench", "lstm"): _bench_lstm,
    ("envs",): _envs,
    ("train", "dqn"): lambda argv: __import__("rapidrl.algos.dqn.train", fromlist=["_"]).main_dqn(
        argv
    ),
    ("train", "rainbow"): lambda argv: __import__(
        "rapidrl.algos.dqn.train", fromlist=["_"]
    ).main_rainbow(argv),
    ("eval",): lambda argv: __import__("rapidrl.algos.eval", fromlist=["_"]).main(argv),
    ("bench", "dqn"): lambda argv: __import__("rapidrl.bench.dqn", fromlist=["_"]).main(list(argv)),
    ("train", "ppo"): lambda argv: __import__("rapidrl.algos.ppo.train", fromlist=["_"]).main_ppo(
        argv
    ),
    ("train", "ppo-lstm"): lambda argv: __import__(
        "rapidrl.algos.ppo.train", fromlist=["_"]
    ).main_ppo_lstm(argv),
}


def _user_errors() -> tuple[type[BaseException], ...]:
    from rapidrl.config import ConfigError
    from rapidrl.envs import InvalidOptionError, UnknownEnvError

    return (ConfigError, UnknownEnvError, InvalidOptionError)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    for words, fn in sorted(COMMANDS.items(), key=lambda kv: -len(kv[0])):
        if tuple(argv[: len(words)]) == words:
            try:
                return fn(argv[len(words) :])
            except _user_errors() as exc:
                # Bad input gets its message, not a traceback: the message names the fix.
                print(f"rapidrl: error: {exc}", file=sys.stderr)
                return 2
            except KeyboardInterrupt:
                print("interrupted", file=sys.stderr)
                return 130
    print(f"rapidrl: unknown command {' '.join(argv[:2])!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
