"""Errors raised while resolving env ids and checking env options.

Both are ``ValueError`` subclasses so callers that only know "bad argument" can catch them, and
both carry the fix in their message (close matches, the list of valid names).
"""

from __future__ import annotations


class UnknownEnvError(ValueError):
    """The env id is neither an Atari game alias nor a registered gymnasium id."""


class InvalidOptionError(ValueError):
    """An env option is unknown, has the wrong type, or has a value out of range."""
