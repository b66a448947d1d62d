"""The skill pack passes the validators nobody here wrote: Agent Skills' reference validator
(`agentskills validate`, PyPI skills-ref) and Claude Code's own plugin validator with the plugin
directory's submission checks (`claude plugin validate --profile directory`, npm
@anthropic-ai/claude-code@2.1.328, installed by tests/run.sh; its path is in ML_SKILLS_CLAUDE)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ..conftest import ROOT

SKILLS = sorted(p for p in (ROOT / "skills").iterdir() if (p / "SKILL.md").exists())


def _claude() -> str | None:
    env = os.environ.get("ML_SKILLS_CLAUDE")
    if env and Path(env).exists():
        return env
    return shutil.which("claude")


@pytest.mark.parametrize("skill", SKILLS, ids=[s.name for s in SKILLS])
def test_agentskills_reference_validator_accepts_each_skill(skill: Path):
    exe = shutil.which("agentskills")
    assert exe, "skills-ref is a test dependency: pip install -e '.[test]'"
    proc = subprocess.run([exe, "validate", str(skill)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_claude_code_plugin_validator_with_directory_profile():
    exe = _claude()
    if exe is None:
        pytest.skip("Claude Code CLI not installed (tests/run.sh installs @anthropic-ai/claude-code@2.1.328 and sets ML_SKILLS_CLAUDE)")
    proc = subprocess.run([exe, "plugin", "validate", "--profile", "directory", "--strict", "--json", str(ROOT)],
                          capture_output=True, text=True, timeout=120, check=False)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["success"], proc.stdout[-3000:]
    provides = report["provides"]
    assert "ml-skills:check-failed-run" in provides["skills"]
    assert any("ml-skills" in str(s) for s in provides["mcpServers"])


def test_plugin_files_point_at_real_things():
    plugin = json.loads((ROOT / ".claude-plugin/plugin.json").read_text())
    assert plugin["name"] == "ml-skills"
    mcp = json.loads((ROOT / ".mcp.json").read_text())
    assert mcp["mcpServers"]["ml-skills"]["command"] == "ml-skills-mcp"
    market = json.loads((ROOT / ".claude-plugin/marketplace.json").read_text())
    assert market["plugins"][0]["name"] == "ml-skills"
