"""The documentation cannot drift silently from the code.

The site's build (Sphinx, CONTRIBUTING.md) is not part of CI; these checks are cheap and are:
the API page names every public name, every page is in the site, the gallery draws every
``mcsim plot --kind``, the README's speed table is the one ``benchmarks/run.py --markdown``
writes, CITATION.cff is well formed, and the tutorial notebook runs without a cell error.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_python import run_python
from dotted_names import unresolved

import mcsim
from mcsim.cli.parser import PLOT_KINDS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_page_lists_every_public_name():
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"\bmcsim\.(\w+)", text))
    assert [name for name in mcsim.__all__ if name not in documented] == []
    # the accessor: every public method is documented by autodoc's :members:
    assert ".. autoclass:: mcsim.accessor.McsimAccessor\n   :members:" in text


def test_every_page_is_in_the_site():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    toctrees = re.findall(r"```\{toctree\}\n(.*?)```", index, flags=re.S)
    listed = {line.strip() for tree in toctrees for line in tree.splitlines() if line.strip() and ":" not in line}
    pages = {p.stem for p in DOCS.glob("*.md") if p.stem != "index"} | {"tutorial"}
    assert pages - listed == set(), "pages missing from the toctrees of docs/index.md"
    assert listed - pages == set(), "toctree entries without a page"
    # the pages that live at the repository root have their stub in docs/, and exist
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    root_pages = dict(re.findall(r'^\s+"(\w+)": "([\w/.]+\.md)",$', conf, flags=re.M))
    assert set(root_pages) == {"readme", "architecture", "contributing", "changelog", "benchmarks"}
    for page, source in root_pages.items():
        assert (DOCS / f"{page}.md").is_file() and (ROOT / source).is_file()


def test_gallery_draws_every_plot_kind():
    gallery = _load(DOCS / "gallery.py", "mcsim_docs_gallery")
    assert tuple(gallery.KINDS) == PLOT_KINDS
    page = (DOCS / "gallery.md").read_text(encoding="utf-8")
    for kind in PLOT_KINDS:
        image = gallery.image(kind)
        assert image.is_file(), f"{image}: run python docs/gallery.py"
        assert f"](img/{image.name})" in page and f"--kind {kind}" in page


def test_readme_speed_table_is_written_by_the_benchmark_suite(tmp_path):
    suite = _load(ROOT / "benchmarks" / "run.py", "mcsim_bench_run")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count(suite.README_START) == 1 and readme.count(suite.README_END) == 1
    assert readme.index(suite.README_START) < readme.index(suite.README_END)

    def case(name, **figures):
        return dict(case=name, runs=10, gpus=1024, **figures)

    results = dict(
        machine=dict(processor="x86_64", cpus=2, numba_threads=2, python="3.11", numba="0.68", mcsim="0.1.0"),
        quick=False,
        date="2026-01-01",
        cases=[
            case("llama3-405b fast", runs_per_s=100.0),
            case("llama3-405b exact", iterations_per_s=1e6),
            case("1024 GPUs fast", runs_per_s=1000.0),
            case("fast floor", runs_per_s=250.0, failures_per_run=560.0),
            case("mcsim fast (baseline work)", seconds_per_run=1e-4),
            case("numpy baseline", seconds_per_run=10.0, iterations=20000),
            case("simpy baseline", seconds_per_run=0.5, iterations=20000),
            dict(case="cold start (empty Numba cache)", seconds=16.0),
            dict(case="warm cache", seconds=2.0),
        ],
        ratios={
            "exact / floor, iterations per second (target >= 0.7)": 0.85,
            "fast / its floor on the reference, runs per second": 0.4,
            "fast / its floor on 1,024 GPUs, runs per second": 0.12,
            "fast / exact on the reference, runs per second": 95.0,
            "simpy / mcsim fast, time per simulated run (target >= 1000)": 5000.0,
            "numpy / mcsim fast, time per simulated run (target >= 10000)": 100000.0,
            "numpy / mcsim exact, time per simulated run": 50.0,
        },
    )
    table = suite.markdown_table(results)
    assert "| case | result | command |" in table and "**100,000×**" in table and "2026-01-01" in table
    assert "**0.40 of its floor** (a loop drawing only the failures, 560 a run)" in table
    copy = tmp_path / "README.md"
    copy.write_text(readme, encoding="utf-8")
    suite.replace_readme_table(copy, table)
    written = copy.read_text(encoding="utf-8")
    assert table in written
    outside = written.split(suite.README_START)[0] + written.split(suite.README_END)[1]
    assert outside == readme.split(suite.README_START)[0] + readme.split(suite.README_END)[1]
    json.dumps(results)  # what -o writes and --from reads back


def test_citation_file_is_cff_1_2():
    text = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    for line in ("cff-version: 1.2.0", "type: software", "license: MIT", "references:"):
        assert re.search(rf"^{re.escape(line)}$", text, flags=re.M), line
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load(text)
    assert {"cff-version", "message", "title", "authors"} <= set(cff)
    assert cff["version"] == mcsim.__version__
    assert all({"type", "title", "authors"} <= set(ref) for ref in cff["references"])


def test_tutorial_notebook_is_stored_without_outputs():
    nb = json.loads((DOCS / "tutorial.ipynb").read_text(encoding="utf-8"))
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    assert code and all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code)


def test_tutorial_notebook_runs():
    """Every cell of docs/tutorial.ipynb runs, against this source tree (about 30 s on 2 cores)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    nb = nbformat.read(DOCS / "tutorial.ipynb", as_version=4)
    # The kernel runs in the repository root (so it imports this tree's mcsim, as the tests do);
    # a last cell says which mcsim it imported.
    nb.cells.append(nbformat.v4.new_code_cell("import mcsim, pathlib\nprint(pathlib.Path(mcsim.__file__).parent)"))
    start = time.perf_counter()
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()  # raises CellExecutionError on the first cell that fails
    elapsed = time.perf_counter() - start
    (printed,) = [out["text"] for out in nb.cells[-1].outputs if out.get("name") == "stdout"]
    assert Path(printed.strip()) == ROOT / "mcsim"
    (figure,) = [cell for cell in nb.cells if cell.cell_type == "code" and ".plot." in cell.source]
    assert any(out.get("output_type") == "display_data" for out in figure.outputs), "the figure is shown"
    assert elapsed < 600, elapsed


DOCUMENTS = [
    "README.md",
    "ARCHITECTURE.md",
    "CONTRIBUTING.md",
    "benchmarks/README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_module_path_and_name_the_docs_give_exists(document):
    """A file path under ``mcsim/`` or ``tests/`` and a dotted ``mcsim.…`` name in the docs point at code that
    exists (the changelog records history and is not checked)."""
    text = (ROOT / document).read_text()
    paths = set(re.findall(r"\b((?:mcsim|tests|benchmarks)/[\w/]+\.py)\b", text))
    missing = sorted(p for p in paths if not (ROOT / p).exists()) + unresolved(text)
    assert not missing, f"{document} names what does not exist: {missing}"


# --------------------------------------------------------------------------- the Python blocks of the docs

# The result files the documents' Python blocks read, each made here by the command the documents give, with fewer
# runs and draws (the blocks read the files' dims and variables, not their figures).
RESULT_FILES = {
    "llama3-405b": ["llama3-405b", "--runs", "50"],
    "capacity-planning": ["capacity-planning", "--runs", "50"],
    "capacity-planning-uncertain": ["capacity-planning-uncertain", "--runs", "5", "--set", "run.draws=32"],
    "capacity-planning-point": [
        "capacity-planning",
        "--runs",
        "200",
        "--set",
        "parallelism.gpus=[4096,8192,16384]",
        "--set",
        "checkpoint.strategy=async",
        "--set",
        "checkpoint.interval=young_daly",
    ],
}


def python_blocks(text: str) -> list[str]:
    """The fenced ```python blocks of a Markdown text."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)


PYTHON_BLOCKS = [
    pytest.param(document, code, id=f"{document}-{i}")
    for document in DOCUMENTS
    for i, code in enumerate(python_blocks((ROOT / document).read_text(encoding="utf-8")))
]


@pytest.fixture(scope="module")
def documented_results(tmp_path_factory):
    """A folder with ``results/NAME.nc`` for every name of RESULT_FILES (made by ``mcsim run``) and the examples."""
    folder = tmp_path_factory.mktemp("docs-blocks")
    # the example files the blocks read by their path from a clone's root (examples/, docs/examples/)
    for example in ("examples", "docs/examples"):
        shutil.copytree(ROOT / example, folder / example)
    for name, args in RESULT_FILES.items():
        command = [sys.executable, "-m", "mcsim", "run", *args, "-o", f"results/{name}.nc", "--quiet"]
        proc = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (name, proc.stderr)
    return folder


def test_the_docs_have_python_blocks():
    assert len(PYTHON_BLOCKS) >= 3  # README's two, docs/capacity-planning.md's one


@pytest.mark.parametrize(("document", "code"), PYTHON_BLOCKS)
def test_every_python_block_runs_on_its_own(document, code, documented_results):
    """Each block of README.md, ARCHITECTURE.md, CONTRIBUTING.md, benchmarks/README.md and docs/*.md runs in a fresh
    interpreter (its imports its own), in a folder holding the result files it reads (issue 42 item 1)."""
    pytest.importorskip("matplotlib")
    read = set(re.findall(r"results/([\w.-]+)\.nc", code))
    assert read <= set(RESULT_FILES), f"{document}: add {sorted(read - set(RESULT_FILES))} to RESULT_FILES"
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=str(ROOT))
    proc = run_python(code, cwd=documented_results, env=env, timeout=600)
    assert proc.returncode == 0, f"{document}:\n{code}\n{proc.stderr[-3000:]}"
