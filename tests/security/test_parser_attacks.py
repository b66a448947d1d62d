"""Hostile files against the parsers of untrusted bytes (issue 14: C5-C10, R7-R9).

Each file here once raised out of its parser (RecursionError, OverflowError, KeyError,
ValueError, FileNotFoundError), exhausted memory (a rank of 10**12 in a file name) or took
quadratic time (a .wandb record spanning every block; a long line repeating a signature). A
parser must answer "corrupt" with a reason for any input, in bounded time and memory, and one
bad file must not end the diagnosis of the directory it sits in.

The directory tests run the real CLI in a child process under an address-space limit, so a
parser that tries to build a huge object fails the test with MemoryError instead of filling the
machine. The timing tests compare the CPU time of one input with that of an input four times
longer, in the same process: linear work grows about 4x, quadratic work 16x.
"""

from __future__ import annotations

import json
import resource
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from ml_skills.collectors import checkpoints, wandb
from ml_skills.engine.read import gradmax, metric_lines, metrics, scan

from tests.security.figures import record

MEMORY_LIMIT = 2 * 1024**3  # address space for the CLI child: it needs about 0.6 GiB, set(range(10**12)) far more


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(target: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", str(target), "--out-dir", str(out),
                           "--format", "json"], capture_output=True, text=True, timeout=120, preexec_fn=_limited, check=False)
    report = out / "check-failed-run.json"
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def safetensors_bytes(header: bytes, data: bytes = b"\0" * 8) -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def _tensor(offsets: object) -> bytes:
    return json.dumps({"t": {"dtype": "F32", "shape": [1], "data_offsets": offsets}}).encode().replace(b'"1e400"', b"1e400")


# ------------------------------------------------------------------ one file, one directory

def _safetensors(header: bytes) -> Callable[[Path], str]:
    def make(d: Path) -> str:
        (d / "model.safetensors").write_bytes(safetensors_bytes(header))
        return "model.safetensors"
    return make


def _deepspeed_rank(d: Path) -> str:
    step = d / "global_step5"
    step.mkdir()
    (step / "mp_rank_00_model_states.pt").write_bytes(b"")
    (step / "zero_pp_rank_1000000000000_mp_rank_00_optim_states.pt").write_bytes(b"")
    return "global_step5"


def _fsdp_rank(d: Path) -> str:
    step = d / "step-7"
    step.mkdir()
    (step / ".metadata").write_bytes(b"\x80\x04.")
    (step / "__1000000000000_0.distcp").write_bytes(b"x\n")
    return "step-7"


def _dangling_last(d: Path) -> str:
    (d / "last.ckpt").symlink_to("epoch=9.ckpt")  # Lightning's save_last="link", after top-k removed its target
    return "last.ckpt"


def _superscript_iteration(d: Path) -> str:
    (d / "latest_checkpointed_iteration.txt").write_text("\u00b2\u00b3")  # str.isdigit() is true, int() refuses it
    return "latest_checkpointed_iteration.txt"


def _pointer_to_the_root(d: Path) -> str:
    (d / "latest").write_text("/\n")  # DeepSpeed's tag file; the checkpoint_dir fuzz target found `//`
    return "latest"


def _deep_index(d: Path) -> str:
    ck = d / "checkpoint-4"
    ck.mkdir()
    (ck / "model.safetensors.index.json").write_text('{"weight_map": ' + "[" * 5000 + "]" * 5000 + "}")
    return "checkpoint-4"


ATTACKS: dict[str, Callable[[Path], str]] = {
    "C5 safetensors header nested 200,000 deep": _safetensors(b"[" * 200_000),
    "C6 data_offsets of 1e400": _safetensors(_tensor([0, "1e400"])),
    "C6 data_offsets an object": _safetensors(_tensor({"1": 4})),
    "C7 negative data_offsets": _safetensors(_tensor([0, -99999999])),
    "C8 ZeRO shard named for rank 10**12": _deepspeed_rank,
    "C8 distcp shard named for rank 10**12": _fsdp_rank,
    "C9 dangling last.ckpt symlink": _dangling_last,
    "C10 superscript digits in the Megatron iteration file": _superscript_iteration,
    "C5 index.json nested 5,000 deep": _deep_index,
    "P9 a latest pointer holding /": _pointer_to_the_root,
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_one_corrupt_checkpoint_does_not_end_the_diagnosis_of_its_directory(attack: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("step 1 loss 1.0\nstep 2 loss 0.9\n")
    name = ATTACKS[attack](run)
    proc, report = run_cli(run, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-500:]
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert report is not None
    bad = [c for c in report["artifacts"]["checkpoints"] if Path(c["path"]).name == name]
    assert bad and not bad[0]["valid"] and bad[0]["reason"], report["artifacts"]["checkpoints"]
    assert any(name in e["text"] for e in report["evidence"])  # the report names the corrupt file
    if attack.startswith("C8"):
        assert "1,000,000,000,000 rank(s), first [0, 1, 2, 3, 4]" in bad[0]["reason"]
    record("parser attacks (CLI exit 0, the file named corrupt)", attack, 1)


def test_a_metric_line_nested_1900_deep_is_not_a_metric_and_the_log_is_diagnosed(tmp_path: Path) -> None:
    """R9: `{"loss": [[[...]]]}` raised RecursionError out of parse_line, so the CLI exited 3."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("step 1 loss 1.0\n" + '{"loss": ' + "[" * 1900 + "]" * 1900 + "}\n")
    proc, report = run_cli(run, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-500:]
    assert report is not None and report["run_status"]
    assert metrics.parse_line('{"loss": ' + "[" * 1900 + "]" * 1900 + "}") is None
    assert metrics.parse_line('{"loss": 1' + "0" * 400 + ', "step": 3}') is None  # float() overflows on that int
    assert metrics.parse_line('{"loss": 0.5, "step": 3}') == ({"loss": 0.5}, 3.0, None)


def test_deep_json_in_metrics_and_manifest_fails_those_checks_not_the_command(tmp_path: Path) -> None:
    """verify-artifacts parses metrics.json and manifest.json: nested 5,000 deep they are failed checks, not exit 3."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.safetensors").write_bytes(safetensors_bytes(b"{}", b""))
    deep = "[" * 5000 + "]" * 5000
    (run / "metrics.json").write_text('{"acc": ' + deep + "}")
    (run / "manifest.json").write_text('{"run_id": ' + deep + "}")
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "verify-artifacts", str(run)], capture_output=True, text=True, check=False,
                          timeout=120, preexec_fn=_limited, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr[-500:]  # GO or NO-GO, never "internal error"
    assert "[FAIL] held-out metrics: metrics.json is not valid JSON (JSON nested deeper than 64 levels)" in proc.stdout
    assert "[FAIL] manifest: manifest.json unreadable: JSON nested deeper than 64 levels" in proc.stdout


def test_an_http_answer_nested_5000_deep_is_a_malformed_answer(tmp_path: Path) -> None:
    """MLflow's answers are parsed by request_json: a server on loopback answers 200 with JSON nested 5,000 deep."""
    import http.server
    import threading

    import httpx
    from ml_skills.collectors.http_api import Deadline, request_json
    from ml_skills.errors import SourceUnavailable

    body = ('{"run": ' + "[" * 5000 + "]" * 5000 + "}").encode()

    class Deep(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Deep)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_address[1]}") as client, \
                pytest.raises(SourceUnavailable, match="malformed answer"):
            request_json(client, "GET", "/api/2.0/mlflow/runs/get", name="MLflow", what="the run", deadline=Deadline(20))
    finally:
        server.shutdown()


# ------------------------------------------------------------------ the verdict on each header

def test_safetensors_verdicts_match_what_the_library_reads(tmp_path: Path) -> None:
    """Valid only when the safetensors library loads every tensor; each header it refuses is corrupt here too."""
    from safetensors import safe_open

    def one(header: dict | bytes, data: bytes) -> tuple[bool, bool, str]:
        p = tmp_path / "m.safetensors"
        p.write_bytes(safetensors_bytes(header if isinstance(header, bytes) else json.dumps(header).encode(), data))
        info = checkpoints.inspect_file(p)
        try:
            with safe_open(str(p), framework="pt") as f:
                for k in f.keys():  # noqa: SIM118 (safetensors' safe_open has keys() but is not iterable)
                    f.get_tensor(k)
            loads = True
        except Exception:  # noqa: BLE001  the library's verdict, whatever it raises
            loads = False
        return info.valid, loads, info.reason

    t = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    cases = {
        "good": ({"t": t, "__metadata__": {"format": "pt"}}, b"\0" * 8),
        "two tensors": ({"a": t, "b": {"dtype": "BF16", "shape": [2, 1], "data_offsets": [8, 12]}}, b"\0" * 12),
        "empty": ({}, b""),
        "zero-size": ({"t": {"dtype": "F32", "shape": [0, 3], "data_offsets": [0, 0]}}, b""),
        "truncated": ({"t": t}, b"\0" * 4),
        "bytes after the last tensor": ({"t": t}, b"\0" * 12),
        "gap between tensors": ({"t": {**t, "data_offsets": [4, 12]}}, b"\0" * 12),
        "overlapping tensors": ({"a": t, "b": t}, b"\0" * 8),
        "shape does not fill the bytes": ({"t": {**t, "shape": [3]}}, b"\0" * 8),
        "offsets reversed": ({"t": {**t, "data_offsets": [8, 0]}}, b"\0" * 8),
        "negative offset": ({"t": {**t, "data_offsets": [-8, 0]}}, b"\0" * 8),
        "offsets an object": ({"t": {**t, "data_offsets": {"1": 4}}}, b"\0" * 8),
        "offsets a string": ({"t": {**t, "data_offsets": "0,8"}}, b"\0" * 8),
        "offset a float": ({"t": {**t, "data_offsets": [0, 8.0]}}, b"\0" * 8),
        "offset a bool": ({"t": {**t, "data_offsets": [False, 8]}}, b"\0" * 8),
        "shape negative": ({"t": {**t, "shape": [-2]}}, b"\0" * 8),
        "huge shape": ({"t": {**t, "shape": [2**62] * 64}}, b"\0" * 8),
        "entry a list": ({"t": [0, 8]}, b"\0" * 8),
        "metadata not strings": ({"t": t, "__metadata__": {"a": 1}}, b"\0" * 8),
        "offset 1e400": (_tensor([0, "1e400"]), b"\0" * 8),
        "not an object": (b"[1, 2]", b""),
        "nested 200,000 deep": (b"[" * 200_000, b""),
    }
    for what, (header, data) in cases.items():
        valid, loads, reason = one(header, data)
        assert valid == loads, (what, valid, loads, reason)
        assert reason
    record("safetensors headers: verdict equal to the library's", "cases", len(cases))


def test_shard_ranks_are_counted_from_the_files_present(tmp_path: Path) -> None:
    ds = tmp_path / "global_step1"
    ds.mkdir()
    (ds / "mp_rank_00_model_states.pt").write_bytes(b"")
    for r in (0, 1, 3):
        (ds / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt").write_bytes(b"")
    info = checkpoints.inspect_dir(ds)
    assert not info.valid and "rank(s) [2]" in info.reason
    for r in range(4, 40):
        (ds / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt").write_bytes(b"")
    (ds / "zero_pp_rank_2_mp_rank_00_optim_states.pt").write_bytes(b"")
    assert "missing" not in checkpoints.inspect_dir(ds).reason  # the layout is whole (the empty files are a separate finding)
    # a rank of 10**12 is tried only in a child process under a memory limit (the CLI tests above):
    # before the fix, asking here built set(range(10**12)) and the kernel killed the test run


def test_an_index_that_names_a_path_instead_of_a_shard_is_corrupt(tmp_path: Path) -> None:
    ck = tmp_path / "checkpoint-1"
    ck.mkdir()
    for shard in ("../../etc/passwd", "/etc/passwd", "sub/../../x", "sub//x", "x" * 5000, "a\0b", 7):
        (ck / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": shard}}))
        info = checkpoints.inspect_dir(ck)
        assert not info.valid and "not a file below this folder" in info.reason, (shard, info.reason)


# ------------------------------------------------------------------ W&B run directories

def _wandb_file(path: Path, records: list[bytes], block: int = 32 * 1024) -> None:
    """The .wandb framing (LevelDB log): a 7-byte header, 32 KiB blocks, chunks of crc32/length/type."""
    out = bytearray(b":W&B\x00\x00\x01")
    for rec in records:
        first = True
        while True:
            room = block - len(out) % block
            if room < 7:
                out += b"\0" * room
                continue
            piece, rec = rec[: room - 7], rec[room - 7 :]
            typ = (1 if not rec else 2) if first else (4 if not rec else 3)
            out += struct.pack("<IHB", zlib.crc32(bytes([typ]) + piece) & 0xFFFFFFFF, len(piece), typ) + piece
            first = False
            if not rec:
                break
    path.write_bytes(bytes(out))


def test_deep_json_in_a_wandb_run_is_a_missing_note_not_a_crash(tmp_path: Path) -> None:
    """C5 for W&B: a history value and files/wandb-summary.json nested 5,000 deep."""
    from wandb.proto import wandb_internal_pb2 as pb

    run = tmp_path / "offline-run-1"
    (run / "files").mkdir(parents=True)
    deep = "[" * 5000 + "]" * 5000
    rows = []
    for step, loss in ((0, "2.5"), (1, deep), (2, "1.5")):
        rec = pb.Record()
        rec.history.step.num = step
        for k, v in (("_step", str(step)), ("loss", loss), ("huge", "1" + "0" * 400)):
            it = rec.history.item.add()
            it.key, it.value_json = k, v
        rows.append(rec.SerializeToString())
    _wandb_file(run / "run-1.wandb", rows)
    (run / "files" / "wandb-summary.json").write_text('{"a": ' + deep + "}")
    got = wandb._from_dir(run)
    assert got.summary == {}
    assert any("wandb-summary.json" in m and "deeper" in m for m in got.missing), got.missing
    proc, report = run_cli_wandb(run, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-500:]
    assert report is not None and any("wandb-summary.json" in e["text"] and "deeper" in e["text"] for e in report["evidence"])


def run_cli_wandb(run: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--wandb", str(run), "--out-dir", str(out),
                           "--format", "json"], capture_output=True, text=True, timeout=120, preexec_fn=_limited, check=False)
    report = out / "check-failed-run.json"
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def _cpu(fn: Callable[[], object], repeat: int = 3) -> float:
    """The least CPU time of a few calls: other processes on the machine inflate wall time, not this."""
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return max(best, 1e-3)


def _spanning_record(path: Path, mib: int) -> None:
    """R7's file: one record begun in the first block and continued through every block after it."""
    block = 32 * 1024
    with open(path, "wb") as f:
        f.write(b":W&B\x00\x00\x01")
        for i in range(mib * 1024 * 1024 // block):
            n = (block - 7 if i == 0 else block) - 7
            typ, body = (2 if i == 0 else 3), b"\0" * n
            f.write(struct.pack("<IHB", zlib.crc32(bytes([typ]) + body) & 0xFFFFFFFF, n, typ) + body)


def test_the_wandb_reader_is_linear_in_a_record_spanning_every_block(tmp_path: Path) -> None:
    """R7: the record's pieces were appended to one bytes object, copying it whole per block (64 MiB: 56 s)."""
    small, big = tmp_path / "s", tmp_path / "b"
    small.mkdir()
    big.mkdir()
    _spanning_record(small / "run.wandb", 4)
    _spanning_record(big / "run.wandb", 16)
    wandb._from_dir(small)  # imports wandb's protobuf module once, outside the timing
    t_small = _cpu(lambda: wandb._from_dir(small))
    t_big = _cpu(lambda: wandb._from_dir(big))
    assert t_big < 8 * t_small, (t_small, t_big)
    record("parser time ratio, 4x input (linear ~4, quadratic ~16)", "wandb record spanning every block", round(t_big / t_small, 1))


def test_a_record_over_the_cap_ends_the_readable_part_with_a_note(tmp_path: Path) -> None:
    _spanning_record(tmp_path / "run.wandb", 40)
    got = wandb._from_dir(tmp_path)
    assert any("record over 32 MiB" in m for m in got.missing), got.missing


# ------------------------------------------------------------------ long lines repeating a signature

def test_the_scan_is_linear_on_a_long_line_repeating_a_signature(tmp_path: Path) -> None:
    """R8: each match searched back to its line's start and forward to its end (3.2 MB line: 80 s)."""
    warm = tmp_path / "warm.log"
    warm.write_text("step 1 loss 1.0\n" * 5000)  # compiles the Hyperscan database outside the timing
    scan.scan_log(warm)
    unit = "omegaconf.errors.ConfigAttributeError: Key 'lr_scheduler' is "
    small, big = tmp_path / "small.log", tmp_path / "big.log"
    small.write_text("step 1 loss 1.0\n" + unit * (250_000 // len(unit)) + "\n")
    big.write_text("step 1 loss 1.0\n" + unit * (1_000_000 // len(unit)) + "\n")
    t_small = _cpu(lambda: scan.scan_log(small))
    t_big = _cpu(lambda: scan.scan_log(big))
    ev = scan.scan_log(big)
    assert [h.signature_id for h in ev.hits] == ["hydra-omegaconf-error"] and ev.hits[0].line_no == 2
    assert t_big < 8 * t_small, (t_small, t_big)
    record("parser time ratio, 4x input (linear ~4, quadratic ~16)", "scan: a line repeating a signature", round(t_big / t_small, 1))


def test_the_grad_norm_scan_is_linear_on_a_long_line_of_grad_norms() -> None:
    """The exact grad-norm scan of sampled logs searched back to the line's start for every value it reported."""
    unit = b'"grad_norm": 1e9, '

    def line_and_ends(n: int) -> tuple[bytes, list[tuple[int, int]]]:
        chunk = b"step 1\n" + unit * (n // len(unit)) + b"\n"
        return chunk, [(0, m.end()) for m in gradmax.VALUE.finditer(chunk)]  # every value reported, as at the top level

    small, big = line_and_ends(250_000), line_and_ends(1_000_000)
    t_small = _cpu(lambda: gradmax._largest(*small))
    t_big = _cpu(lambda: gradmax._largest(*big))
    assert gradmax._largest(*big) == (1e9, 7, len(big[0]) - 1)
    assert t_big < 8 * t_small, (t_small, t_big)
    record("parser time ratio, 4x input (linear ~4, quadratic ~16)", "grad-norm scan: a line of grad norms", round(t_big / t_small, 1))


def test_the_accuracy_line_finder_is_linear_on_a_long_line_of_accuracies() -> None:
    """Small logs parse every line printing an accuracy; each match searched back to its line's start."""
    def chunk(n: int) -> bytes:
        return b"step 1\nloss 0.5\n" + b"accuracy=0.5 " * (n // 13) + b"\n" + b"Validation-accuracy: 0.25\n"

    small, big = chunk(250_000), chunk(1_000_000)
    t_small = _cpu(lambda: metric_lines.accuracy_lines(small))
    t_big = _cpu(lambda: metric_lines.accuracy_lines(big))
    assert metric_lines.accuracy_lines(big) == {16, len(big) - len(b"Validation-accuracy: 0.25\n")}
    assert t_big < 8 * t_small, (t_small, t_big)
    record("parser time ratio, 4x input (linear ~4, quadratic ~16)", "accuracy lines: a line of accuracies", round(t_big / t_small, 1))
