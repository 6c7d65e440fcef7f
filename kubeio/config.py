"""The types of settings every entrypoint shares, and its logging (docs/design/style.md §10).

The extender, the placement manager, the node agent and the dispatcher are separate binaries that must
not import each other, yet they read the same kinds of values: seconds, ports, bounded counts, switches,
comma-separated names, a logging level. Their click types live here, in the adapter layer all of them may
import, so a malformed value fails the same way in each; the declarations that use them are in each
entrypoint's ``settings`` module (``kubeio.setting``).
"""

from __future__ import annotations

import logging
import math

import click

LOG_LEVEL_ENV = "PHALANX_LOG_LEVEL"
"""The variable every entrypoint reads its Python logging level from."""

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""One log line format for every binary."""

LOG_LEVEL = click.Choice(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], case_sensitive=False)
"""A Python logging level name, any case (``info`` reads as ``INFO``)."""

PORT = click.IntRange(0, 65535)
"""A TCP port; 0 where the setting says it turns the listener off."""

SWITCH = click.BOOL
"""On or off: ``true``/``false``, ``1``/``0``, ``yes``/``no`` (click's words, any case)."""


class SettingsError(ValueError):
    """An environment variable has a value the entrypoint cannot use."""


class Seconds(click.ParamType[float]):
    """A finite positive number (seconds, intervals); zero too when ``zero`` says so.

    >>> Seconds().convert("1.5", None, None)
    1.5
    >>> Seconds().convert("0", None, None)
    Traceback (most recent call last):
    ...
    click.exceptions.BadParameter: '0' must be a finite positive number
    """

    name = "seconds"

    def __init__(self, *, zero: bool = False) -> None:
        self.zero = zero

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        """The number, or click's usage error naming the flag."""
        if isinstance(value, float | int) and not isinstance(value, bool):
            number = float(value)
        else:
            try:
                number = float(str(value))
            except ValueError:
                self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number) or number < 0 or (number == 0 and not self.zero):
            kind = "finite number, 0 or above" if self.zero else "finite positive number"
            self.fail(f"{value!r} must be a {kind}", param, ctx)
        return number


class Names(click.ParamType[tuple[str, ...]]):
    """A comma-separated list, as a tuple with blanks dropped.

    >>> Names().convert("a, b,,", None, None)
    ('a', 'b')
    """

    name = "names"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, ...]:
        """The names; a tuple (a default) is kept as it is."""
        if isinstance(value, tuple):
            return tuple(str(v) for v in value)
        return tuple(n.strip() for n in str(value).split(",") if n.strip())


SECONDS = Seconds()
NAMES = Names()


def configure_logging(level: str) -> None:
    """Send the root logger's records to stderr at ``level`` in :data:`LOG_FORMAT`.

    Raises:
        ValueError: ``level`` is not a logging level name.
    """
    logging.basicConfig(level=level, format=LOG_FORMAT)
