"""Regenerate docs/lab.md (and the examples/ it links) from a real run of the lab.

    PYTHONPATH=server python tests/lab/make_docs.py

Runs the lab tests with LAB_RECORD set, so every `ml-skills check-failed-run` a test makes is
recorded with its printed report; then writes one table row per diagnosis and, for a few
scenarios, an examples/<name>/ folder with the script, the real log and the real report.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "lab"
TESTS = ["test_lab_numerics.py", "test_lab_memory_crash.py", "test_lab_data_config_io.py"]
# example folder -> (test function, which of its diagnoses: 0 = first)
EXAMPLES = {
    "nan-late-batch": ("test_nan_early_points_to_lr_and_late_to_the_bad_batch[late-bad-batch]", 0),
    "oom-eager-loading": ("test_eager_decoding_runs_out_of_memory_and_lazy_loading_passes_under_the_same_limit", 0),
    "sigkill-exit-137": ("test_external_sigkill_with_flat_memory_is_a_crash_and_resumes", 0),
    "truncated-checkpoint-resume": ("test_resume_from_truncated_checkpoint_goes_back_to_the_newest_valid_one", 0),
}
SCRIPTS = {"nan-late-batch": ["regress.py"], "oom-eager-loading": ["image_trainer.py", "make_images.py"],
           "sigkill-exit-137": ["launcher.py", "classify.py"], "truncated-checkpoint-resume": ["classify.py"]}


def docstrings() -> dict[str, tuple[str, str]]:
    """test name -> (file, first docstring line): how each scenario fails, as its test says."""
    out = {}
    for name in TESTS:
        tree = ast.parse((LAB / name).read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                out[node.name] = (name, (ast.get_docstring(node) or "").split("\n")[0])
    return out


def run_lab(record: Path) -> None:
    env = {**os.environ, "LAB_RECORD": str(record)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(str(LAB / t) for t in TESTS)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    print(proc.stdout.strip().splitlines()[-1])
    if proc.returncode != 0:
        sys.exit(f"the lab failed; docs not written:\n{proc.stdout[-4000:]}")


def row(rec: dict, how: str) -> str:
    d = rec["report"]
    how = rec.get("how") or how
    top = d["fixes"][0] if d["fixes"] else None
    fix = f"`{top['fix_id']}` ({top['risk']})" if top else "-"
    kind = "run dir" if d["target_kind"] == "directory" else d["target_kind"]
    cls = d["primary_cause"] or "none"
    name = rec["test"].split("::")[-1].removeprefix("test_").replace("_", " ")
    run = Path(rec["target"]).parent.name if Path(rec["target"]).suffix == ".log" else Path(rec["target"]).name
    return (f"| {name} | {how} | {kind} of `{run}/` | {cls} | {d['run_status']} "
            f"| {d['primary_cause_confidence']:.2f} | {fix} | {d['decision']} |")


def example(name: str, rec: dict) -> None:
    target = Path(rec["target"])
    run_dir = target if target.is_dir() else target.parent
    out = ROOT / "examples" / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for f in sorted(run_dir.iterdir()):
        if f.is_file() and f.suffix in (".log", ".json", ".txt"):
            shutil.copy(f, out / f.name)
    shown = "run/" if target.is_dir() else "run/" + target.name
    text = rec["text"].replace(str(run_dir) + "/", "run/").replace(str(run_dir), "run")
    text = "\n".join(line for line in text.splitlines() if not line.startswith("Report: "))
    (out / "README.md").write_text(
        f"# {name}\n\n{rec.get('how') or docstrings()[rec['test'].split('::')[-1]][1]}\n\n"
        f"A real run from the lab (`{rec['test']}`), made by "
        + ", ".join(f"[{x}](../../tests/lab/scenarios/{x})" for x in SCRIPTS[name])
        + f": `train.log` is the log that run wrote, `command.txt` its launch command, `config.json` its arguments. "
        f"Checkpoints are not kept here. The report below is what the CLI printed on that run; only the "
        f"temporary directory's path is shortened to `run/`.\n\n"
        f"```\n$ ml-skills check-failed-run {shown}\n{text}\n```\n\n"
        f"Regenerate with `PYTHONPATH=server python tests/lab/make_docs.py`.\n")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "record.jsonl"
        run_lab(record)
        recs = [json.loads(line) for line in record.read_text().splitlines()]
        docs = docstrings()
        intro = ("Every row is a real training run (PyTorch on the CPU) that a test in tests/lab/ starts, lets fail, "
                 "and diagnoses with `ml-skills check-failed-run` on its log or its run directory. The table is "
                 "generated from one run of the lab by `tests/lab/make_docs.py`; confidence is the primary class's.")
        lines = ["# The lab: real failing runs and what the tool concludes", "", intro, "",
                 "| scenario | how it fails | target | class | status | confidence | top fix (risk) | decision |",
                 "|---|---|---|---|---|---|---|---|"]
        for rec in recs:
            lines.append(row(rec, docs.get(rec["test"].split("::")[-1].split("[")[0], ("", ""))[1]))
        lines += ["", "Examples with the script, the real log and the real report: "
                  + ", ".join(f"[{n}](../examples/{n}/README.md)" for n in EXAMPLES) + ".", ""]
        (ROOT / "docs").mkdir(exist_ok=True)
        (ROOT / "docs" / "lab.md").write_text("\n".join(lines))
        for name, (test, idx) in EXAMPLES.items():
            mine = [r for r in recs if r["test"].endswith("::" + test)]
            if not mine:
                sys.exit(f"no diagnosis recorded for {test}: update EXAMPLES in make_docs.py")
            example(name, mine[idx])
    print(f"wrote docs/lab.md ({len(recs)} diagnoses) and {len(EXAMPLES)} examples")


if __name__ == "__main__":
    main()
