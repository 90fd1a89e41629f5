"""Env ids -> envs: Atari aliases get the rapidrl Atari stack, other gymnasium ids ``gym.make``.

Accepted Atari spellings (all give the same env, the DQN protocol of ``AtariOptions``):
``"pong"``, ``"Pong"``, ``"space_invaders"``, ``"SpaceInvaders"``, ``"space-invaders"`` (any ALE
game, case/underscore/dash-insensitive), ``"ALE/Pong-v5"``, and the classic ``"PongNoFrameskip-v4"``,
``"Pong-v4"``, ``"PongDeterministic-v4"`` (and ``-v0``). The classic ids' own frameskip and sticky
settings are *not* used: the options decide. RAM variants (``"ALE/Pong-ram-v5"``) and every other
registered id go to ``gym.make`` unchanged.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from rapidrl.envs.errors import InvalidOptionError, UnknownEnvError
from rapidrl.envs.options import AtariOptions, unknown_option_message

# Options make_env understands for non-Atari ids; anything else goes to the env's constructor.
GYM_MAKE_OPTIONS = ("max_episode_steps", "render_mode", "disable_env_checker")

_ALE_V5 = re.compile(r"^ALE/(?P<name>[A-Za-z0-9]+)-v5$", re.IGNORECASE)
_CLASSIC = re.compile(
    r"^(?P<name>[A-Za-z0-9]+?)(?:NoFrameskip|Deterministic)?-v[04]$", re.IGNORECASE
)


@dataclass(frozen=True)
class EnvInfo:
    """What an env id resolves to."""

    env_id: str
    """Canonical id: the ALE ROM name for Atari (``"pong"``, ``"space_invaders"``), else the
    registered gymnasium id. Use it in run names and benchmark tables."""
    is_atari: bool
    """True when ``make_env`` builds the rapidrl Atari stack (``AtariOptions`` apply)."""
    game: str | None
    """ALE ROM name (``"space_invaders"``) for Atari, else None."""
    gym_id: str
    """The gymnasium id behind it: ``"ALE/SpaceInvaders-v5"`` or e.g. ``"CartPole-v1"``."""


def _normalize(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name.lower())


@lru_cache(maxsize=1)
def atari_games() -> dict[str, str]:
    """Normalized game name -> ALE ROM name, for the single-player games ALE registers as v5."""
    import ale_py  # noqa: F401  (importing registers the ALE ids with gymnasium)
    from ale_py.registration import rom_id_to_name
    from ale_py.roms import get_all_rom_ids

    games = {}
    for rom in sorted(get_all_rom_ids()):
        if f"ALE/{rom_id_to_name(rom)}-v5" in gym.registry:
            games[_normalize(rom)] = rom
    return games


def _atari_info(rom: str) -> EnvInfo:
    from ale_py.registration import rom_id_to_name

    return EnvInfo(env_id=rom, is_atari=True, game=rom, gym_id=f"ALE/{rom_id_to_name(rom)}-v5")


def _other_gym_ids() -> list[str]:
    # ALE's own registrations are reachable through the Atari aliases; leaving them out keeps
    # suggestions short (there are ~1,000 of them).
    return [
        env_id
        for env_id, spec in gym.registry.items()
        if not str(spec.entry_point).startswith("ale_py")
    ]


def _suggest(query: str, candidates: dict[str, str]) -> list[str]:
    """Close matches of ``query`` among ``candidates`` (normalized -> display name).

    Also tries the query stripped of ALE decorations ("ALE/", "-ram", "NoFrameskip", "-v4"), so
    "ALE/Pong-ram-v5" still suggests "pong".
    """
    full = _normalize(query)
    core = _normalize(re.sub(r"^ALE/|-ram|NoFrameskip|Deterministic|-v\d+$", "", query))
    close: list[str] = []
    for key in dict.fromkeys((full, core)):
        close += difflib.get_close_matches(key, list(candidates), n=3, cutoff=0.6)
    return list(dict.fromkeys(candidates[c] for c in close))[:3]


def _unknown(env_id: str, what: str, candidates: dict[str, str]) -> UnknownEnvError:
    close = _suggest(env_id, candidates)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else "."
    return UnknownEnvError(
        f"unknown {what} {env_id!r}{hint} Use an ALE game name ('pong', 'breakout', "
        "'space_invaders', ... : rapidrl.envs.atari_games()), 'ALE/Pong-v5', "
        "'PongNoFrameskip-v4', or a registered gymnasium id (gymnasium.pprint_registry())."
    )


def resolve_env(env_id: str) -> EnvInfo:
    """Resolve an env id or alias; raise ``UnknownEnvError`` naming close matches."""
    if not isinstance(env_id, str):
        raise UnknownEnvError(f"env id must be a string, got {env_id!r}")
    games = atari_games()
    key = _normalize(env_id)
    if key in games:
        return _atari_info(games[key])
    match = _ALE_V5.match(env_id)
    if match:
        rom = games.get(_normalize(match["name"]))
        if rom is None:
            raise _unknown(match["name"], "Atari game", games)
        return _atari_info(rom)
    match = _CLASSIC.match(env_id)
    if match and _normalize(match["name"]) in games:
        return _atari_info(games[_normalize(match["name"])])
    if env_id in gym.registry:
        return EnvInfo(env_id=env_id, is_atari=False, game=None, gym_id=env_id)
    candidates = dict(games)
    candidates.update({_normalize(i): i for i in _other_gym_ids()})
    raise _unknown(env_id, "env id", candidates)


def list_options(env_id: str | None = None) -> dict[str, Any]:
    """Option name -> default for ``make_env(env_id, ...)`` (Atari options when ``env_id`` is
    None). ``AtariOptions.describe()`` explains each Atari option."""
    if env_id is None or resolve_env(env_id).is_atari:
        return AtariOptions.defaults()
    return {"max_episode_steps": None, "render_mode": None, "disable_env_checker": None}


def _lean_spec(info: EnvInfo, options: AtariOptions) -> EnvSpec:
    """The spec of a lean Atari env: ``gymnasium.make(spec)`` calls ``make_env`` again.

    ``LeanAtariEnv`` is not built by ``gymnasium.make``, so without this its ``spec`` is None and
    neither ``check_env`` (render modes, close) nor spec-based tooling can rebuild it. Every
    option is recorded, not just the changed ones, so a spec saved today rebuilds the same env
    even if a default changes. No checker or order wrappers: the rebuilt env is the bare class,
    as ``make_env`` returns it (the vector envs use its ``step_into``).
    """
    return EnvSpec(
        id=f"rapidrl/{info.env_id}",
        entry_point="rapidrl.envs.registry:make_env",
        order_enforce=False,
        disable_env_checker=True,
        kwargs={"env_id": info.env_id, **dataclasses.asdict(options)},
    )


def make_env(env_id: str, **options: Any) -> gym.Env:
    """Make one env.

    Atari ids (see module docstring) give the rapidrl Atari stack with the DQN protocol;
    ``options`` are ``AtariOptions`` fields (``list_options()``), e.g.
    ``make_env("pong", frame_skip=4, implementation="wrappers")``. Other registered gymnasium
    ids give ``gym.make(env_id, **options)`` (``max_episode_steps``, ``render_mode``, or the
    env's own constructor arguments). Raises ``UnknownEnvError`` / ``InvalidOptionError``.

    Every env has a ``spec`` from which ``gymnasium.make(env.spec)`` rebuilds an equal env.
    """
    info = resolve_env(env_id)
    if info.is_atari:
        atari_options = AtariOptions.from_kwargs(**options)
        if atari_options.implementation == "lean":
            from rapidrl.envs.atari_lean import LeanAtariEnv

            env = LeanAtariEnv(info.game, atari_options)
            env.spec = _lean_spec(info, atari_options)
            return env
        from rapidrl.envs.atari_wrappers import make_atari_wrappers

        return make_atari_wrappers(info.game, atari_options)

    atari_only = [name for name in options if name in AtariOptions.option_names()]
    atari_only = [name for name in atari_only if name not in GYM_MAKE_OPTIONS]
    if atari_only:
        raise InvalidOptionError(
            f"option {atari_only[0]!r} applies only to Atari envs, not to {env_id!r}. "
            f"Options here: {', '.join(GYM_MAKE_OPTIONS)}, or the env's constructor arguments."
        )
    try:
        return gym.make(info.gym_id, **options)
    except TypeError as exc:
        # The env constructor rejected a keyword: name it instead of a bare TypeError.
        bad = re.search(r"keyword argument '(\w+)'", str(exc))
        if bad is None:
            raise
        raise InvalidOptionError(
            unknown_option_message(bad[1], list(GYM_MAKE_OPTIONS), repr(env_id))
            + f" (other options go to the env's constructor, which said: {exc})"
        ) from exc
