"""Issue 14's fifty-eighth round: an outside tester's real restarts (a helper session that did not write this code); the
break failed on the code before its fix (docs/security.md, "Fifty-eighth round").

The fifty-fourth round's warning-filter rule split a `-W` value on commas, as `PYTHONWARNINGS` is split, but CPython reads
one `-W` value as one filter split on `:` only: `-W ignore:a,b:unittest.__main__.X` was judged as two filters with no
category, and CPython imported unittest's `__main__`, whose discovery ran a `test_*.py` planted in the run folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.test_fiftyfourth_round import restart_beside_a_planted_test_module

pytestmark = pytest.mark.slow  # real child processes


@pytest.mark.parametrize("line", ["python -W ignore:a,b:unittest.__main__.X train.py",
                                  "python -Wignore:,:unittest.__main__.X train.py"])
def test_a_comma_in_a_W_filters_message_never_hides_its_category(tmp_path: Path, line: str) -> None:
    got = restart_beside_a_planted_test_module(tmp_path, line)
    assert "not restarted" in got and "unittest.__main__.X" in got, got
