"""The JSON Schema of scenario files (and plan files), generated from the one schema.

:func:`json_schema` turns the declarations of :mod:`mcsim.scenario.schema` (each section's keys:
kind, bounds, choices, unit, doc, default) into a JSON Schema (draft 2020-12) that editors use
to check and complete a scenario TOML (``mcsim schema`` writes it). It is a projection of the
validator, not a second one: :mod:`mcsim.scenario.validation` stays the judge, and the rules
between keys (:mod:`mcsim.scenario.consistency`), the ``[uncertain]`` laws' parameters and the
kinds of the plan's own tables that are not built in are checked only there (the schema leaves
them open). A key the schema does not declare is refused, as the validator refuses it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from mcsim.scenario.catalog import GPU_CATALOG
from mcsim.scenario.schema import (
    REQUIRED_SECTIONS,
    SECTIONS,
    FailureClass,
    Interval,
    PricesByType,
)
from mcsim.scenario.validation import Counts, Durations, StateOrNumber

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://mcsim-llm.invalid/scenario.schema.json"  # a name, not a place: nothing is served there


def _bounds(meta: Mapping[str, Any]) -> dict[str, float]:
    """The JSON Schema bounds of a number's ``gt``, ``ge``, ``le``, ``lt``."""
    names = {"gt": "exclusiveMinimum", "ge": "minimum", "le": "maximum", "lt": "exclusiveMaximum"}
    return {names[k]: meta[k] for k in names if meta.get(k) is not None}


def _number(meta: Mapping[str, Any], integer: bool = False) -> dict[str, Any]:
    return {"type": "integer" if integer else "number", **_bounds(meta)}


def _interval() -> dict[str, Any]:
    """A checkpoint interval: ``young_daly``, ``optimize``, ``{ minutes = M }`` or ``{ iterations = K }``."""

    def one(key: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": {key: schema}, "required": [key], "additionalProperties": False}

    return {
        "anyOf": [
            {"enum": ["young_daly", "optimize"]},
            one("minutes", {"type": "number", "exclusiveMinimum": 0, "maximum": 1e7}),
            one("iterations", {"type": "integer", "minimum": 1, "maximum": 1e12}),
        ]
    }


def _value(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The schema of one value of a field of kind ``meta["kind"]`` ({} for a kind the validator alone checks)."""
    kind = meta["kind"]
    if kind is bool:
        return {"type": "boolean"}
    if kind is str:
        return {"enum": list(meta["choices"])} if meta.get("choices") else {"type": "string"}
    if kind in (int, float):
        return _number(meta, integer=kind is int)
    if kind is StateOrNumber:
        return {"anyOf": [{"enum": list(meta["choices"])}, _number(meta)]}
    if isinstance(kind, type) and issubclass(kind, Durations):
        return {"type": "array", "items": _number(meta, integer=issubclass(kind, Counts))}
    if kind is Interval:
        return _interval()
    if hasattr(kind, "JSON_SCHEMA"):  # a kind that states its own (the staffing calendar's)
        return dict(kind.JSON_SCHEMA)
    if kind is PricesByType:
        return {"type": "object", "propertyNames": {"enum": list(GPU_CATALOG)}, "additionalProperties": _number(meta)}
    return {}


def _field(fld: dataclasses.Field) -> dict[str, Any]:
    """A key's schema: its value (a list of distinct values when ``many``), its description and default."""
    meta = fld.metadata
    schema = _value(meta)
    if meta.get("many"):
        schema = {"type": "array", "items": schema, "minItems": 1, "uniqueItems": True}
    text = " ".join(part for part in (meta.get("doc", ""), f"[{meta['unit']}]" if meta.get("unit") else "") if part)
    if text:
        schema["description"] = text
    default = fld.default
    if isinstance(default, int | float | str | bool) and not isinstance(default, Interval):
        schema["default"] = default
    elif isinstance(default, Interval):
        schema["default"] = default.label
    elif isinstance(default, tuple) and hasattr(meta["kind"], "JSON_SCHEMA"):
        schema["default"] = list(default)
    return schema


def _key(fld: dataclasses.Field) -> str:
    return fld.metadata.get("key") or fld.name


def section_schema(cls: type) -> dict[str, Any]:
    """The schema of one TOML table declared by the dataclass ``cls``: its keys, the required ones, no other."""
    fields = dataclasses.fields(cls)
    required = [
        _key(f) for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {_key(f): _field(f) for f in fields},
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def _sweep_schema() -> dict[str, Any]:
    """``[sweep]``: a dotted key of a section (or of a failure class) = a list of its values."""
    properties = {}
    for table, cls in SECTIONS.items():
        for fld in dataclasses.fields(cls):
            if getattr(fld.metadata["kind"], "SWEEPABLE", True):
                properties[f"{table}.{_key(fld)}"] = {"type": "array", "minItems": 1, "items": _value(fld.metadata)}
    failure_keys = "|".join(re.escape(_key(f)) for f in dataclasses.fields(FailureClass) if f.name != "name")
    return {
        "type": "object",
        "description": "dotted keys, each a list of values: one dimension of the sweep",
        "properties": properties,
        "patternProperties": {f"^failures\\.[^.]+\\.({failure_keys})$": {"type": "array", "minItems": 1}},
        "additionalProperties": False,
    }


def json_schema(extra_sections: Mapping[str, type] | None = None, title: str = "mcsim scenario") -> dict[str, Any]:
    """The JSON Schema of a scenario file; ``extra_sections`` (TOML table name -> its dataclass) adds the
    tables a plan file has (:data:`mcsim.scenario.schema.PLAN_TABLES`); a plan file needs ``[model]``
    only (its search gives the layout when ``[parallelism]`` is left out)."""
    properties: dict[str, Any] = {
        "name": {"type": "string", "description": "the scenario's name (names its default output file)"},
        "description": {"type": "string"},
        "failures": {"type": "array", "items": section_schema(FailureClass), "description": "failure classes"},
        "sweep": _sweep_schema(),
        "uncertain": {
            "type": "object",
            "description": "uncertain inputs: dotted key = { dist = ..., its parameters } (docs/model.md)",
            "additionalProperties": {"type": "object"},
        },
        "provenance": {
            "type": "object",
            "description": 'borrowed values: "section.key" = "where its value comes from" (one line; docs/model.md)',
            "additionalProperties": {"type": ["string", "object"]},
        },
    }
    properties.update({table: section_schema(cls) for table, cls in SECTIONS.items()})
    properties.update({table: section_schema(cls) for table, cls in (extra_sections or {}).items()})
    return {
        "$schema": DRAFT,
        "$id": SCHEMA_ID,
        "title": title,
        "description": "Generated by `mcsim schema` from mcsim/scenario/schema.py; mcsim's validator is the judge.",
        "type": "object",
        "properties": properties,
        "required": ["model"] if extra_sections else list(REQUIRED_SECTIONS),
        "additionalProperties": False,
    }
