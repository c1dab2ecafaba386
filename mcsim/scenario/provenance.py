"""The ``[provenance]`` table of a scenario: the values it borrows from another model, fleet or software.

A key is a scenario key, ``failures`` or ``failures.<class>[.<key>]``; its value one line saying
where the value comes from. It changes no number: the summary, ``mcsim plan`` and ``mcsim validate``
print it (docs/model.md, "Borrowed values").
"""

from __future__ import annotations

from typing import Any

from mcsim.errors import ScenarioError
from mcsim.scenario.schema import key_meta
from mcsim.scenario.validation import check_text

# [provenance]: a scenario key whose value is borrowed from another model, fleet or software, and where
# from (``"compute.efficiency" = "the Llama 3 405B reference: ..."``); the summary and `mcsim validate` say so.
MAX_PROVENANCE_TEXT = 400  # characters of one entry: a line of a table note


def provenance_entries(raw: dict, source: str, failure_names: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """The ``[provenance]`` table of a scenario's tables ``raw``, checked: ``(key, where from)`` pairs.

    A key is a scenario key (quoted, ``"compute.efficiency"``, or as TOML dotted keys), ``failures``
    (every failure class) or ``failures.<class>[.<key>]`` of a class the scenario has (``failure_names``);
    its value one line of text, at most :data:`MAX_PROVENANCE_TEXT` characters. Raises :class:`ScenarioError` naming
    ``provenance.<key>``.
    """
    table = raw.get("provenance", {})
    if not isinstance(table, dict):
        raise ScenarioError(source, "provenance", 'expected a table of "section.key" = "where its value comes from"')
    entries = []
    for key, text in flat_provenance(table):
        where = f"provenance.{key}"
        if not _declared_key(key, failure_names):
            raise ScenarioError(
                source, where, "not a key of this scenario; expected section.key, failures, failures.<class>[.key]"
            )
        line = check_text(text, source, where, one_line=True).strip()
        if not line or len(line) > MAX_PROVENANCE_TEXT:
            raise ScenarioError(source, where, f"expected one line of 1 to {MAX_PROVENANCE_TEXT} characters")
        entries.append((key, line))
    return tuple(entries)


def _declared_key(key: str, failure_names: tuple[str, ...]) -> bool:
    """A scenario key, or ``failures`` (every class), ``failures.<class>`` (one) or one of a class's keys."""
    parts = key.split(".")
    if parts[0] == "failures":
        return key == "failures" or (parts[1] in failure_names and (len(parts) == 2 or key_meta(key) is not None))
    return key_meta(key) is not None


def flat_provenance(table: dict, prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, value)`` of a ``[provenance]`` table, its nested tables (TOML dotted keys) flattened."""
    flat: list[tuple[str, Any]] = []
    for name, value in table.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict) and key.count(".") < 2:
            flat += flat_provenance(value, key + ".")
        else:
            flat.append((key, value))
    return flat
