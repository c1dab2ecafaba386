"""Sphinx configuration of mcsim's documentation site.

Build (from the repository root, after ``pip install -e ".[docs]"``)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The site is the repository's Markdown (README, ARCHITECTURE, CONTRIBUTING, CHANGELOG,
benchmarks/README and docs/*.md, read by myst-parser), the API reference generated from
the numpy-style docstrings (autodoc + napoleon, docs/api.md) and the executed tutorial
notebook. It builds offline: no intersphinx, no theme or script fetched from the network
(Sphinx's built-in alabaster theme).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # document this source tree, not an installed copy
# ... and execute the tutorial against it (the notebook's kernel inherits the environment)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

import mcsim  # noqa: E402

project = "mcsim"
author = "The mcsim developers"
copyright = "the mcsim developers"
release = mcsim.__version__
version = release

extensions = [
    "myst_nb",  # myst-parser's Markdown, and notebooks

    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints", "gallery.py"]

# Markdown: heading anchors so that "#section" links in the pages resolve; dollar maths.
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "colon_fence"]

# The tutorial is stored without outputs (tests/test_docs.py runs it): executed at build time, in
# the repository root as the test does, so that the page shows what this tree's code prints.
nb_execution_mode = "auto"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_in_temp = False
nb_execution_show_tb = True

# API reference: numpy-style docstrings, members in source order, type hints in the description.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"show-inheritance": False}

html_theme = "alabaster"
html_title = f"mcsim {release}"
html_static_path: list[str] = []
html_theme_options = {"description": "Monte Carlo reliability simulation of LLM training clusters"}

# Pages that live at the repository root (GitHub shows them there): each has a one-line stub in
# docs/ whose text is replaced, when Sphinx reads it, by the root file with its links rewritten
# to the site's page names. The stubs keep the site's sources in docs/ and nothing generated in git.
ROOT_PAGES = {
    "readme": "README.md",
    "architecture": "ARCHITECTURE.md",
    "contributing": "CONTRIBUTING.md",
    "changelog": "CHANGELOG.md",
    "benchmarks": "benchmarks/README.md",
}
_LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s]+)\)")


def _site_target(source: str, target: str) -> str:
    """A link or image path of a root page, as seen from docs/ (where the site's pages are)."""
    path, _, anchor = target.partition("#")
    resolved = (ROOT / source).parent.joinpath(path).resolve()
    for page, name in ROOT_PAGES.items():
        if resolved == (ROOT / name).resolve():
            path = f"{page}.md"
            break
    else:
        path = Path(resolved).relative_to(DOCS).as_posix() if resolved.is_relative_to(DOCS) else path
    return path + (f"#{anchor}" if anchor else "")


def _fill_root_page(app, docname: str, source: list[str]) -> None:
    name = ROOT_PAGES.get(docname)
    if name is None:
        return
    app.env.note_dependency(str(ROOT / name))
    text = (ROOT / name).read_text(encoding="utf-8")
    source[0] = _LINK.sub(lambda m: f"]({_site_target(name, m.group(1))})", text)


def setup(app):
    app.connect("source-read", _fill_root_page)
