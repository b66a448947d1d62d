"""--plot writes a real PNG of the trajectory, linked from the report."""

from __future__ import annotations

from PIL import Image

from ..conftest import ROOT, run_cli


def test_plot_png_is_written_and_linked(tmp_path):
    proc = run_cli("check-failed-run", str(ROOT / "examples/nan-loss/train.log"), "--plot", "--out-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    png = tmp_path / "check-failed-run.png"
    assert f"Plot: {png}" in proc.stdout
    with Image.open(png) as im:
        assert im.format == "PNG" and im.width >= 600 and im.height >= 200
        # three panels (loss, grad norm, lr) were logged by the example: the figure is tall
        assert im.height > 500
    import json

    assert json.loads((tmp_path / "check-failed-run.json").read_text())["plot"] == str(png)
