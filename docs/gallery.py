"""Regenerate the figures of the gallery (docs/gallery.md): one per ``mcsim plot --kind``.

From the repository root, with the plot extra installed::

    python docs/gallery.py                 # a few minutes on 2 cores, most of it the sensitivity indices

It runs the shipped capacity-planning sweep and its uncertain-input variant with the
``mcsim`` command line (into a temporary folder), then draws every kind of figure with
``mcsim plot`` into ``docs/img/capacity-<kind>.png``, the names the README and
docs/capacity-planning.md already use for two of them. The commands are printed as they run,
so each figure's command can be repeated by hand.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"

SWEEP = "scenarios/capacity-planning.toml"
UNCERTAIN = "scenarios/capacity-planning-uncertain.toml"

# kind -> (result file: "sweep" or "uncertain", extra options of `mcsim plot`)
KINDS: dict[str, tuple[str, list[str]]] = {
    "scaling": ("sweep", []),
    "cdf": ("sweep", ["--variable", "wall_time"]),
    "pareto": ("sweep", []),
    "breakdown": ("sweep", []),
    "sensitivity": ("uncertain", ["--variable", "wall_time"]),
}


def image(kind: str) -> Path:
    """Where the gallery keeps the figure of ``kind``."""
    return IMG / f"capacity-{kind}.png"


def mcsim(*args: str) -> None:
    command = [sys.executable, "-m", "mcsim", *args]
    print("$ mcsim " + shlex.join(args), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "kinds", nargs="*", metavar="KIND", help=f"the kinds to draw: {', '.join(KINDS)} (default: all)"
    )
    args = parser.parse_args(argv)
    if unknown := sorted(set(args.kinds) - set(KINDS)):
        parser.error(f"unknown kind {', '.join(unknown)}; choose from {', '.join(KINDS)}")
    kinds = args.kinds or list(KINDS)
    with tempfile.TemporaryDirectory(prefix="mcsim-gallery-") as tmp:
        results = {"sweep": Path(tmp) / "capacity-planning.nc", "uncertain": Path(tmp) / "capacity-uncertain.nc"}
        needed = {KINDS[kind][0] for kind in kinds}
        for source, scenario in (("sweep", SWEEP), ("uncertain", UNCERTAIN)):
            if source in needed:
                mcsim("run", scenario, "--quiet", "-o", str(results[source]))
        for kind in kinds:
            source, options = KINDS[kind]
            mcsim("plot", str(results[source]), "--kind", kind, *options, "-o", str(image(kind).relative_to(ROOT)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
