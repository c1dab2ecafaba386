"""The scenarios and plans shipped with mcsim: where they are, their names, and a name or a path to a file.

Installed, the shipped files are the package data of ``mcsim.scenarios`` (the repository's
``scenarios/`` folder); ``mcsim run capacity-planning`` and ``load_scenario("capacity-planning")``
name one by its file name, with or without ``.toml``. An argument is taken as a path first: a file
of that name in the current folder (or at that path), or ``NAME.toml`` there for a bare ``NAME``,
wins over a shipped scenario of the same name, so that the copy being edited (``mcsim scenarios
copy NAME``) is the one run. A bare name that is neither is one error line that lists the shipped
names.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from mcsim.errors import ScenarioError
from mcsim.scenario.schema import PLAN_TABLES

REFERENCE_SCENARIO = "llama3-405b.toml"


@dataclass(frozen=True)
class ShippedScenario:
    """One shipped file: its name (``capacity-planning``), kind (``scenario`` or ``plan``), description, path."""

    name: str
    kind: str
    description: str
    path: Path


def shipped_scenarios_folder() -> Path:
    """Folder of the shipped scenario files.

    Installed, they are the package data of ``mcsim.scenarios``. From a source
    tree (an editable install, or ``import mcsim`` in the repository root, where
    ``./mcsim`` shadows an installed package) they are that repository's
    ``scenarios/`` folder, even when another tree's editable install is what
    ``mcsim.scenarios`` would find.
    """
    tree = Path(__file__).resolve().parents[2]
    if (tree / "pyproject.toml").is_file() and (tree / "scenarios" / REFERENCE_SCENARIO).is_file():
        return tree / "scenarios"
    # The folder under the package, not the package data module itself: importing ``mcsim.scenarios`` would
    # set the attribute ``mcsim.scenarios`` to that module, hiding the function ``mcsim.scenarios()``.
    installed = Path(str(resources.files("mcsim"))) / "scenarios"
    return installed if (installed / REFERENCE_SCENARIO).is_file() else tree / "scenarios"


def reference_scenario_path() -> Path:
    """Path of the shipped reference scenario (Llama 3 405B)."""
    return shipped_scenarios_folder() / REFERENCE_SCENARIO


def shipped_scenarios() -> list[ShippedScenario]:
    """Every shipped scenario and plan file, by name.

    The kind is ``plan`` for a file with a ``[search]``, ``[constraints]`` or ``[plan]`` table
    (run it with ``mcsim plan``), else ``scenario``; the description is the file's
    ``description`` (first line), or ``""``.
    """
    found = []
    for path in sorted(shipped_scenarios_folder().glob("*.toml")):
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):  # pragma: no cover - a broken install
            raw = {}
        kind = "plan" if any(table in raw for table in PLAN_TABLES) else "scenario"
        description = raw.get("description", "")
        description = description.strip().splitlines()[0] if isinstance(description, str) and description else ""
        found.append(ShippedScenario(path.stem, kind, description, path))
    return found


def shipped_names() -> list[str]:
    """The names of the shipped scenarios and plans (``mcsim run NAME``, ``mcsim plan NAME``)."""
    return [entry.name for entry in shipped_scenarios()]


def shipped_scenario(name: str) -> ShippedScenario | None:
    """The shipped file called ``name`` (with or without ``.toml``), or None."""
    stem = name.removesuffix(".toml")
    return next((entry for entry in shipped_scenarios() if entry.name == stem), None)


def _looks_like_a_name(text: str) -> bool:
    """A bare file name: no folder in it (``capacity-planning``, ``plan-llama3-70b.toml``)."""
    return bool(text) and os.sep not in text and "/" not in text and (os.altsep is None or os.altsep not in text)


def resolve_scenario(name_or_path: str | os.PathLike[str]) -> Path:
    """The file that ``name_or_path`` names: a path when something exists there, else a shipped scenario.

    Parameters
    ----------
    name_or_path : str or path-like
        A path to a scenario or plan file, or the name of a shipped one (``capacity-planning``,
        with or without ``.toml``). A file at that path wins over a shipped file of the same name.

    Returns
    -------
    Path
        The path itself when something exists there or when it names a folder (``a/b.toml``: the
        reader then says what is wrong with it); for a bare name without ``.toml``, ``NAME.toml``
        in the current folder when there is one (the copy ``mcsim scenarios copy NAME`` writes);
        else the shipped file.

    Raises
    ------
    ScenarioError
        When a bare name is neither an existing file nor a shipped scenario; the message lists
        the shipped names.
    """
    path = Path(name_or_path)
    text = os.fspath(name_or_path)
    if os.path.lexists(path) or not _looks_like_a_name(text):
        return path
    if not text.endswith(".toml") and os.path.lexists(local := Path(f"{text}.toml")):
        return local  # `mcsim scenarios copy NAME` wrote it here: the edited copy, not the shipped one
    entry = shipped_scenario(text)
    if entry is not None:
        return entry.path
    raise ScenarioError(
        text,
        "(file)",
        f"no such file, and not the name of a shipped scenario; expected a path or one of "
        f"{', '.join(shipped_names())} (`mcsim scenarios` lists them)",
    )
