"""Metric tables (a header of column names, then rows of bare numbers) are read as metrics (issue 13, item 2).

Real logs: corpus 345 (Chainer's PrintReport on CIFAR-10 at lr 0.5: main/loss 2.30256 = ln 10 every epoch,
accuracy 0.10), 348 (Flair's loss.tsv, tab-separated, DEV_F1 0.0 every epoch) and healthy 022 (a Keras
CSVLogger file whose last row was cut mid-write). Real runs: a PyTorch classifier writing its epochs with
Python's csv module (as Keras' CSVLogger and many scripts do), once at a learning rate that sends it to NaN
and once at one that trains.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.read import tables

TESTS = Path(__file__).resolve().parents[1]


def _log(suite: str, prefix: str) -> Path:
    return next((TESTS / suite).glob(f"{prefix}-*")) / "train.log"


def _lines(suite: str, prefix: str) -> list[str]:
    return _log(suite, prefix).read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(("suite", "case", "keys"), [
    ("corpus", "345", ("epoch", "loss", "val_loss", "acc", "val_acc", None)),
    ("corpus", "348", ("epoch", None, None, "lr", "loss", "val_loss", None, None, "val_acc")),
    ("healthy", "022", ("epoch", "loss", "acc", "val_loss", "val_acc")),
])
def test_the_header_names_each_column(suite, case, keys):
    head = next(h for line in _lines(suite, case) if (h := tables.header(line)) is not None)
    assert head.keys == keys


def test_rows_take_their_meaning_from_the_header():
    lines = _lines("healthy", "022")
    head = tables.header(lines[0])
    assert head is not None
    values, _step, epoch = tables.row(head, lines[1]) or ({}, None, None)
    assert epoch == 0 and values["loss"] == pytest.approx(0.9825423861615943) and values["val_acc"] == pytest.approx(0.4415357708930969)
    assert all(tables.row(head, line) is not None for line in lines[1:])
    assert tables.row(head, lines[0]) is None  # the header repeated is no row
    assert tables.row(head, lines[1].rsplit(",", 1)[0] + ",") is None  # a row cut mid-write (an empty cell) is none


def test_prose_and_plain_metric_lines_are_no_header():
    for line in ("Epoch 3, loss 0.51, accuracy 0.83", "loss = 87.3365", "usage: train.py [-h] [--lr LR]",
                 "The loss and accuracy were logged", "epoch main/loss 2.30"):
        assert tables.header(line) is None, line


def test_a_loss_frozen_at_ln_10_in_a_chainer_table_is_divergence_corpus_345():
    d = diagnose(DiagnoseRequest(target=str(_log("corpus", "345"))))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", d.root_cause
    assert "2.30256" in d.root_cause.proximate and "ln 10" in d.root_cause.proximate


_CSV_RUN = textwrap.dedent("""
    import csv, sys, torch
    torch.manual_seed(0)
    x = torch.randn(2000, 20); y = (x @ torch.randn(20, 10)).argmax(1)
    model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=float(sys.argv[1]))
    out = csv.writer(sys.stdout)
    out.writerow(["epoch", "loss", "accuracy", "val_loss", "val_accuracy"])
    for epoch in range(8):
        tot, correct = 0.0, 0
        for i in range(0, 1600, 100):
            logits = model(x[i:i + 100]); loss = torch.nn.functional.cross_entropy(logits, y[i:i + 100])
            opt.zero_grad(); loss.backward(); opt.step()
            tot += loss.item() * 100; correct += (logits.argmax(1) == y[i:i + 100]).sum().item()
        with torch.no_grad():
            v = model(x[1600:]); vloss = torch.nn.functional.cross_entropy(v, y[1600:]).item()
            vacc = (v.argmax(1) == y[1600:]).float().mean().item()
        out.writerow([epoch, tot / 1600, correct / 1600, vloss, vacc])
""")


def _csv_run(tmp_path: Path, lr: str) -> Path:
    script = tmp_path / "train.py"
    script.write_text(_CSV_RUN)
    log = tmp_path / f"metrics-lr{lr}.csv"
    with log.open("w") as f:
        subprocess.run([sys.executable, str(script), lr], stdout=f, check=True, timeout=300)
    return log


@pytest.mark.slow
def test_a_real_run_whose_csv_log_goes_nan_is_nan_inf_and_a_healthy_one_is_not(tmp_path):
    bad = _csv_run(tmp_path, "30")
    assert ",nan," in bad.read_text()  # the learning rate really sent it to NaN
    d = diagnose(DiagnoseRequest(target=str(bad)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", d.root_cause
    assert d.run_status.value == "diverged"
    good = diagnose(DiagnoseRequest(target=str(_csv_run(tmp_path, "0.1"))))
    assert good.primary_cause is None, good.root_cause


def test_the_first_letter_gate_refuses_only_lines_that_are_no_header():
    """tables.header refuses a line whose first character is not a letter before splitting it (most loss lines start
    with `[rank0]:`, a date or a brace): on every line of every real log, the same headers as without that test."""
    def ungated(line: str) -> tables.Header | None:
        text = line.strip()
        if not text or len(text) > 2000:
            return None
        sep = "\t" if "\t" in text else "," if "," in text else None
        names = tables._split(text, sep)
        if not 3 <= len(names) <= tables.MAX_COLUMNS or not all(tables._NAME.match(n) for n in names):
            return None
        keys = tuple(tables.column(n) for n in names)
        if not any(k in ("loss", "val_loss", "acc", "val_acc", tables.PART_LOSS) for k in keys) or 2 * sum(k is not None for k in keys) < len(keys):
            return None
        return tables.Header(sep=sep, keys=keys)

    lines = [" epoch,loss,acc,val_loss", "\tEPOCH\tTRAIN_LOSS\tDEV_LOSS", "1epoch loss acc", ",epoch,loss,acc", "_epoch loss acc val_loss"]
    for log in sorted(TESTS.glob("corpus/*/train.log")) + sorted(TESTS.glob("healthy/*/train.log")):
        lines += log.read_text("utf-8", errors="replace").splitlines()
    got = [tables.header(line) for line in lines]
    assert got == [ungated(line) for line in lines]
    assert sum(g is not None for g in got) >= 4 and got[0] is not None and got[1] is not None
