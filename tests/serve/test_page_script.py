"""The page's own formatting of numbers (``static/app.js``), run with Node where it is installed."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from geomol.serve.app import STATIC

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")


def _molar(values: list[float]) -> list[str]:
    source = (STATIC / "app.js").read_text(encoding="utf-8")
    function = re.search(r"^const MOLAR = .*?^};$", source, re.S | re.M).group(0)
    script = f"{function}\nconsole.log(JSON.stringify({json.dumps(values)}.map(MOLAR)));"
    return json.loads(subprocess.run([NODE, "-e", script], capture_output=True, text=True, check=True).stdout)


def test_kd_is_shown_in_the_unit_its_rounded_value_reads_in():
    kd_of_pk6 = 10 ** -6.000000000000001  # how a predicted pK of 6 arrives: just under 1 µM
    assert kd_of_pk6 < 1e-6
    assert _molar([kd_of_pk6, 1e-6, 9.996e-7, 9.99e-7, 2.5e-9, 1e-9 * (1 - 1e-15), 4.2e-3, 5e-13]) == [
        "1.00 µM", "1.00 µM", "1.00 µM", "999 nM", "2.50 nM", "1.00 nM", "4.20 mM", "0.500 pM"]
