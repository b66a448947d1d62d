"""Issue 14's forty-ninth round: an outside round that broke no promise (docs/security.md, "Forty-ninth round"). One gap it
reported is closed: wandb 0.31 serves a cached artifact file when a file of the right size is at its place in the cache
(`artifact_file_cache._check_or_create`: `hit = path.is_file() and path.stat().st_size == size`), so a recorded line
naming the cache folder (`WANDB_CACHE_DIR=./wc`, also `WANDB_DATA_DIR`, `WANDB_ARTIFACT_DIR`) could hand a script planted
bytes for an artifact it downloads, the family the thirty-ninth round closed for TORCH_HOME and HF_HOME.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.test_fortyfifth_round import _restart
from tests.security.test_fortysecond_round import _run_folder
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes


@pytest.mark.parametrize("name", ["WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"])
def test_a_recorded_line_never_names_wandbs_cache_folders(tmp_path: Path, name: str) -> None:
    ran = tmp_path / "RAN"
    (_run_folder(tmp_path) / "train.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    got = _restart(tmp_path, f"{name}=./wc python train.py")
    _wait_for(ran, 2)
    assert not ran.exists() and "not restarted" in got and name in got, got


def test_wandbs_run_settings_still_restart(tmp_path: Path) -> None:
    """Control: a project name and the offline mode are a run's settings, not a folder code or data is read from."""
    ran = tmp_path / "RAN"
    (_run_folder(tmp_path) / "train.py").write_text(f"import os\nopen({str(ran)!r}, 'w').write(os.environ['WANDB_MODE'])\n")
    got = _restart(tmp_path, "WANDB_PROJECT=p WANDB_MODE=offline python train.py")
    _wait_for(ran)
    assert ran.read_text() == "offline", got
