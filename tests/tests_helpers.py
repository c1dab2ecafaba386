"""Small helpers shared by test modules (not tests themselves)."""

from __future__ import annotations

from pathlib import Path

from mcsim.scenario.config import dumps_toml


def write_toml(raw: dict, path: Path) -> Path:
    """Write scenario tables to ``path`` as TOML."""
    path.write_text(dumps_toml(raw))
    return path
