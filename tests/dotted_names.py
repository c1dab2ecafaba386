"""Whether a dotted ``mcsim.…`` name that a document or a docstring gives names something that exists."""

from __future__ import annotations

import importlib
import re
import types

# ``mcsim.a.b`` not preceded by a word character or a dot (``ds.mcsim.best`` is the accessor, not a module).
DOTTED = re.compile(r"(?<![\w.])~?(mcsim(?:\.\w+)+)")


def resolves(dotted: str) -> bool:
    """Whether ``mcsim.a.b.c`` names a module of the package or an attribute of one (a dataclass's or a
    named tuple's field counts)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        if cut > 1 and _shadowed(parts[: cut - 1], parts[cut - 1]):
            continue  # importing it would replace the attribute (mcsim.scenarios the function by its data folder)
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


def _shadowed(parent: list[str], name: str) -> bool:
    """Whether module ``parent`` already has a non-module attribute ``name`` that an import of
    ``parent.name`` would overwrite (the shipped scenarios' folder is ``mcsim.scenarios``, beside the
    function ``mcsim.scenarios()``)."""
    try:
        module = importlib.import_module(".".join(parent))
    except ImportError:
        return False
    value = getattr(module, name, None)
    return value is not None and not isinstance(value, types.ModuleType)


def unresolved(text: str) -> list[str]:
    """The dotted ``mcsim.…`` names of ``text`` that name nothing."""
    return sorted(
        {name.rstrip(".") for name in DOTTED.findall(text)} - {""} - set(filter(resolves, DOTTED.findall(text)))
    )
