"""SHA-256 of every data variable of every shipped scenario's and plan's output file.

``.venv/bin/python benchmarks/output_hashes.py [--runs N] [-o HASHES.json] [--compare OLD.json]``

Runs ``mcsim run`` on every scenario and ``mcsim plan`` on every plan shipped in
``scenarios/`` (``--runs`` overrides ``run.runs`` of the scenarios, default: as shipped;
plans always run as shipped), opens each output and hashes the bytes of each data
variable and coordinate (attributes that hold a time or a version are left out: they
differ between any two runs). A refactoring that must not change behaviour is checked
by recording the hashes before the first move and comparing after the last::

    git stash; python benchmarks/output_hashes.py -o /tmp/before.json; git stash pop
    python benchmarks/output_hashes.py --compare /tmp/before.json

Exit status 1 when ``--compare`` finds a difference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

REPOSITORY = Path(__file__).resolve().parent.parent
SCENARIOS = REPOSITORY / "scenarios"


def variable_hashes(path: Path) -> dict[str, str]:
    """SHA-256 of each variable's values (data variables and coordinates) of one netCDF file."""
    with xr.open_dataset(path) as ds:
        out = {}
        for name in sorted(list(ds.data_vars) + list(ds.coords)):
            values = np.asarray(ds[name].values)
            digest = hashlib.sha256(str(values.dtype).encode() + str(values.shape).encode())
            digest.update(values.tobytes() if values.dtype.kind != "O" else repr(values.tolist()).encode())
            out[name] = digest.hexdigest()[:16]
        return out


def run_all(runs: int | None) -> dict[str, dict[str, str]]:
    """Run every shipped scenario and plan into a temporary folder; hashes per file."""
    results: dict[str, dict[str, str]] = {}
    mcsim = [sys.executable, "-c", "import sys; from mcsim.cli import main; sys.exit(main())"]
    with tempfile.TemporaryDirectory() as folder:
        for toml in sorted(SCENARIOS.glob("*.toml")):
            out = Path(folder) / (toml.stem + ".nc")
            command = "plan" if toml.stem.startswith("plan-") else "run"
            extra = ["--runs", str(runs)] if runs and command == "run" else []
            proc = subprocess.run(
                [*mcsim, command, str(toml), "-o", str(out), *extra, "--quiet", "--no-resume"],
                capture_output=True,
                text=True,
                cwd=folder,
            )
            if not out.exists():
                results[toml.name] = {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}
                continue
            results[toml.name] = variable_hashes(out)
            print(f"{toml.name}: {len(results[toml.name])} variables", file=sys.stderr, flush=True)
    return results


def compare(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> list[str]:
    """Lines naming every file and variable whose hash differs or is missing on one side."""
    problems = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name, {}), after.get(name, {})
        for variable in sorted(set(old) | set(new)):
            if old.get(variable) != new.get(variable):
                problems.append(f"{name}: {variable}: {old.get(variable)} != {new.get(variable)}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help="runs per scenario configuration")
    parser.add_argument("-o", "--output", type=Path, help="write the hashes as JSON here")
    parser.add_argument("--compare", type=Path, help="JSON of an earlier run to compare with")
    args = parser.parse_args()
    hashes = run_all(args.runs)
    if args.output:
        args.output.write_text(json.dumps(hashes, indent=1, sort_keys=True))
    if args.compare:
        problems = compare(json.loads(args.compare.read_text()), hashes)
        print(
            "\n".join(problems)
            if problems
            else f"identical: {len(hashes)} files, {sum(len(v) for v in hashes.values())} variables"
        )
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
