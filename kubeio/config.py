"""Reading settings from flags and the environment, shared by every entrypoint (docs/design/style.md §10).

The extender, the placement manager and the node agent are separate binaries that must not import each
other, yet they read numbers from the same kind of flags and variables. The readers live here, in the
adapter layer all three may import, so a malformed value fails the same way in each of them: the
extender's environment readers raise :class:`SettingsError` naming the variable and the bad value, and
flags (which fall back to variables) fail through argparse with its usage message.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Mapping
from typing import TypeVar

LOG_LEVEL_ENV = "PHALANX_LOG_LEVEL"
"""The variable every entrypoint reads its Python logging level from."""

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""One log line format for every binary."""

T = TypeVar("T")


class SettingsError(ValueError):
    """An environment variable has a value the entrypoint cannot use."""


def env_int(environ: Mapping[str, str], name: str, default: int, *, minimum: int, maximum: int) -> int:
    """The integer in variable ``name``, else ``default``.

    An unset or empty variable gives ``default``.

    Raises:
        SettingsError: the value is not an integer, or lies outside ``minimum..maximum``.

    >>> env_int({"PHALANX_THREADS": "8"}, "PHALANX_THREADS", 256, minimum=1, maximum=4096)
    8
    >>> env_int({"PHALANX_THREADS": "0"}, "PHALANX_THREADS", 256, minimum=1, maximum=4096)
    Traceback (most recent call last):
    ...
    kubeio.config.SettingsError: PHALANX_THREADS=0 is outside 1..4096
    """
    value = _parsed(environ, name, int, "an integer")
    if value is None:
        return default
    if not minimum <= value <= maximum:
        msg = f"{name}={value} is outside {minimum}..{maximum}"
        raise SettingsError(msg)
    return value


def env_float(environ: Mapping[str, str], name: str, default: float, *, allow_zero: bool = False) -> float:
    """The finite positive number (or zero, with ``allow_zero``) in variable ``name``, else ``default``.

    An unset or empty variable gives ``default``.

    Raises:
        SettingsError: the value is not a number, or is negative, zero (unless allowed), NaN or infinite.

    >>> env_float({"PHALANX_BIND_WAIT_SECONDS": "soon"}, "PHALANX_BIND_WAIT_SECONDS", 25.0)
    Traceback (most recent call last):
    ...
    kubeio.config.SettingsError: PHALANX_BIND_WAIT_SECONDS='soon' is not a number
    """
    value = _parsed(environ, name, float, "a number")
    if value is None:
        return default
    if not (value > 0 or (allow_zero and value == 0)) or value != value or value == float("inf"):
        msg = f"{name}={value} must be a finite positive number"
        raise SettingsError(msg)
    return value


def env_bool(environ: Mapping[str, str], name: str, default: bool) -> bool:
    """The switch in variable ``name`` (``true``/``false``, ``1``/``0``, ``yes``/``no``), else ``default``.

    An unset or empty variable gives ``default``.

    Raises:
        SettingsError: the value is none of those words.

    >>> env_bool({"PHALANX_DECISIVE": "false"}, "PHALANX_DECISIVE", True)
    False
    >>> env_bool({"PHALANX_DECISIVE": "maybe"}, "PHALANX_DECISIVE", True)
    Traceback (most recent call last):
    ...
    kubeio.config.SettingsError: PHALANX_DECISIVE='maybe' is not true or false
    """
    text = (environ.get(name) or "").strip().lower()
    if not text:
        return default
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    msg = f"{name}={environ.get(name)!r} is not true or false"
    raise SettingsError(msg)


def _parsed(environ: Mapping[str, str], name: str, parse: Callable[[str], T], kind: str) -> T | None:
    """Variable ``name`` parsed, or ``None`` when it is unset or empty; ``kind`` names the type in errors."""
    text = environ.get(name)
    if text is None or text == "":
        return None
    try:
        return parse(text)
    except ValueError:
        msg = f"{name}={text!r} is not {kind}"
        raise SettingsError(msg) from None


def positive_number(text: object) -> float:
    """Argparse type: a finite positive number (seconds, intervals).

    Raises:
        argparse.ArgumentTypeError: ``text`` is not a number, or not finite and positive.
    """
    try:
        value = float(str(text))
    except ValueError:
        msg = f"{text!r} is not a number"
        raise argparse.ArgumentTypeError(msg) from None
    if not 0 < value < float("inf"):
        msg = f"{text!r} must be a positive number"
        raise argparse.ArgumentTypeError(msg)
    return value


def configure_logging(level: str) -> None:
    """Send the root logger's records to stderr at ``level`` in :data:`LOG_FORMAT`.

    Raises:
        ValueError: ``level`` is not a logging level name.
    """
    logging.basicConfig(level=level, format=LOG_FORMAT)
