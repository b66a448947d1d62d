"""Patterns compiled on first use (ml_skills/lazyre.py, issue 17): importing the engine compiles few of them."""

from __future__ import annotations

import re
import subprocess
import sys

from ml_skills.lazyre import lazy


def test_a_lazy_pattern_is_the_pattern_once_used():
    rx = lazy(r"(?i)loss\s*[:=]\s*(?P<v>nan|[\d.]+)")
    assert "search" not in vars(rx)  # nothing compiled yet
    m = rx.search("step 3 LOSS = nan")
    assert m is not None and m["v"] == "nan"
    assert "search" in vars(rx)  # bound to the compiled pattern's own method from now on
    assert rx.sub("x", "loss: 1.5") == "x" and rx.pattern.startswith("(?i)") and rx.groupindex == {"v": 1}
    assert [m.group(0) for m in rx.finditer("loss=1 loss=2")] == ["loss=1", "loss=2"]


def test_a_bad_pattern_fails_where_it_is_used():
    rx = lazy(r"(unclosed")
    try:
        rx.search("x")
    except re.error:
        return
    raise AssertionError("a bad pattern must raise re.error at its first use")


def test_importing_the_cli_and_the_engine_compiles_few_patterns():
    """Before lazy compiles the same imports compiled 174 patterns (re's own cache counted them)."""
    code = ("import re\nimport ml_skills.cli\nfrom ml_skills.engine import pipeline\nfrom ml_skills.render import text, json_report\n"
            "print(len(re._cache))")
    n = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout)
    assert n < 80, n
