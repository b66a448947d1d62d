"""Pydantic's plugin scan, skipped by a CLI run when a sealed file knows this sys.path holds no plugin (issue 17).

Each CLI run is a real child process (`python -m ml_skills.cli`, the program path) with its own cache directory and a
folder on PYTHONPATH where a real pydantic plugin is installed (a module and its dist-info with a `pydantic` entry
point), or not yet: the plugin writes a line for every model pydantic builds while it is active.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "examples" / "nan-loss" / "train.log"

PLUGIN = '''import os


class Probe:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config, plugin_settings):
        with open(os.environ["PLUG_PROBE_OUT"], "a") as f:
            f.write(schema_type_path.name + "\\n")
        return None, None, None


plugin = Probe()
'''


def _install_plugin(site: Path) -> None:
    (site / "plug_probe.py").write_text(PLUGIN)
    info = site / "plug_probe-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plug-probe\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pydantic]\nprobe = plug_probe:plugin\n")


def _env(tmp_path: Path, site: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT / "server"), str(site)]), ML_SKILLS_CACHE=str(tmp_path / "cache"),
               PLUG_PROBE_OUT=str(tmp_path / "probe.txt"), **extra)
    return env


def _run_cli(tmp_path: Path, site: Path, **extra: str) -> list[str]:
    """One CLI run as the program; the models the plugin saw built (empty when no plugin was active)."""
    probe = tmp_path / "probe.txt"
    probe.unlink(missing_ok=True)
    work = tmp_path / "work"  # the child's cwd, on its sys.path (python -m): nothing is written there
    work.mkdir(exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", str(LOG), "--out-dir", str(tmp_path / "out")],
                       cwd=work, env=_env(tmp_path, site, **extra), capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode in (0, 1), r.stderr
    assert (tmp_path / "out" / "check-failed-run.json").is_file()
    return probe.read_text().split() if probe.exists() else []


def _plugin_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache").glob("plugins-*.txt"))


@pytest.mark.slow
def test_an_installed_plugin_sees_every_run(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install_plugin(site)
    for _ in range(2):  # the first run remembers a plugin set holding one; the second reads that
        seen = _run_cli(tmp_path, site)
        assert "Diagnosis" in seen and "LogEvidence" in seen
    assert len(_plugin_files(tmp_path)) == 1


@pytest.mark.slow
def test_a_plugin_installed_after_a_run_that_found_none_is_seen(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    assert _run_cli(tmp_path, site) == []
    assert _run_cli(tmp_path, site) == []  # the remembered answer: still none
    assert len(_plugin_files(tmp_path)) == 1
    _install_plugin(site)  # a new dist-info in a sys.path folder changes the folder's modification time
    seen = _run_cli(tmp_path, site)
    assert "Diagnosis" in seen
    assert len(_plugin_files(tmp_path)) == 2


SKIP = '''import importlib.metadata as md
import pydantic
calls = []
real = md.distributions
md.distributions = lambda *a, **k: calls.append(1) or real(*a, **k)
from ml_skills.catalog import plugincache
plugincache.skip_known_none()
import ml_skills.models
from pydantic.plugin import _loader
print(len(calls), _loader._plugins)
'''


def test_a_run_that_knows_there_is_no_plugin_reads_no_distribution(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    outs = [subprocess.run([sys.executable, "-c", SKIP], cwd=work, env=_env(tmp_path, site), capture_output=True, text=True,
                           timeout=120, check=True).stdout.split() for _ in range(2)]
    assert outs[0] == ["1", "{}"]  # not known yet: read once (by plugincache), and pydantic then reads nothing
    assert outs[1] == ["0", "{}"]  # known: nothing read


def test_pydantic_own_switch_decides_and_nothing_is_remembered(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install_plugin(site)
    assert _run_cli(tmp_path, site, PYDANTIC_DISABLE_PLUGINS="probe") == []
    assert _plugin_files(tmp_path) == []


ON_USE = '''import sys
from ml_skills.catalog import plugincache
plugincache.skip_known_none()
import ml_skills.models
from pydantic.plugin import _loader
print("importlib.metadata" in sys.modules, "email.message" in sys.modules, _loader._plugins)
import pydantic
print(_loader.importlib_metadata.version("pydantic") == pydantic.VERSION)  # the stand-in imports the real module
import importlib.metadata
print(type(importlib.metadata).__name__, importlib.metadata is sys.modules["importlib.metadata"],
      hasattr(importlib.metadata, "entry_points"))
'''


def test_a_run_that_knows_there_is_no_plugin_imports_no_metadata_reader(tmp_path: Path) -> None:
    """Known to find none: pydantic's loader is imported without importlib.metadata (and email); any use of it still
    reaches the real module, and every other importer gets the real module."""
    site = tmp_path / "site"
    site.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    outs = [subprocess.run([sys.executable, "-c", ON_USE], cwd=work, env=_env(tmp_path, site), capture_output=True, text=True,
                           timeout=120, check=True).stdout.split("\n") for _ in range(2)]
    assert outs[0][0] == "True True {}"  # not known yet: read once by plugincache, with the real module
    assert outs[1][:3] == ["False False {}", "True", "module True True"]  # known: not imported until used
