"""One declaration per setting (field, flag, environment variables, type, help), parsed by click.

Every entrypoint (the placement manager, the node agent, the dispatcher, the extender) lists its settings
as :class:`Setting` rows beside its frozen settings dataclass. From those rows alone this module builds
the click command (``--help`` included), reads each flag falling back to its variables and then to the
dataclass's own default, converts and checks the value with the row's click type, and builds the
dataclass, nested ones included: a row whose field is ``gates.max_unbound_gpus`` fills the field
``max_unbound_gpus`` of the nested dataclass in ``gates``. So a setting is written once, its default
lives once (in the dataclass, in the core for nested ones), and there is no field-by-field copy.

The extender runs under gunicorn, which owns the command line: it reads the same kind of rows from the
environment alone (:func:`read_env`), through the same types, so a bad value fails the same way.

click is the one CLI library of every entrypoint (``cli``, ``simulator`` use it too); variables are read
from the mapping handed in, not ``os.environ``, so tests give their own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import click

from kubeio.config import SettingsError

T = TypeVar("T")

HELP_OPTIONS = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
"""``-h`` and ``--help`` on every entrypoint, as the ``phalanx`` CLI and the simulator have them."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting, declared once.

    Attributes:
        field: the settings dataclass's field this fills; ``outer.inner`` fills field ``inner`` of the
            nested dataclass in field ``outer``.
        flag: its command-line flag (``--interval-seconds``); ``None`` for a setting read from the
            environment alone.
        env: its environment variables, the first set and non-empty one wins; an empty variable counts
            as unset (a manifest's ``value: ""``).
        type: the click type that converts and checks the text of the flag or variable.
        help: one line for ``--help``.
        switch: a bare flag that turns the setting on (``--once``); it takes no value.
        bare: the value of the flag given without a value (``--device-plugin`` alone means ``true``),
            while ``--device-plugin false`` still takes one; ``None``: the flag always takes a value.
        metavar: the value's name in ``--help``.
        empty: an empty variable is a value (``""``: off), not unset.
    """

    field: str
    flag: str | None
    env: tuple[str, ...] = ()
    type: click.ParamType[Any] = click.STRING
    help: str = ""
    switch: bool = False
    bare: object = None
    metavar: str | None = None
    empty: bool = False

    @property
    def name(self) -> str:
        """The click parameter's name: the field path, its dots as double underscores."""
        return self.field.replace(".", "__")


def env_value(setting: Setting, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The first of ``setting``'s variables that is set (and not empty, unless empty is a value)."""
    for name in setting.env:
        text = environ.get(name)
        if text or (text is not None and setting.empty):
            return name, text
    return None


class _EnvOption(click.Option):
    """A click option that reads its variables from the mapping the parse was given (``ctx.obj``)."""

    def __init__(self, setting: Setting, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setting = setting

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        found = env_value(self.setting, cast("Mapping[str, str]", ctx.find_root().obj))
        return None if found is None else found[1]


def default_of(defaults: object, field: str) -> Any:
    """The value at dotted ``field`` of the dataclass instance ``defaults``."""
    value = defaults
    for part in field.split("."):
        value = getattr(value, part)
    return value


def build(defaults: T, values: Mapping[str, Any]) -> T:
    """``defaults`` with each dotted field of ``values`` replaced, nested dataclasses rebuilt whole.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Inner:
    ...     a: int = 1
    ...     b: int = 2
    >>> @dataclass(frozen=True)
    ... class Outer:
    ...     x: int = 0
    ...     inner: Inner = Inner()
    >>> build(Outer(), {"x": 5, "inner.b": 9})
    Outer(x=5, inner=Inner(a=1, b=9))
    """
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for field, value in values.items():
        outer, _, inner = field.partition(".")
        if inner:
            nested.setdefault(outer, {})[inner] = value
        else:
            top[field] = value
    for outer, inner_values in nested.items():
        top[outer] = build(getattr(defaults, outer), inner_values)
    return dataclasses.replace(defaults, **top)  # type: ignore[type-var]


def option(setting: Setting, defaults: object) -> click.Option:
    """The click option of ``setting``, its default taken from ``defaults`` (a settings instance)."""
    if setting.flag is None:
        msg = f"{setting.field} has no flag; read it with read_env"
        raise ValueError(msg)
    default = default_of(defaults, setting.field)
    shown: bool | str = default not in (None, "")
    if isinstance(default, tuple):
        shown = ",".join(default)
    extra: dict[str, Any] = {}
    if setting.switch:
        extra = {"is_flag": True}
    elif setting.bare is not None:
        extra = {"is_flag": False, "flag_value": setting.bare}
    return _EnvOption(
        setting,
        [setting.flag, setting.name],
        type=None if setting.switch else setting.type,
        default=default,
        envvar=list(setting.env) or None,
        show_envvar=bool(setting.env),
        show_default=shown,
        help=setting.help,
        metavar=setting.metavar,
        **extra,
    )


def command(
    table: Sequence[Setting],
    defaults: T,
    *,
    about: str,
    check: Callable[[T], str | None] = lambda _settings: None,
) -> click.Command:
    """The click command that parses ``table`` into a copy of ``defaults`` (its callback returns it).

    ``check`` looks at the settings as a whole (one setting bounded by another) and returns why they are
    refused, or ``None``; a refusal is a usage error, as a malformed flag is.
    """
    params: list[click.Parameter] = [option(s, defaults) for s in table]

    def callback(**values: Any) -> T:
        settings = build(defaults, {s.field: values[s.name] for s in table})
        problem = check(settings)
        if problem is not None:
            raise click.UsageError(problem)
        return settings

    return click.Command(None, params=params, callback=callback, help=about, context_settings=HELP_OPTIONS)


def parse(cmd: click.Command, argv: Sequence[str] | None, environ: Mapping[str, str], *, prog: str) -> Any:
    """Run ``cmd`` on ``argv`` with variables from ``environ`` and return what its callback returned.

    Raises:
        SystemExit: ``--help`` (status 0), or a malformed flag or variable (status 2, with the usage
            and click's message naming the flag, on stderr).
    """
    args = list(argv) if argv is not None else None
    try:
        result = cmd.main(args=args, prog_name=prog, standalone_mode=False, obj=environ)
    except click.ClickException as exc:
        exc.show()
        raise SystemExit(exc.exit_code) from None
    except click.Abort:
        raise SystemExit(1) from None
    if isinstance(result, int) and not isinstance(result, bool):  # --help: click answered and stopped
        raise SystemExit(result)
    return result


def read_env(table: Sequence[Setting], defaults: T, environ: Mapping[str, str]) -> T:
    """``defaults`` with each row of ``table`` read from its variables (for a process without flags).

    Raises:
        SettingsError: a variable holds a value its type refuses; the message names the variable and
            the value.
    """
    values: dict[str, Any] = {}
    for setting in table:
        found = env_value(setting, environ)
        if found is None:
            continue
        name, text = found
        try:
            values[setting.field] = setting.type.convert(text, None, None)
        except click.BadParameter as exc:
            msg = f"{name}={text!r}: {exc.message}"
            raise SettingsError(msg) from None
    return build(defaults, values)


def reference(table: Sequence[Setting], defaults: object) -> str:
    """``table`` as a Markdown table (flag, variables, default, meaning), for the admin guide.

    The guide's settings tables are this function's output (``tests/test_settings_doc.py`` holds them
    to it), so they say what the declarations say.
    """
    flags = any(s.flag for s in table)
    rows = ["| flag | variable | default | meaning |" if flags else "| variable | default | meaning |"]
    rows.append("|---|---|---|---|" if flags else "|---|---|---|")
    for setting in table:
        default = default_of(defaults, setting.field)
        shown = ",".join(default) if isinstance(default, tuple) else default
        shown = str(shown).lower() if isinstance(shown, bool) else shown
        text = "" if shown is None or shown == "" else f"`{shown}`"
        cells = [f"`{setting.flag}`" if setting.flag else ""] if flags else []
        cells += [", ".join(f"`{e}`" for e in setting.env), text, setting.help]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"
