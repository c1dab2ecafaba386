"""How the command line is declared: :class:`Command` and :class:`Option` as data, and the parser made of them.

The table itself (every command, option and help text) is :data:`mcsim.cli.parser.MCSIM`;
:func:`parser_of` makes an argparse parser from such a table. A user's mistake in the options prints
one line ``mcsim: error: ...`` and exits with status 2 (:data:`EXIT_USAGE`); the commands report theirs
the same way (:func:`usage_error`). :data:`EXIT_CODES` says what every exit status means.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
from collections.abc import Callable
from typing import Any, NoReturn

EXIT_USAGE = 2  # the exit status of a user's mistake

# what every exit status means, as `mcsim --help` lists them
EXIT_CODES = (
    (0, "done"),
    (
        1,
        "a check failed or there is no answer: validate outside its accepted ranges, plan without a candidate "
        "that meets the constraints; or the machine refused a write part-way (disk full, quota), leaving no partial "
        "file; or the reader of the output went away",
    ),
    (
        2,
        "a user's mistake: a bad option, scenario, plan or result file, or an output path that must not be "
        "written; one line 'mcsim: error: ...' naming the file and the key, and no output file",
    ),
    (130, "interrupted (Ctrl-C); no output written"),
)
FORMATS = ("text", "json", "csv")  # --format: the table for people, or for programs


def usage_error(message: str) -> int:
    """Print ``mcsim: error: <message>`` on stderr; returns :data:`EXIT_USAGE`."""
    print(f"mcsim: error: {message}", file=sys.stderr)
    return EXIT_USAGE


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too)
        self.exit(EXIT_USAGE, f"mcsim: error: {message}\n")


@dataclasses.dataclass(frozen=True)
class Option:
    """One argument of a command: its flags (or its positional name) and the keywords of
    :meth:`argparse.ArgumentParser.add_argument` it sets (None: not given)."""

    flags: tuple[str, ...]
    help: str | None = None
    type: Callable[[str], Any] | None = None
    default: Any = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    nargs: str | None = None
    action: str | None = None
    dest: str | None = None
    required: bool | None = None

    def keywords(self) -> dict[str, Any]:
        """The keywords given, a list default copied (each parser gets its own)."""
        given = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)[1:]}
        return {
            key: list(value) if isinstance(value, list) else value for key, value in given.items() if value is not None
        }


@dataclasses.dataclass(frozen=True)
class Command:
    """A command: its name, its line in the list of commands, its description, its options and
    its own subcommands (their choice stored in ``args.<dest>``)."""

    name: str
    help: str | None = None
    description: str | None = None
    options: tuple[Option, ...] = ()
    commands: tuple[Command, ...] = ()
    dest: str | None = None


def exit_codes_text() -> str:
    """The exit statuses and what each means, one line each (the epilog of ``mcsim --help``)."""
    lines = [
        textwrap.fill(meaning, width=100, initial_indent=f"  {code:<4} ", subsequent_indent=" " * 7)
        for code, meaning in EXIT_CODES
    ]
    return "exit status:\n" + "\n".join(lines)


def parser_of(program: Command) -> argparse.ArgumentParser:
    """The argparse parser of ``program``: its options and subcommands, and the exit statuses as its epilog."""
    parser = _Parser(
        prog=program.name,
        description=program.description,
        epilog=exit_codes_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser, program)
    return parser


def _add_arguments(parser: argparse.ArgumentParser, command: Command) -> None:
    """Add ``command``'s options and subcommands (recursively) to ``parser``."""
    for option in command.options:
        parser.add_argument(*option.flags, **option.keywords())
    if not command.commands:
        return
    sub = parser.add_subparsers(dest=command.dest, parser_class=_Parser)
    for child in command.commands:
        texts: dict[str, Any] = {"help": child.help, "description": child.description}
        # only the texts given: add_parser(help=None), unlike no help, lists the command without a text
        _add_arguments(sub.add_parser(child.name, **{k: v for k, v in texts.items() if v is not None}), child)
