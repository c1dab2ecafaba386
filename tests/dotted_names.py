"""Whether a dotted ``mcsim.…`` name that a document or a docstring gives names something that exists."""

from __future__ import annotations

import importlib
import re

# ``mcsim.a.b`` not preceded by a word character or a dot (``ds.mcsim.best`` is the accessor, not a module).
DOTTED = re.compile(r"(?<![\w.])~?(mcsim(?:\.\w+)+)")


def resolves(dotted: str) -> bool:
    """Whether ``mcsim.a.b.c`` names a module of the package or an attribute of one (a dataclass's or a
    named tuple's field counts)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(value, name):
                return name in getattr(value, "__annotations__", {})
            value = getattr(value, name)
        return True
    return False


def unresolved(text: str) -> list[str]:
    """The dotted ``mcsim.…`` names of ``text`` that name nothing."""
    return sorted(
        {name.rstrip(".") for name in DOTTED.findall(text)} - {""} - set(filter(resolves, DOTTED.findall(text)))
    )
