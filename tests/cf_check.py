"""The IOOS compliance-checker's CF-1.10 messages of a file, and the one documented exception (currency units)."""

from __future__ import annotations

import json
import re

import cf_units
from compliance_checker import runner

CURRENCY = "USD"


def _checker_messages(path) -> list[str]:
    """Every message of compliance-checker's CF-1.10 check of ``path`` (all priorities)."""
    suite = runner.CheckSuite()
    suite.load_all_available_checkers()
    report = path.with_suffix(".json")
    runner.ComplianceChecker.run_checker(
        str(path), ["cf:1.10"], 0, "normal", output_filename=str(report), output_format="json_new"
    )
    result = json.loads(report.read_text())[str(path)]["cf:1.10"]
    assert result["scored_points"] > 0  # the checker really ran its checks
    return [
        msg
        for level in ("high_priorities", "medium_priorities", "low_priorities")
        for item in result[level]
        for msg in item["msgs"]
    ]


def _is_currency_unit(unit: str) -> bool:
    """``USD`` times a UDUNITS unit (``USD``, ``USD h-1``, ``USD kW-1 h-1``): the one documented exception."""
    if CURRENCY not in unit.split():
        return False
    try:
        cf_units.Unit(unit.replace(CURRENCY, "1"))
    except ValueError:
        return False
    return True


def _not_currency(messages: list[str]) -> list[str]:
    unknown = re.compile(r'"([^"]*)" are not recognized by UDUNITS')
    return [m for m in messages if not ((found := unknown.search(m)) and _is_currency_unit(found.group(1)))]
