"""GPU power logs (``nvidia-smi`` CSV, ``dcgmi dmon``) as the power-by-state keys of a scenario.

``mcsim fit-power LOG`` and :func:`fit_power` read a log of power samples with the GPU's
utilization, split the samples into states by utilization, and give the scenario keys the
energy model (docs/model.md §5) takes, as ``--set`` text:

- **idle** (utilization at most ``idle_max_percent``, default 5 %): the mean power is
  ``hardware.idle_w`` [W], the power of an allocated GPU computing nothing (recovering);
- **busy** (utilization at least ``busy_min_percent``, default 90 %): the mean power ``P_busy`` [W]
  gives ``energy.busy_utilization`` ``u = (P_busy - P_idle) / (P_tdp - P_idle)``, the share of
  (TDP - idle) drawn while computing at full clock (the model's ``P_busy = P_idle + (P_tdp - P_idle)
  u x^gamma`` at ``x = 1``);
- **partial** (between the two): counted and shown, fitted to no key. ``utilization.gpu`` is the
  share of the sample period a kernel ran, and NCCL's kernels run while a rank waits in a collective,
  so waiting and checkpoint stalls cannot be told apart from computing by utilization alone:
  ``energy.wait_power_fraction`` and ``energy.checkpoint_power_fraction`` keep their sources.

``P_tdp`` [W] is, in order: ``tdp_w`` if given; the log's ``power.limit`` column (its mean) when it
has one, and then ``hardware.tdp_w`` is among the keys; the catalog's TDP of ``gpu_type``.

Formats
-------
``nvidia-smi --query-gpu=timestamp,index,power.draw,utilization.gpu[,power.limit] --format=csv``
(with or without ``,nounits``): a header naming the columns (``power.draw [W]``), then one row per
GPU and sample (``2024/03/01 12:00:00.000, 0, 312.45 W, 97 %``). Only ``power.draw`` and
``utilization.gpu`` are required.

``dcgmi dmon -e 155,203`` (fields ``POWER``, the power usage [W], and ``GPUTL``, the utilization
[%]; more fields may follow): a header line ``#Entity   POWER   GPUTL``, an optional line of
``ID`` (and units), then rows ``GPU 0   296.431   98``.

Blank lines, and lines starting with ``#`` after the header, are skipped. A value that is not a
finite number in range (``[N/A]``, ``N/A``, a power < 0 or above 100 kW, a utilization outside
0-100 %), a row with a missing field, a header without the two columns, no idle or no busy sample,
or a fitted key outside what a scenario accepts raises :class:`mcsim.errors.ScenarioError` naming
the file, the line and the column.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcsim.errors import ScenarioError
from mcsim.io.text_input import user_text_file
from mcsim.scenario.catalog import lookup_gpu
from mcsim.scenario.schema import field_meta
from mcsim.scenario.validation import coerce_value

IDLE_MAX_PERCENT = 5.0
BUSY_MIN_PERCENT = 90.0
MAX_SAMPLES = 50_000_000
_MAX_LINE = 1 << 20
_POWER_COLUMNS = ("power.draw", "power.draw.instant", "power.draw.average")
_LIMIT_COLUMNS = ("power.limit", "enforced.power.limit")


@dataclass(frozen=True)
class PowerSamples:
    """The samples of a power log: power [W], utilization [%], and the power limit [W] (NaN without one)."""

    power_w: np.ndarray
    utilization_percent: np.ndarray
    limit_w: np.ndarray


@dataclass(frozen=True)
class PowerFit:
    """The power by state of a log (:func:`fit_power`) and the scenario keys it gives.

    Attributes
    ----------
    source : str
        The log's path.
    samples : int
        Samples read (GPUs x times).
    states : dict
        Per state (``idle``, ``busy``, ``partial``): ``samples``, ``share`` of all samples (0-1),
        ``mean_w`` and ``p5_w`` / ``p95_w`` [W] (NaN without samples).
    tdp_w : float
        The TDP used [W].
    tdp_from : str
        Where it came from: ``tdp_w``, ``power.limit`` or the catalog's GPU type.
    settings : dict
        The fitted scenario keys (``hardware.idle_w`` [W], ``energy.busy_utilization`` [1], and
        ``hardware.tdp_w`` [W] when taken from the log), rounded to 4 significant digits.
    """

    source: str
    samples: int
    states: dict
    tdp_w: float
    tdp_from: str
    settings: dict

    def set_options(self) -> str:
        """The settings as ``--set KEY=VALUE`` options for ``mcsim run`` or ``mcsim plan``."""
        return " ".join(f"--set {key}={value!r}" for key, value in self.settings.items())


def fit_power(
    log: str | Path,
    *,
    gpu_type: str | None = None,
    tdp_w: float | None = None,
    idle_max_percent: float = IDLE_MAX_PERCENT,
    busy_min_percent: float = BUSY_MIN_PERCENT,
) -> PowerFit:
    """The idle power and busy utilization of a GPU power log (module docstring).

    Parameters
    ----------
    log : str or Path
        An ``nvidia-smi --format=csv`` or ``dcgmi dmon`` log.
    gpu_type : str, optional
        A catalog GPU (``H100-SXM``): its TDP [W] when the log has no power limit and ``tdp_w`` is not given.
    tdp_w : float, optional
        The TDP [W] to scale the busy power by; wins over the log and the catalog.
    idle_max_percent, busy_min_percent : float
        Utilization bounds [%] of the idle and busy states, 0 <= idle < busy <= 100.

    Returns
    -------
    PowerFit
        Per-state powers, the TDP used and the fitted keys (``.settings``, ``.set_options()``).

    Raises
    ------
    ScenarioError
        A malformed log, a bad option, no idle or no busy sample, no TDP, or a fitted value a
        scenario refuses (one line naming the file and the line, column or option).
    """
    source = str(log)
    if not 0 <= idle_max_percent < busy_min_percent <= 100:
        raise ScenarioError(
            source, "--idle-max", f"expected 0 <= idle {idle_max_percent:g} < busy {busy_min_percent:g} <= 100 %"
        )
    samples = read_power_log(source)
    util = samples.utilization_percent
    masks = {
        "idle": util <= idle_max_percent,
        "busy": util >= busy_min_percent,
        "partial": (util > idle_max_percent) & (util < busy_min_percent),
    }
    states = {name: _state(samples.power_w[mask], util.size) for name, mask in masks.items()}
    for name, option in (("idle", "--idle-max"), ("busy", "--busy-min")):
        if not states[name]["samples"]:
            raise ScenarioError(
                source, option, f"no {name} sample (utilization bound {option}); cannot fit the {name} power"
            )
    tdp, tdp_from = _tdp(source, samples, gpu_type, tdp_w)
    idle = states["idle"]["mean_w"]
    settings = {"hardware.idle_w": _rounded(idle)}
    if tdp_from == "power.limit":
        settings["hardware.tdp_w"] = _rounded(tdp)
    if not tdp > idle:
        raise ScenarioError(source, "tdp", f"the TDP {tdp:g} W ({tdp_from}) is not above the idle power {idle:.4g} W")
    settings["energy.busy_utilization"] = _rounded((states["busy"]["mean_w"] - idle) / (tdp - idle))
    for key, value in settings.items():
        table, name = key.split(".")
        meta = field_meta(table, name)
        assert meta is not None, key
        coerce_value(meta, value, source, key)  # what a scenario accepts, named by its key
    return PowerFit(source, int(util.size), states, tdp, tdp_from, settings)


def _rounded(value: float) -> float:
    return float(f"{value:.4g}")


def _state(power: np.ndarray, total: int) -> dict:
    """Samples, share, mean and 5th/95th percentiles [W] of one state's power samples."""
    if not power.size:
        return {"samples": 0, "share": 0.0, "mean_w": math.nan, "p5_w": math.nan, "p95_w": math.nan}
    p5, p95 = np.percentile(power, [5, 95])
    return {
        "samples": int(power.size),
        "share": power.size / total,
        "mean_w": float(power.mean()),
        "p5_w": float(p5),
        "p95_w": float(p95),
    }


def _tdp(source: str, samples: PowerSamples, gpu_type: str | None, tdp_w: float | None) -> tuple[float, str]:
    """The TDP [W] and where it came from: ``tdp_w``, the log's power limit, or the catalog."""
    if tdp_w is not None:
        if not (isinstance(tdp_w, (int, float)) and math.isfinite(tdp_w) and 0 < tdp_w <= 1e5):
            raise ScenarioError(source, "--tdp-w", f"expected watts > 0 and <= 100000, got {tdp_w!r}")
        return float(tdp_w), "tdp_w"
    if np.isfinite(samples.limit_w).any():
        return float(np.nanmean(samples.limit_w)), "power.limit"
    if gpu_type is None:
        raise ScenarioError(source, "--gpu-type", "the log has no power.limit column; give --gpu-type or --tdp-w")
    try:
        return float(lookup_gpu(gpu_type).tdp_w), f"catalog {gpu_type}"
    except KeyError as err:
        raise ScenarioError(source, "--gpu-type", str(err.args[0])) from None


def read_power_log(path: str | Path) -> PowerSamples:
    """The samples of an ``nvidia-smi`` CSV or ``dcgmi dmon`` log (module docstring, "Formats").

    Raises
    ------
    ScenarioError
        Missing, unreadable or malformed file (one line: file, line, column).
    """
    source = str(path)
    with user_text_file(path, "a power log", regular_only=False) as handle:
        rows = _rows(source, handle)
    if not rows:
        raise ScenarioError(source, "rows", "no samples after the header")
    power, util, limit = (np.asarray(column, dtype=float) for column in zip(*rows, strict=True))
    return PowerSamples(power, util, limit)


def _rows(source: str, handle) -> list[tuple[float, float, float]]:
    """(power [W], utilization [%], limit [W] or NaN) per sample line, after the header."""
    reader = None
    rows: list[tuple[float, float, float]] = []
    for n, line in enumerate(iter(lambda: handle.readline(_MAX_LINE + 1), ""), start=1):
        key = f"line {n}"
        if len(line) > _MAX_LINE:
            raise ScenarioError(source, key, f"longer than {_MAX_LINE:,} characters; expected a power sample")
        text = line.strip()
        if not text:
            continue
        if reader is None:
            reader = _Reader.of_header(source, key, text)
            continue
        if text.startswith("#") or (reader.dcgm and text.lower().split()[0] == "id"):
            continue
        if len(rows) >= MAX_SAMPLES:
            raise ScenarioError(source, key, f"more than {MAX_SAMPLES:,} samples; sample the log")
        rows.append(reader.sample(source, key, text))
    if reader is None:
        raise ScenarioError(source, "line 1", "empty file; expected an nvidia-smi CSV header or a dcgmi dmon header")
    return rows


@dataclass(frozen=True)
class _Reader:
    """Where a log's power, utilization and limit are, by field position."""

    dcgm: bool
    width: int
    power: int
    utilization: int
    limit: int | None

    @classmethod
    def of_header(cls, source: str, key: str, text: str) -> _Reader:
        if text.startswith("#"):  # dcgmi dmon: "#Entity  POWER  GPUTL"; a row is "GPU 0  296.4  98"
            names = [name.lower() for name in text.lstrip("#").split()]
            if not names or names[0] != "entity" or "power" not in names or "gputl" not in names:
                raise ScenarioError(
                    source, key, f"expected a dcgmi dmon -e 155,203 header '#Entity POWER GPUTL', got {text[:200]!r}"
                )
            # the entity takes two fields in a row ("GPU 0"), one name in the header
            return cls(True, len(names) + 1, names.index("power") + 1, names.index("gputl") + 1, None)
        names = [name.split("[")[0].strip().lower() for name in next(csv.reader([text]))]
        power = next((names.index(c) for c in _POWER_COLUMNS if c in names), None)
        if power is None or "utilization.gpu" not in names:
            raise ScenarioError(
                source,
                key,
                "expected an nvidia-smi --format=csv header with the columns power.draw and utilization.gpu, "
                f"got {text[:200]!r}",
            )
        limit = next((names.index(c) for c in _LIMIT_COLUMNS if c in names), None)
        return cls(False, len(names), power, names.index("utilization.gpu"), limit)

    def sample(self, source: str, key: str, text: str) -> tuple[float, float, float]:
        fields = text.split() if self.dcgm else [f.strip() for f in next(csv.reader([text]))]
        if len(fields) != self.width:
            raise ScenarioError(source, key, f"expected {self.width} fields as in the header, got {len(fields)}")
        power = _value(source, key, "power.draw", fields[self.power], "W", 1e5)
        utilization = _value(source, key, "utilization.gpu", fields[self.utilization], "%", 100.0)
        limit = math.nan if self.limit is None else _value(source, key, "power.limit", fields[self.limit], "W", 1e5)
        return power, utilization, limit


def _value(source: str, key: str, column: str, text: str, unit: str, most: float) -> float:
    """A field as a number in [0, most], its unit (``312.4 W``, ``97 %``) allowed."""
    number = text.removesuffix(unit).strip()
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= most):
        raise ScenarioError(source, key, f"{column}: expected a number 0 to {most:g} {unit}, got {text[:100]!r}")
    return value
