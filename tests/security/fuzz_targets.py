"""Fuzz targets: each takes arbitrary bytes, feeds one parser, and raises only on a real bug.

Shared by the hypothesis tests (tests/security/test_properties.py) and the coverage-guided
atheris run (`python -m tests.security.fuzz TARGET -runs=N`, see docs/security.md). A target
checks what must hold for any input: no exception but our own clear errors, a result of the
declared type, and for the redactor idempotence.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ml_skills.cli_parser import build_parser
from ml_skills.collectors import checkpoints, logfile, wandb
from ml_skills.engine.read import metrics, scan, tracebacks
from ml_skills.errors import MLSkillsError
from ml_skills.models import CheckpointInfo, LogEvidence
from ml_skills.safety import untrusted_json
from ml_skills.safety.quoting import fence, strip_invisible
from ml_skills.safety.redact import MASK, redact_counted

_TMP = Path(tempfile.mkdtemp(prefix="ml-skills-fuzz-"))


def text_of(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def scan_text(data: bytes) -> None:
    ev = scan.scan_text(text_of(data), source="fuzz.log", last=50)
    assert isinstance(ev, LogEvidence)


def parse_line(data: bytes) -> None:
    for line in text_of(data).splitlines()[:50] or [""]:
        got = metrics.parse_line(line)
        if got is not None:
            values, step, _epoch = got
            assert all(isinstance(v, float) for v in values.values())
            assert step is None or isinstance(step, (int, float))


def parse_traceback(data: bytes) -> None:
    lines = text_of(data).splitlines() or [""]
    for i in range(min(len(lines), 20)):
        tracebacks.parse_at(lines[i:], i + 1, "fuzz.log")


def inspect_checkpoint(data: bytes) -> None:
    """Arbitrary bytes under every weights suffix: inspected, never loaded, never an exception."""
    for suffix in (".pt", ".bin", ".safetensors", ".ckpt", ".pkl", ".h5"):
        p = _TMP / f"model{suffix}"
        p.write_bytes(data)
        info = checkpoints.inspect_file(p)
        assert isinstance(info, CheckpointInfo) and info.size_bytes == len(data)


def safetensors_header(data: bytes) -> None:
    """The bytes as a safetensors header, framed with their true length, so every input reaches the JSON.

    The first byte sets how many data bytes follow the header. When the inspector calls the file
    valid and knows every dtype in it, the safetensors library must load every tensor: a verdict
    of valid is a promise that the weights can be read.
    """
    header, room = data[1:], (data[0] if data else 0) * 4
    p = _TMP / "header.safetensors"
    p.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * room)
    info = checkpoints.inspect_file(p)
    assert isinstance(info, CheckpointInfo) and info.reason
    if info.valid:
        parsed = untrusted_json.loads(header)
        if all(isinstance(v, dict) and v.get("dtype") in checkpoints._DTYPE_BITS for k, v in parsed.items() if k != "__metadata__"):
            from safetensors import safe_open

            with safe_open(str(p), framework="pt") as f:
                for k in f.keys():  # noqa: SIM118 (safetensors' safe_open has keys() but is not iterable)
                    f.get_tensor(k)


def checkpoint_dir(data: bytes) -> None:
    """The bytes as a shard index, a Megatron or DeepSpeed pointer and shard names, in one checkpoint folder."""
    d = _TMP / "ckdir"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    (d / "model.safetensors.index.json").write_bytes(data)
    (d / "model-00001-of-00001.safetensors").write_bytes(b"\x02\0\0\0\0\0\0\0{}")
    for name in ("latest", "latest_checkpointed_iteration.txt"):
        (d / name).write_bytes(data[:64])
    for line in text_of(data).splitlines()[:8]:
        name = line.strip().replace("/", "_").replace("\0", "").encode()[:200].decode("utf-8", "ignore")  # a name is 255 bytes at most
        if name and name not in (".", ".."):
            (d / name).write_bytes(b"")
    assert isinstance(checkpoints.inspect_dir(d), CheckpointInfo)
    for name in ("latest", "latest_checkpointed_iteration.txt"):
        assert isinstance(checkpoints.inspect_latest(d / name), CheckpointInfo)


def wandb_run(data: bytes) -> None:
    """The bytes as the record log of an offline W&B run (after its 7-byte header), and as its summary file."""
    d = _TMP / "wandb-run"
    (d / "files").mkdir(parents=True, exist_ok=True)
    (d / "run.wandb").write_bytes(b":W&B\x00\x00\x01" + data)
    (d / "files" / "wandb-summary.json").write_bytes(data)
    run = wandb._from_dir(d)
    assert isinstance(run.summary, dict) and not untrusted_json.depth_exceeds(run.summary, untrusted_json.MAX_DEPTH)


def redact_idempotent(data: bytes) -> None:
    text = text_of(data)
    once, n = redact_counted(text)
    twice, m = redact_counted(once)
    assert twice == once and m == 0, (text, once, twice)
    assert n == 0 or MASK in once


def read_log(data: bytes) -> None:
    """The tail and the chunk reader on arbitrary bytes: whole lines only, so a line is redacted whole."""
    p = _TMP / "fuzz.log"
    p.write_bytes(data)
    chunks = [(off, bytes(c)) for off, c in logfile.iter_chunks(p, size=64)]  # copied: the reader reuses one buffer
    assert b"".join(c for _, c in chunks) == data
    assert [off for off, _ in chunks] == [sum(len(c) for _, c in chunks[:i]) for i in range(len(chunks))]
    for _, c in chunks[:-1]:
        assert c.endswith(b"\n") or (len(c) == 64 and b"\n" not in c)  # whole lines, or one line longer than a chunk
    limited = b"".join(bytes(c) for _, c in logfile.iter_chunks(p, size=64, limit=len(data) // 2))
    assert limited == data[: len(data) // 2]
    n = data.count(b"\n") + 1
    lines, _ = logfile.tail(p, n)
    want = data.split(b"\n")
    if want and want[-1] == b"":
        want.pop()
    # each line whole, as it was, unless a value whose secret-bearing name sits on a line above it was masked
    assert len(lines) == len(want)
    assert all(got == logfile.decode(x) or "[REDACTED]" in got for got, x in zip(lines, want, strict=True))


def fence_text(data: bytes) -> None:
    marker = "0123456789abcdef"
    f = fence(text_of(data).splitlines(), marker=marker, max_chars=2000)
    assert f.text.count(f"[/data {marker}]") == 1 and f.text.endswith(f"[/data {marker}]")
    assert f.text.count(f"[data {marker}]") == 1 and f.text.startswith(f"[data {marker}]")
    assert strip_invisible(f.text)[1] == 0


def cli_args(data: bytes) -> None:
    """The argument parser on arbitrary argv: a Namespace or argparse's own exit, nothing else."""
    argv = [a for a in text_of(data).replace("\x00", "").split("\n")][:12]
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            ns = build_parser().parse_args(argv)
        except SystemExit:
            return
    assert isinstance(ns, argparse.Namespace)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "scan_text": scan_text, "parse_line": parse_line, "parse_traceback": parse_traceback,
    "inspect_checkpoint": inspect_checkpoint, "redact": redact_idempotent, "read_log": read_log,
    "fence": fence_text, "cli_args": cli_args, "safetensors_header": safetensors_header, "checkpoint_dir": checkpoint_dir,
    "wandb_run": wandb_run,
}

_ROOT = Path(__file__).resolve().parents[2]
SEED_BYTES = 4096


def _log_seeds() -> list[bytes]:
    """The tails of the real logs in the repo (examples/, tests/corpus/, tests/real-logs/): where errors are."""
    logs = sorted([*_ROOT.glob("examples/*/*.log"), *_ROOT.glob("tests/corpus/*/*.log"), *_ROOT.glob("tests/real-logs/*/*.log")])
    return [p.read_bytes()[-SEED_BYTES:] for p in logs]


def _checkpoint_seeds() -> list[bytes]:
    """Real checkpoint bytes: a torch zip, a legacy torch pickle, a safetensors file (made now, small)."""
    import pickle

    import safetensors.torch
    import torch

    d = Path(tempfile.mkdtemp(prefix="ml-skills-seeds-"))
    torch.save({"step": 1, "w": torch.zeros(2)}, d / "a.pt")
    torch.save({"w": torch.zeros(2)}, d / "b.bin", _use_new_zipfile_serialization=False)
    safetensors.torch.save_file({"w": torch.zeros(2)}, str(d / "c.safetensors"))
    (d / "d.pkl").write_bytes(pickle.dumps({"step": 1, "lr": 0.1}, protocol=2))
    out = [p.read_bytes() for p in sorted(d.iterdir())]
    for p in d.iterdir():
        p.unlink()
    d.rmdir()
    return out


def _argv_seeds() -> list[bytes]:
    return [b"check-failed-run\ntrain.log\n--framework\npytorch\n--last\n500",
            b"check-failed-run\n--wandb\nteam/proj/abc12345\n--format\njson",
            b"check-failed-run\nroot@host:/runs/train.log\n--out-dir\nout"]


def _header_seeds() -> list[bytes]:
    """Real safetensors headers (the library's own), one with metadata, and nested JSON to grow deeper."""
    import safetensors.torch
    import torch

    out = []
    for tensors in ({"w": torch.zeros(2)}, {"a": torch.zeros(2, 3, dtype=torch.bfloat16), "b": torch.ones(1, dtype=torch.int64)}):
        raw = safetensors.torch.save(tensors, metadata={"format": "pt"})
        n = int.from_bytes(raw[:8], "little")
        out.append(bytes([(len(raw) - 8 - n) // 4]) + raw[8 : 8 + n])
    return [*out, b"\x02" + b'{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,' + b"[" * 40 + b"8" + b"]" * 40 + b"]}}"]


def _json_line_seeds() -> list[bytes]:
    """Metric lines written as JSON (HF Trainer, Lightning's CSV-to-JSON loggers, custom loops), some nested."""
    return [b'{"loss": 2.31, "grad_norm": 1.4, "learning_rate": 5e-05, "epoch": 0.12, "step": 40}',
            b'{"train/loss": NaN, "train/global_step": 120}',
            b'{"loss": [[[[[[[[0.5]]]]]]]], "step": 3}',
            b'{"eval_loss": 1' + b"0" * 40 + b', "epoch": 2}']


def _wandb_seeds() -> list[bytes]:
    """An offline run's record log after its header: one history row (the wandb protobuf), framed as wandb writes it."""
    import zlib

    from wandb.proto import wandb_internal_pb2 as pb

    rec = pb.Record()
    rec.history.step.num = 3
    for k, v in (("_step", "3"), ("loss", "2.5"), ("nested", '{"a": [[1, 2], {"b": null}]}')):
        it = rec.history.item.add()
        it.key, it.value_json = k, v
    body = rec.SerializeToString()
    chunk = zlib.crc32(bytes([1]) + body).to_bytes(4, "little") + len(body).to_bytes(2, "little") + bytes([1]) + body
    return [chunk, chunk * 3, b'{"loss": 0.5, "_step": 9, "system": {"gpu": [1, 2]}}']


def seeds(name: str) -> list[bytes]:
    """A starting corpus for a target, so the fuzzer mutates real inputs instead of growing them from nothing."""
    from tests.security.fakes import Planted

    if name == "inspect_checkpoint":
        return _checkpoint_seeds()
    if name == "safetensors_header":
        return _header_seeds()
    if name == "checkpoint_dir":
        return [b'{"metadata": {"total_size": 8}, "weight_map": {"w": "model-00001-of-00001.safetensors"}}',
                b"global_step40\nzero_pp_rank_0_mp_rank_00_optim_states.pt\nmp_rank_00_model_states.pt",
                b"1200\n__0_0.distcp\n.metadata"]
    if name == "wandb_run":
        return _wandb_seeds()
    if name == "parse_line":
        secrets = "\n".join(Planted().log_lines()).encode()
        return [*_log_seeds(), secrets[:SEED_BYTES], *_json_line_seeds()]
    if name == "cli_args":
        return _argv_seeds()
    secrets = "\n".join(Planted().log_lines()).encode()  # fresh fake secrets of every kind
    return [*_log_seeds(), secrets[:SEED_BYTES], secrets[-SEED_BYTES:]]


ALLOWED = (MLSkillsError,)
"""Our own clear errors are an answer, not a crash."""


def run(name: str, data: bytes) -> None:
    try:
        TARGETS[name](data)
    except ALLOWED:
        pass


def cleanup() -> None:
    for p in _TMP.iterdir():
        with contextlib.suppress(OSError):
            os.unlink(p)
