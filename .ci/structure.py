"""The package's structure in figures, and the limits CI holds it to (ARCHITECTURE.md, "Rules").

``python .ci/structure.py [--check] [--json]`` from the repository root; radon (the lint extra)
must be importable. It measures ``mcsim/``:

- lines (physical lines of the ``.py`` files) and modules;
- modules over 600 lines (each must be named with its reason in ARCHITECTURE.md, "Modules over
  600 lines") and over 900 (none may be);
- cyclomatic complexity as radon counts it, boolean operators and conditional expressions
  included, of every function, method and class: at most 15, but the blocks named in
  ARCHITECTURE.md ("Functions above complexity 15") with their reason, and none above 20;
- functions over 60 lines (at most 10);
- imports inside functions: only in ``mcsim/cli/`` and of the optional dependencies and
  platform modules in ``OPTIONAL_IMPORTS``;
- exceptions (the classes of ``mcsim/errors.py``) imported from ``mcsim.errors`` only, in the
  package, its tests and its benchmarks (``from mcsim import ScenarioError``, the public name,
  is allowed too).

``--check`` prints each breach on a line of its own and exits 1 when there is one; without it
the figures are printed (``--json``: as one JSON object).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mcsim"
ARCHITECTURE = ROOT / "ARCHITECTURE.md"

MODULE_LINES = 600  # a module longer than this needs a written reason
MODULE_LINES_MAX = 900  # ... and none may be longer than this
COMPLEXITY = 15  # radon's cyclomatic complexity of a block, without a written reason
COMPLEXITY_MAX = 20  # ... and with one
FUNCTION_LINES = 60  # a function longer than this is counted
LONG_FUNCTIONS_MAX = 10  # ... and at most this many may be
# Imported inside functions where they are first used: the extras (dask, matplotlib) and modules that
# some platforms lack.
OPTIONAL_IMPORTS = {"dask", "distributed", "matplotlib", "fcntl", "resource", "msvcrt", "pwd"}


def modules() -> list[Path]:
    """Every module of the package, sorted."""
    return sorted(PACKAGE.rglob("*.py"))


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def complexities(path: Path) -> list[tuple[str, int]]:
    """(``module:block``, radon complexity) of every function, method and class of one module."""
    out = []
    blocks = list(cc_visit(path.read_text()))  # classes, and functions and methods (methods by their full name)
    while blocks:
        block = blocks.pop()
        out.append((f"{relative(path)}:{block.fullname}", block.complexity))
        blocks += getattr(block, "closures", [])
    return out


def long_functions(path: Path) -> list[tuple[str, int]]:
    """(``module:function``, lines) of every function over ``FUNCTION_LINES`` lines."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LINES:
                out.append((f"{relative(path)}:{node.name}", length))
    return out


def inner_imports(path: Path) -> list[tuple[str, str]]:
    """(``module:line``, imported module) of every import inside a function."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    out += [(f"{relative(path)}:{inner.lineno}", alias.name) for alias in inner.names]
                elif isinstance(inner, ast.ImportFrom):
                    out.append((f"{relative(path)}:{inner.lineno}", "." * inner.level + (inner.module or "")))
    return out


def exception_names() -> set[str]:
    """The classes defined in ``mcsim/errors.py``."""
    tree = ast.parse((PACKAGE / "errors.py").read_text())
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


def exception_imports(path: Path, exceptions: set[str]) -> list[str]:
    """``module:line name from module`` for every exception imported from elsewhere than ``mcsim.errors``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = "." * node.level + (node.module or "")
        if source in ("mcsim.errors", "mcsim", ".errors", "..errors"):
            continue
        out += [
            f"{relative(path)}:{node.lineno} {alias.name} from {source}"
            for alias in node.names
            if alias.name in exceptions
        ]
    return out


def allowed_in_architecture(heading: str) -> set[str]:
    """The names listed (in backquotes, at the start of a bullet) under one heading of ARCHITECTURE.md."""
    text = ARCHITECTURE.read_text() if ARCHITECTURE.exists() else ""
    match = re.search(rf"^#+ {re.escape(heading)}\s*$(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    if match is None:
        return set()
    return set(re.findall(r"^- `([^`]+)`", match.group(1), re.M))


def measure() -> dict:
    """The figures of the package as it stands."""
    paths = modules()
    lines = {relative(p): line_count(p) for p in paths}
    blocks = [b for p in paths for b in complexities(p)]
    longs = [f for p in paths for f in long_functions(p)]
    imports = [i for p in paths for i in inner_imports(p)]
    return {
        "lines": sum(lines.values()),
        "modules": len(paths),
        "modules_over_600": {k: v for k, v in sorted(lines.items()) if v > MODULE_LINES},
        "complexity_over_15": dict(sorted((k, v) for k, v in blocks if v > COMPLEXITY)),
        "complexity_over_20": dict(sorted((k, v) for k, v in blocks if v > COMPLEXITY_MAX)),
        "functions_over_60_lines": dict(sorted(longs)),
        "exceptions_imported_elsewhere": [
            entry
            for folder in ("mcsim", "tests", "benchmarks")
            for p in sorted((ROOT / folder).rglob("*.py"))
            for entry in exception_imports(p, exception_names())
        ],
        "imports_inside_functions": len(imports),
        "imports_inside_functions_outside_cli": [
            f"{where} {name}"
            for where, name in imports
            if not where.startswith("mcsim/cli/") and name.lstrip(".").split(".")[0] not in OPTIONAL_IMPORTS
        ],
    }


def breaches(figures: dict) -> list[str]:
    """One line per rule the figures break."""
    out = []
    reasoned_modules = allowed_in_architecture("Modules over 600 lines")
    for module, lines in figures["modules_over_600"].items():
        if lines > MODULE_LINES_MAX:
            out.append(f"{module}: {lines} lines, over {MODULE_LINES_MAX}")
        elif module not in reasoned_modules:
            out.append(f"{module}: {lines} lines, over {MODULE_LINES} without a reason in ARCHITECTURE.md")
    reasoned_blocks = allowed_in_architecture("Functions above complexity 15")
    for block, value in figures["complexity_over_15"].items():
        if value > COMPLEXITY_MAX:
            out.append(f"{block}: complexity {value}, over {COMPLEXITY_MAX}")
        elif block not in reasoned_blocks:
            out.append(f"{block}: complexity {value}, over {COMPLEXITY} without a reason in ARCHITECTURE.md")
    if len(figures["functions_over_60_lines"]) > LONG_FUNCTIONS_MAX:
        out.append(
            f"{len(figures['functions_over_60_lines'])} functions over {FUNCTION_LINES} lines, "
            f"more than {LONG_FUNCTIONS_MAX}: {', '.join(figures['functions_over_60_lines'])}"
        )
    out += [f"{entry}: imported inside a function" for entry in figures["imports_inside_functions_outside_cli"]]
    out += [f"{entry}: import it from mcsim.errors" for entry in figures["exceptions_imported_elsewhere"]]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 on any breach of the limits")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figures = measure()
    if args.check:
        problems = breaches(figures)
        for line in problems:
            print(line)
        print(f"structure: {len(problems)} breaches" if problems else "structure: within the limits")
        return 1 if problems else 0
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    print(f"lines in mcsim/: {figures['lines']:,} in {figures['modules']} modules")
    print(f"modules over {MODULE_LINES} lines: {len(figures['modules_over_600'])}")
    for module, lines in figures["modules_over_600"].items():
        print(f"  {module} {lines}")
    print(
        f"blocks above complexity {COMPLEXITY}: {len(figures['complexity_over_15'])} "
        f"({len(figures['complexity_over_20'])} above {COMPLEXITY_MAX})"
    )
    for block, value in sorted(figures["complexity_over_15"].items(), key=lambda kv: -kv[1]):
        print(f"  {block} {value}")
    print(f"functions over {FUNCTION_LINES} lines: {len(figures['functions_over_60_lines'])}")
    for function, lines in figures["functions_over_60_lines"].items():
        print(f"  {function} {lines}")
    print(
        f"imports inside functions: {figures['imports_inside_functions']} "
        f"({len(figures['imports_inside_functions_outside_cli'])} outside cli/ and not of optional dependencies)"
    )
    print(f"exceptions imported from elsewhere than mcsim.errors: {len(figures['exceptions_imported_elsewhere'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
