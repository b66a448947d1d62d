"""The server's resources come from the package's own data, as a wheel installs it, never from a checkout
around it (the old code looked in `parents[3]`, i.e. inside site-packages) and never from the doc generator."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "server" / "ml_skills"

PROBE = """
import json, sys
from ml_skills.mcp_tools import resources
out = {"taxonomy": resources.taxonomy(), "schema": resources.schema(), "skill": resources.skill_text(),
       "patterns": resources.root_cause_patterns(), "gen_imported": "ml_skills.gen" in sys.modules}
sys.stdout.write(json.dumps(out))
"""


def test_resources_are_served_from_the_installed_package_alone(tmp_path: Path) -> None:
    """The package copied alone, as the wheel lays it out (pyproject: packages = ["server/ml_skills"]), with no
    repository around it: every resource is the shipped file, whole, and the generator is not imported."""
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "ml_skills", ignore=shutil.ignore_patterns("__pycache__"))
    run = tmp_path / "elsewhere"
    run.mkdir()
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=run, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["gen_imported"] is False
    assert got["taxonomy"] == (ROOT / "references" / "failure-taxonomy.md").read_text("utf-8")
    assert json.loads(got["schema"]) == json.loads((ROOT / "schemas" / "check-failed-run.schema.json").read_text("utf-8"))
    assert got["skill"] == (ROOT / "skills" / "check-failed-run" / "SKILL.md").read_text("utf-8")
    assert got["patterns"] == (ROOT / "skills" / "check-failed-run" / "references" / "root-cause-patterns.md").read_text("utf-8")
