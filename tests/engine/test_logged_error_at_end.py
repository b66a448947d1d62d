"""A log whose last line is the program's own ERROR record: the program said why it stopped, then stopped.

A fine-tuning script that catches its loader's exception and logs it ('ERROR - loading the model failed: No package
metadata was found for bitsandbytes', corpus 822) prints no traceback; the engine read such logs as undetermined.
Real child processes using Python's logging: one that logs the caught PackageNotFoundError and exits, one that logs
an ERROR and trains on to its end.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

SCRIPT = textwrap.dedent("""
    import importlib.metadata, logging, sys
    logging.basicConfig(format="%(asctime)s - %(name)s - %(levelname)s - %(message)s", level=logging.INFO,
                        stream=sys.stdout)
    log = logging.getLogger("finetune")
    log.info("loading model: /models/llama-3-8b")
    if sys.argv[1] == "stop":
        log.info("loading the model in 4 bits")
        try:
            importlib.metadata.version("surely-not-installed-quantizer")
        except importlib.metadata.PackageNotFoundError as e:
            log.error("loading the model failed: %s", e)
            sys.exit(1)
    else:
        log.error("could not reach the metrics server, metrics stay local")
        for step in range(1, 6):
            log.info("step %d loss %.4f", step, 2.0 / step)
        log.info("training finished")
""")


def _log(tmp_path: Path, mode: str) -> Path:
    script = tmp_path / "finetune.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=60, check=False)
    log = tmp_path / f"{mode}.log"
    log.write_text(out.stdout + out.stderr)
    return log


def test_an_error_record_that_ends_the_log_is_the_terminal_event(tmp_path: Path) -> None:
    log = _log(tmp_path, "stop")
    last = len(log.read_text().splitlines())
    assert "No package metadata was found" in log.read_text().splitlines()[-1]
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"
    assert d.run_status.value == "crashed"
    assert any(e.line_no == last for e in d.evidence)


def test_an_error_record_the_run_went_on_from_names_nothing(tmp_path: Path) -> None:
    log = _log(tmp_path, "go-on")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None
