"""Diagnose a lab run with the real CLI and check the report against the real log.

Expected line numbers are found by searching the run's own log for the error text it printed,
never typed in: a change in what the script prints moves them, and the test follows.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..conftest import run_cli


@dataclass
class Report:
    text: str
    data: dict

    @property
    def proximate_line(self) -> int | None:
        line = self.data["root_cause"].get("proximate_line") or {}
        return line.get("line_no")

    def fix(self, fix_id: str) -> dict:
        found = [f for f in self.data["fixes"] if f["fix_id"] == fix_id]
        assert found, f"no fix {fix_id} in {[f['fix_id'] for f in self.data['fixes']]}\n{self.text}"
        return found[0]


def check(target: Path, out_dir: Path, *args: str, how: str = "") -> Report:
    """`ml-skills check-failed-run <target>` as a user runs it: the printed report and the JSON."""
    proc = run_cli("check-failed-run", str(target), "--out-dir", str(out_dir), *args)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    report = Report(proc.stdout, json.loads((out_dir / "check-failed-run.json").read_text()))
    if record := os.environ.get("LAB_RECORD"):  # tests/lab/make_docs.py collects every diagnosis
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        with open(record, "a") as f:
            f.write(json.dumps({"test": test, "how": how, "target": str(target), "text": proc.stdout, "report": report.data}) + "\n")
    return report


def line_of(log: Path, text: str, last: bool = False) -> int:
    """1-based number of the first (or last) line of the real log containing `text`."""
    hits = [i for i, line in enumerate(log.read_text(errors="replace").splitlines(), 1) if text in line]
    assert hits, f"{text!r} is not in {log}"
    return hits[-1] if last else hits[0]


def expect(r: Report, *, cls: str, status: str, log: Path, line_text: str | tuple[str, ...], fix_id: str, risk: str,
           validation: str, decision: str) -> None:
    """The checks every lab scenario makes: class, status, decisive line (text and number),
    proximate cause, a fix with its risk and a measurable validation, and GO/NO-GO.

    `line_text` may name several lines that report the same failure (a dying worker's own message
    and the main process's report of it): the decisive line must be one of those in the log."""
    d = r.data
    if isinstance(line_text, tuple):
        body = log.read_text(errors="replace")
        present = [t for t in line_text if t in body]
        assert present, f"none of {line_text!r} is in {log}"
        line_text = next((t for t in present if line_of(log, t) == r.proximate_line), present[0])
    _keep_case(log, cls=cls, status=status, line_text=line_text)
    assert d["primary_cause"] == cls, r.text
    assert d["run_status"] == status, r.text
    want = line_of(log, line_text)
    assert r.proximate_line == want, f"proximate line {r.proximate_line}, expected {want} ({line_text!r})\n{r.text}"
    cited = d["root_cause"]["proximate"] + (d["root_cause"].get("proximate_line") or {}).get("text", "")
    assert line_text in cited or f"(line {want})" in cited, r.text  # the error text, or a metric anomaly citing the line
    assert f"{log.name}:{want}" in r.text  # the printed report cites the same line
    f = r.fix(fix_id)
    assert f["risk"] == risk, f
    assert validation in f["validation"], f  # a criterion someone can check, chosen per scenario
    assert d["decision"] == decision, f"{d['decision']}: {d['decision_reason']}\n{r.text}"
    assert f"Decision: {decision}" in r.text


def _keep_case(log: Path, *, cls: str, status: str, line_text: str) -> None:
    """With LAB_CASES=DIR, keep the real log and its expected answer as a case for bench/accuracy.py --lab DIR."""
    root = os.environ.get("LAB_CASES")
    if not root:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "lab").split(" ")[0].split("::")[-1]
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in test)[:100]
    case = Path(root) / f"{name}-{log.parent.name}"
    case.mkdir(parents=True, exist_ok=True)
    (case / "train.log").write_bytes(log.read_bytes())
    (case / "case.json").write_text(json.dumps({"primary_cause": cls, "run_status": status, "decisive_lines": [line_text],
                                                "source": f"tests/lab ({test}), run for real"}, indent=1) + "\n")
