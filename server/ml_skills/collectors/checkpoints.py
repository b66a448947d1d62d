"""Inspect checkpoints from their structure only: never load tensors, never unpickle.

safetensors: the 8-byte header length, the JSON header, and the end of the last tensor must
match the file size. PyTorch zip archives: the central directory must be present and every
entry must fit inside the file. Directories (HF checkpoint-N/, DeepSpeed global_stepN/) are
valid when they hold at least one valid weights file. A truncated save fails these checks.

Layouts are checked from names and headers too: DeepSpeed folders need model states and an
unbroken run of ZeRO optimizer shards (zero_pp_rank_0..N-1); torch.distributed.checkpoint (FSDP)
folders need their .metadata and an unbroken run of __R_0.distcp shards; HF sharded checkpoints
need every shard their index names, holding the tensors the index says. Nothing is unpickled:
.metadata and data.pkl are only checked for being present and non-empty.

Every file is opened through safety/paths (confined to the roots, non-blocking, S_ISREG on the
fd), so a FIFO, a device link or a symlink out of the roots inside a checkpoint is reported as
an unusable checkpoint, never waited on or followed. A `latest` pointer's contents and a
symlinked checkpoint folder are paths read from data: they go through the same confinement.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import struct
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from ml_skills.errors import InputError
from ml_skills.lazyre import lazy
from ml_skills.models import CheckpointInfo
from ml_skills.safety import paths, untrusted_json
from ml_skills.safety.redact import redact, redact_cut

WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".ckpt", ".bin", ".h5", ".keras", ".pkl", ".msgpack", ".npz")
_STEP = lazy(r"(?:checkpoint|global_step|step|iter|epoch|ckpt|model)[-_=]?(\d+)", re.IGNORECASE)
MAX_SAFETENSORS_HEADER = 16 * 1024 * 1024  # parsed whole: parsed JSON takes up to ~26x its size in memory
MAX_DIMS = 64
# bits per element of every dtype safetensors 0.8 reads (its Dtype enum)
_DTYPE_BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
               "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
               "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64}
MAX_DIR_FILES = 2000
MAX_DIR_DEPTH = 4
# a torch.save zip's central directory, parsed whole by zipfile: ~400 bytes of memory per entry however small the entry
# (1.5 M one-byte names in a 70 MB file took 590 MB and 8 s); a real one holds one entry per tensor storage, ~70 bytes each
MAX_ZIP_DIRECTORY = 8 * 1024 * 1024
# the words a verdict ends with when a file was too big to check, not found bad: a loader may read it all the same
NOT_VERIFIED = "not verified"
MAX_INDEX_BYTES = 64 * 1024 * 1024  # a model.safetensors.index.json; real ones are a few MiB (parsed within untrusted_json.MAX_VALUES)
MAX_POINTER_BYTES = 4096
NO_WEIGHTS = "no weights files inside"
_DS_MODEL = lazy(r"(^mp_rank_\d+|^zero_pp_rank_\d+_mp_rank_\d+|^layer_\d+-model(_\d+-model)?)_states\.pt$|_model_states\.pt$")
_DS_OPTIM = lazy(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt$")
_DCP_SHARD = lazy(r"^__(\d+)_(\d+)\.distcp$")


def step_of(name: str) -> int | None:
    m = None
    for m in _STEP.finditer(name):
        pass
    return int(m.group(1)) if m else None


def safetensors_header(path: Path, size: int) -> tuple[dict | None, int, str]:
    """(JSON header, header length, '') read alone, never the tensors; or (None, 0, why it is unusable)."""
    with paths.open_binary(path) as f:
        raw, why = _header_bytes(f, size)
    return (None, 0, why) if raw is None else _parsed_header(raw)


def _header_bytes(f: BinaryIO, size: int) -> tuple[bytes | None, str]:
    """The 8-byte length and the header it counts, read from the start of the open file `f` of `size` bytes; or (None, why)."""
    f.seek(0)
    head = f.read(8)
    if len(head) < 8:
        return None, "shorter than the 8-byte safetensors header length"
    (n,) = struct.unpack("<Q", head)
    if 8 + n > size:
        return None, f"header length {n} does not fit in a {size}-byte file (truncated or not safetensors)"
    if n > MAX_SAFETENSORS_HEADER:
        return None, (f"header of {n} bytes is over the {MAX_SAFETENSORS_HEADER // 2**20} MiB this inspector parses "
                      f"(about {MAX_SAFETENSORS_HEADER // 150:,} tensors): {NOT_VERIFIED}")
    body = f.read(n)
    if len(body) < n:
        return None, f"header length {n} does not fit in a {size}-byte file (truncated or not safetensors)"
    return head + body, ""


def _parsed_header(raw: bytes) -> tuple[dict | None, int, str]:
    """A safetensors header from its bytes (the length, then the JSON), as safetensors_header gives it, read as the
    library's Rust reader (serde_json) reads it: UTF-8 with no byte-order mark, no field of a tensor twice (a tensor named
    twice is its last entry, as the library's map keeps it), no lone surrogate, every number an integer from 0 to 2**64-1.
    Seventy-third round: a BOM, a repeated `shape`, a dim of 2**64 beside a 0, a shape of `[-0]` and a key `"\\ud800"`
    were each valid here and refused by safetensors 0.8, and a pointer was moved to such a file unasked."""
    try:
        text = raw[8:].decode("utf-8")  # a str: json refuses a byte-order mark in one, as serde_json does
        header = untrusted_json.loads(text, object_pairs_hook=_serde_object, parse_int=_serde_int, parse_float=_no_float,
                                      parse_constant=_no_float)
    except ValueError as e:  # UnicodeDecodeError is one
        return None, 0, f"header is not JSON the safetensors library reads ({str(e)[:80]}): corrupt"
    if not isinstance(header, dict):
        return None, 0, "header is not a JSON object (corrupt)"
    return header, len(raw) - 8, ""


def _serde_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys) and any(keys.count(k) > 1 for k in _FIELDS):
        raise ValueError("a tensor's field appears twice")
    if any(_has_surrogate(k) or (isinstance(v, str) and _has_surrogate(v)) for k, v in pairs):
        raise ValueError("a lone surrogate escape")
    return dict(pairs)


_FIELDS = ("dtype", "shape", "data_offsets")


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def _serde_int(text: str) -> int:
    n = int(text)
    if text.startswith("-") or n >= 2**64:
        raise ValueError(f"the number {text[:30]} is not an unsigned 64-bit integer")
    return n


def _no_float(text: str) -> Any:
    raise ValueError(f"the number {text[:30]} is not an integer")


def _is_count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _tensor_problem(name: str, entry: object) -> str | None:
    """Why one header entry is not a tensor the safetensors library would read, or None."""
    if not isinstance(entry, dict):
        return f"entry {redact_cut(name, 60)!r} is not an object"
    offsets, shape, dtype = entry.get("data_offsets"), entry.get("shape"), entry.get("dtype")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(v) for v in offsets) and offsets[0] <= offsets[1]):
        return f"tensor {redact_cut(name, 60)!r} has malformed data_offsets (two non-negative integers, begin <= end)"
    if not isinstance(dtype, str) or not (isinstance(shape, list) and len(shape) <= MAX_DIMS and all(_is_count(v) for v in shape)):
        return f"tensor {redact_cut(name, 60)!r} has a malformed dtype or shape"
    bits = _DTYPE_BITS.get(dtype)
    if bits is None:
        return None  # a dtype newer than this table: its size cannot be checked
    n = bits
    for dim in shape:  # the library multiplies the dtype's bits by each dim in order and refuses an overflow, a zero later or not
        n *= dim
        if n >= 2**64:
            return f"tensor {redact_cut(name, 60)!r}: shape {shape[:8]} of {dtype} overflows a 64-bit size"
    n //= bits
    if n * bits != 8 * (offsets[1] - offsets[0]):
        return f"tensor {redact_cut(name, 60)!r}: shape {shape[:8]} of {dtype} does not fill its {offsets[1] - offsets[0]} bytes"
    return None


def _safetensors(raw: bytes, size: int) -> tuple[bool, str]:
    """Valid only when the safetensors library would read it: typed entries, contiguous offsets, file fully covered; from
    the header's bytes `raw` (see _header_bytes) and the file's size."""
    header, n, why = _parsed_header(raw)
    if header is None:
        return False, why
    spans: list[tuple[int, int, str]] = []
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                return False, "__metadata__ is not a map of strings (corrupt)"
            continue
        problem = _tensor_problem(str(name), entry)
        if problem:
            return False, f"{problem} (corrupt)"
        spans.append((entry["data_offsets"][0], entry["data_offsets"][1], str(name)))
    spans.sort()
    end = 0
    for begin, stop, name in spans:
        if begin != end:
            return False, f"tensor {redact_cut(name, 60)!r} starts at {begin}, not where the previous one ends ({end}): corrupt"
        end = stop
    expected = 8 + n + end
    if expected > size:
        return False, f"truncated: tensors end at byte {expected} but the file has {size}"
    if expected < size:
        return False, f"{size - expected} bytes after the last tensor (byte {expected}): the header does not describe this file"
    return True, f"{len(spans)} tensors, header ok"


TORCH_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin")
# torch.save's legacy stream under pickle protocol 0 or 1 (`pickle_protocol=1`) opens with its magic number as a text LONG
# opcode, not a PROTO byte (thirtieth round: such a file, which torch.load reads, was inspected invalid and a pointer on it
# moved to an older checkpoint unasked)
_LEGACY_TEXT_MAGIC = b"L119547037146038801333356L\n"
# zip archives that are checkpoints of other libraries: NumPy's savez (.npy members) and Keras 3's .keras (config.json,
# metadata.json, model.weights.h5)
_ZIP_FORMATS = {".npz": ("numpy-npz", ".npy"), ".keras": ("keras-zip", "config.json")}


def _zip(path: Path, size: int, tail: bytes, start: int) -> tuple[str, bool, str]:
    """(format, valid, reason) of a zip archive of `size` bytes whose bytes from `start` on are `tail` (see _zip_tail): its
    directory within the file; a torch.save file (a torch suffix, or any zip holding a data.pkl) needs a non-empty data.pkl
    too, another format the member it names (`_ZIP_FORMATS`), and a zip of a format not known here nothing more."""
    known = _ZIP_FORMATS.get(path.suffix)  # (format, the member it must hold), by suffix
    guess = known[0] if known else "torch-zip" if path.suffix in TORCH_SUFFIXES else "zip"  # before the directory is read
    try:
        fh = _Tail(size, start, tail)
        # the end record names the central directory's size: bound it before parsing it (zipfile's own reader of
        # that record, private but in every CPython since 2.x; without it the bound is skipped, not the check)
        end_record, size_at = getattr(zipfile, "_EndRecData", None), getattr(zipfile, "_ECD_SIZE", None)
        end = end_record(fh) if end_record is not None and size_at is not None else None
        if end is not None and end[size_at] > MAX_ZIP_DIRECTORY:
            return guess, False, (f"zip central directory of {end[size_at]} bytes, over {MAX_ZIP_DIRECTORY // 2**20} "
                                  f"MiB: {NOT_VERIFIED}, not parsed")
        with zipfile.ZipFile(fh) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, ValueError, EOFError, NotImplementedError) as e:  # ValueError: a member name that is not UTF-8
        return guess, False, f"zip structure broken ({type(e).__name__}: {str(e)[:120]}): truncated or not a zip checkpoint"
    except OSError as e:
        return guess, False, f"cannot read: {e}"
    pkl = [i for i in infos if i.filename.endswith("data.pkl")]
    # a data.pkl makes it torch.save's unless it holds the member its suffix's format names: torch.load reads a torch.save
    # file under any name, and one named .npz or .keras was judged a broken npz and moved off unasked (seventy-sixth round)
    torch = path.suffix in TORCH_SUFFIXES or (bool(pkl) and (known is None or not any(i.filename.endswith(known[1]) for i in infos)))
    fmt, member = ("torch-zip", "data.pkl") if torch else known or ("zip", "")
    for i in infos:
        if i.header_offset + i.compress_size > size:
            return fmt, False, f"entry {redact_cut(i.filename, 60)!r} extends past the end of the file (truncated)"
    if not torch:
        if member and not any(i.filename.endswith(member) for i in infos):
            return fmt, False, f"zip archive without a {member} member: not a {fmt} file"
        return fmt, True, f"{len(infos)} zip entries, central directory ok ({fmt}; members not parsed)"
    if not pkl:
        return fmt, False, "zip archive without data.pkl: not a torch.save file"
    if any(i.file_size == 0 for i in pkl):
        return fmt, False, "data.pkl is empty (corrupt save)"
    return fmt, True, f"{len(infos)} zip entries, central directory ok"


HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _hdf5(head: bytes, size: int) -> tuple[bool, str]:
    """An HDF5 file's superblock, from its first 96 bytes `head`: the whole signature, a known version, offset and length
    sizes, and the end-of-file address it records within the file. Before the ninth round four bytes (`\\x89HDF`) made any
    file a valid checkpoint, and a text file so started was repointed to as a verified one, asked of no one; a truncated .h5
    read as valid."""
    if not head.startswith(HDF5_SIGNATURE) or len(head) < 16:
        return False, "starts like HDF5 but its signature or superblock is cut or wrong (corrupt)"
    version = head[8]
    if version in (0, 1):
        at, o = (24 if version == 0 else 28), head[13]
        sizes_ok = head[13] in (2, 4, 8) and head[14] in (2, 4, 8)
    elif version in (2, 3):
        at, o = 12, head[9]
        sizes_ok = head[9] in (2, 4, 8) and head[10] in (2, 4, 8)
    else:
        return False, f"HDF5 superblock version {version} is not one HDF5 writes (corrupt)"
    if not sizes_ok or len(head) < at + 3 * o:
        return False, "HDF5 superblock with impossible offset or length sizes, or cut short (corrupt)"
    fields = [int.from_bytes(head[at + i * o:at + (i + 1) * o], "little") for i in range(3)]
    base, eof = fields[0], fields[2]  # base address, (v0/1: free-space address | v2/3: extension address), end of file
    if base + eof > size:
        return False, f"truncated: the HDF5 superblock records {base + eof} bytes but the file has {size}"
    return True, f"HDF5 superblock v{version} ok, {base + eof} bytes as recorded"


def _unusable(path: Path, why: str, fmt: str = "unreadable") -> CheckpointInfo:
    """A checkpoint that cannot be opened (dangling link, FIFO, outside the roots): invalid, with why."""
    try:
        mtime = datetime.fromtimestamp(os.lstat(path).st_mtime, UTC)
        # Lightning's last.ckpt after the checkpoint it named was rotated away; a link out of the roots keeps the refusal, the
        # same whether its target exists or not (eighteenth round: a folder's dangling shard named where it led, outside)
        if path.is_symlink() and not path.exists() and not paths.leads_out_of_roots(path):
            why = f"dangling symlink to {redact_cut(os.readlink(path), 200)}: the checkpoint it named is gone"
    except OSError:
        mtime = datetime.fromtimestamp(0, UTC)
    return CheckpointInfo(path=str(path), format=fmt, size_bytes=0, mtime=mtime, step=step_of(path.name), valid=False, reason=why)


def inspect_file(path: Path) -> CheckpointInfo:
    """One weights file from its structure. Never raises for what is on disk: a file that is gone or
    unreadable (Lightning's `last.ckpt` symlink to a rotated-away checkpoint) is an invalid checkpoint."""
    try:
        with paths.open_binary(path) as f:
            st = os.fstat(f.fileno())
            mtime = datetime.fromtimestamp(st.st_mtime, UTC)
            if st.st_size == 0:
                return CheckpointInfo(path=str(path), format="empty", size_bytes=0, mtime=mtime, step=step_of(path.name),
                                      valid=False, reason="empty file")
            try:
                fmt, valid, reason = _structure(f, path, st.st_size)
            except (ValueError, LookupError, ArithmeticError, zipfile.BadZipFile, struct.error, RecursionError) as e:
                # what a parser of a hostile file raises that its reader did not foresee: a verdict, never a failed answer
                fmt, valid, reason = "unknown", False, f"structure unreadable ({type(e).__name__}: {str(e)[:120]}): corrupt"
    except InputError as e:
        return _unusable(path, str(e))
    except OSError as e:
        return _unusable(path, f"cannot read: {e.strerror or type(e).__name__}")
    return CheckpointInfo(path=str(path), format=fmt, size_bytes=st.st_size, mtime=mtime, step=step_of(path.name), valid=valid,
                          reason=reason)


# A verdict is kept per process by the bytes it was read from (the safetensors header, the zip archive's tail), not by the
# file: the sixty-eighth round linked one valid safetensors file with a 16 MiB header 2,000 times into a run folder, and each
# link parsed it again (1.7 s each, about an hour); a key of device, inode, size and times then missed a file rewritten in
# place through a shared mapping (no time changes) and a folder swapped between the stat and a second open by path (the
# seventieth round: a corrupt file reported valid). Every byte a verdict rests on is read through the one descriptor and
# hashed; the verdict is computed from those very bytes.
_READ: dict[tuple[str, int, str, int, bytes], tuple[str, bool, str]] = {}
_READ_KEPT = 4096


def _kept(key: tuple[str, int, str, int, bytes], read: Callable[[], tuple[str, bool, str]]) -> tuple[str, bool, str]:
    if (known := _READ.get(key)) is None:
        known = read()
        if len(_READ) < _READ_KEPT:
            _READ[key] = known
    return known


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _structure(f: BinaryIO, path: Path, size: int) -> tuple[str, bool, str]:
    """(format, valid, reason) of a non-empty weights file, read through its open file `f`."""
    f.seek(0)
    head = f.read(96)
    magic = head[:4]
    # the content decides where it names another format than the suffix: torch.load reads a torch.save file (a zip, or a
    # legacy pickle stream) passed as a file object under any name, and safetensors' loader reads its format under any
    # name; judged by the suffix, a torch.save file named .safetensors read as a broken safetensors file, and a pointer on
    # it was moved off unasked (seventy-seventh round). A safetensors file is read as one first: its header's length can
    # begin with the bytes a pickle or a zip begins with (a 128-byte header starts 0x80).
    framed = head[8:9] == b"{" and 8 < int.from_bytes(head[:8], "little") + 8 <= size  # a header's length, then JSON
    # a pickle stream: PROTO 2-5, then an opcode torch.save's streams begin with (LONG1 of its magic number, FRAME, a dict)
    pickled = magic[:1] == b"\x80" and magic[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05") and head[2:3] in (b"\x8a", b"\x95", b"}", b"(")
    other = magic == b"PK\x03\x04" or pickled or head.startswith(_LEGACY_TEXT_MAGIC)
    if path.suffix == ".safetensors" and (framed or not other) or framed and head[8:10] == b'{"':
        raw, why = _header_bytes(f, size)
        if raw is None:
            return "safetensors", False, why
        return _kept(("safetensors", size, "", 0, _digest(raw)), lambda: ("safetensors", *_safetensors(raw, size)))
    if magic == b"PK\x03\x04" or path.suffix in TORCH_SUFFIXES and magic[:2] == b"PK":
        # only a torch suffix makes a zip torch.save's: a .npz or .keras (or a zip of a format not known here) without
        # data.pkl is not a broken checkpoint (before the twenty-ninth round a valid .npz read as invalid, and a pointer
        # on it was moved to an older checkpoint as a safe action, asked of no one)
        start, tail = _zip_tail(f, size)
        return _kept(("zip", size, path.suffix, start, _digest(tail)), lambda: _zip(path, size, tail, start))
    if magic[:2] == b"\x80\x02" or magic[:1] == b"\x80" or head.startswith(_LEGACY_TEXT_MAGIC):
        return "torch-legacy", True, "legacy pickle format: structure cannot be verified without unpickling (not done)"
    if magic == b"\x89HDF":
        return "hdf5", *_hdf5(head, size)
    if path.suffix in (".pt", ".pth", ".ckpt"):
        # torch.save writes a zip archive (or, before 1.6, a pickle stream): anything else cannot load
        return "unknown", False, f"starts with {magic!r}: neither a zip archive nor a pickle, so torch.load cannot read it"
    return "unknown", size > 0, "unrecognised format; only the size was checked"


# what a zip reader reads at a file's end besides the central directory: the end record and its comment (up to 64 KiB),
# and Zip64's end record and locator
_ZIP_END = 22 + 65535 + 56 + 20 + 1024


def _zip_tail(f: BinaryIO, size: int) -> tuple[int, bytes]:
    """Where the bytes a zip reader reads of the archive begin, and those bytes: the end record, and as much before it as
    the end record says the central directory holds (at most MAX_ZIP_DIRECTORY)."""
    end_record, size_at = getattr(zipfile, "_EndRecData", None), getattr(zipfile, "_ECD_SIZE", None)
    try:
        end = end_record(f) if end_record is not None and size_at is not None else None
    except (OSError, ValueError, struct.error, zipfile.BadZipFile):  # (a Zip64 locator naming other disks: 72nd round)
        end = None
    directory = min(int(end[size_at]), MAX_ZIP_DIRECTORY) if end is not None and size_at is not None else MAX_ZIP_DIRECTORY
    start = max(0, size - directory - _ZIP_END)
    f.seek(start)
    return start, f.read(size - start)


class _Tail(io.RawIOBase):
    """A file of `size` bytes of which only those from `start` on (`data`) were read: what a zip reader sees of an archive
    when it reads its directory. Bytes before `start` read as nothing, so a directory that needs them is broken."""

    def __init__(self, size: int, start: int, data: bytes) -> None:
        self._size, self._start, self._data, self._at = size, start, data, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = 0) -> int:
        self._at = max(0, offset if whence == 0 else self._at + offset if whence == 1 else self._size + offset)
        return self._at

    def read(self, n: int = -1) -> bytes:
        if self._at < self._start:
            raise OSError(f"byte {self._at} is before the archive's end, which alone was read")
        got = self._data[self._at - self._start:] if n is None or n < 0 else self._data[self._at - self._start:self._at - self._start + n]
        self._at += len(got)
        return got


def _gaps(ranks: set[int], shown: int = 5) -> tuple[list[int], int]:
    """(the first `shown` ranks missing below the highest, how many are missing): no range is built,
    so a file named for rank 10**12 costs what the files present cost."""
    if not ranks:
        return [], 0
    top = max(ranks)
    first: list[int] = []
    r = 0
    while len(first) < shown and r < top:  # at most len(ranks) + shown steps
        if r not in ranks:
            first.append(r)
        r += 1
    return first, top + 1 - len(ranks)


def _missing(gaps: list[int], n: int) -> str:
    return f"rank(s) {gaps}" if n <= len(gaps) else f"{n:,} rank(s), first {gaps}"


def _deepspeed(files: dict[str, Path]) -> tuple[bool, str] | None:
    """A DeepSpeed folder (global_stepN/): model states, and ZeRO optimizer shards with no rank missing."""
    found = {n: _DS_OPTIM.match(n) for n in files}
    optim = {n: m for n, m in found.items() if m}
    model = [n for n in files if _DS_MODEL.search(n) and n not in optim]
    if not optim and not model:
        return None
    if not model:
        return False, "DeepSpeed folder without *_model_states.pt: the save did not finish"
    missing = {mp: _gaps({int(m.group(1)) for m in optim.values() if m.group(2) == mp}) for mp in {m.group(2) for m in optim.values()}}
    missing = {mp: g for mp, g in missing.items() if g[1]}
    if missing:
        mp, (gaps, n) = next(iter(sorted(missing.items())))
        return False, f"ZeRO optimizer shards missing for data-parallel {_missing(gaps, n)} (mp_rank_{mp[:12]}): a partial save"
    world = len({m.group(1) for m in optim.values()})
    return True, f"DeepSpeed: {len(model)} model-states file(s), {len(optim)} ZeRO optimizer shard(s) for {world} rank(s)"


def _dcp(files: dict[str, Path]) -> tuple[bool, str] | None:
    """A torch.distributed.checkpoint folder (FSDP): .metadata plus __R_0.distcp shards, none missing or empty."""
    shards = {n: m for n in files if (m := _DCP_SHARD.match(n))}
    if ".metadata" not in files and not shards:
        return None
    if ".metadata" not in files:
        return False, "distributed checkpoint without .metadata: the save did not finish (it is written last)"
    meta = files[".metadata"]
    try:
        with paths.open_binary(meta) as f:
            first = f.read(1)
    except InputError as e:
        return False, f".metadata: {e}"
    if not first:
        return False, ".metadata is empty (corrupt)"
    if first != b"\x80":
        return False, ".metadata is not a pickle stream (corrupt); it was not unpickled"
    if not shards:
        return False, ".metadata without any __R_0.distcp shard"
    gaps, n = _gaps({int(m.group(1)) for m in shards.values()})
    if n:
        return False, f"distcp shards missing for {_missing(gaps, n)}"
    empty = [n for n in shards if _size(files[n]) == 0]
    if empty:
        return False, f"empty shard {min(empty)} (truncated save)"
    return True, f"torch.distributed.checkpoint: .metadata and {len(shards)} shard(s) (shard contents are described by .metadata, not unpickled)"


def _is_file_name(name: str) -> bool:
    """A shard name as HF writes it: one path component, no NUL, short enough for the filesystem."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name and len(name.encode("utf-8", "replace")) <= 255


def _is_shard_name(name: str) -> bool:
    """A shard name as an index may write it: a file name, or a relative path below the folder of at most 8 parts, none
    '.' or '..' (transformers joins the folder and the name; thirtieth round: 'shards/model-00001-of-00001.safetensors'
    read as corrupt, and a pointer on that loadable checkpoint was moved off it unasked)."""
    parts = name.split("/")
    return len(parts) <= 8 and all(_is_file_name(p) for p in parts)


def _is_shard(folder: Path, name: str) -> bool:
    """A regular file inside the roots that lies under the checkpoint folder, whatever links its path crosses."""
    try:
        return paths.contain(folder / name, "file").is_relative_to(paths.contain(folder, "dir"))
    except InputError:
        return False


def _hf_index(path: Path, files: dict[str, Path]) -> tuple[bool, str] | None:
    """HF sharded weights: every shard the index names exists and holds the tensors it is said to hold."""
    index = next((files[n] for n in sorted(files) if n.endswith(".index.json")), None)
    if index is None:
        return None
    if index.stat().st_size > MAX_INDEX_BYTES:
        return False, f"{index.name} is over {MAX_INDEX_BYTES // 2**20} MiB: {NOT_VERIFIED} as a shard index (not parsed)"
    try:
        doc = untrusted_json.loads(paths.read_capped(index, MAX_INDEX_BYTES).decode("utf-8", errors="replace"))
    except InputError as e:
        return False, f"{index.name}: {e}"
    except ValueError as e:
        return False, f"{index.name} is corrupt JSON ({str(e)[:80]})"
    wm = doc.get("weight_map", {}) if isinstance(doc, dict) else None
    if not isinstance(wm, dict) or not wm:
        return False, f"{index.name} has no weight_map"
    by_shard: dict[str, list[str]] = {}
    for tensor, shard in wm.items():
        if not isinstance(shard, str) or not _is_shard_name(shard):
            return False, f"{index.name} places {redact_cut(tensor, 60)!r} in {redact_cut(str(shard), 60)!r}, which is not a file below this folder (corrupt)"
        by_shard.setdefault(shard, []).append(tensor)
    missing = sorted(s for s in by_shard if not _is_shard(path, s))
    if missing:
        return False, f"index names missing shards: {', '.join(redact_cut(m, 60) for m in missing[:3])}"
    for shard, tensors in sorted(by_shard.items()):
        p = path / shard
        if p.suffix != ".safetensors":
            continue
        try:
            header, _, why = safetensors_header(p, _size(p))
        except InputError as e:
            header, why = None, str(e)
        if header is None:
            return False, f"{redact_cut(shard, 60)}: {why}"
        absent = [t for t in tensors if t not in header]
        if absent:
            # the name is the index's, so it is cut: a 40 MB name made a 40 MB answer (twenty-ninth round)
            return False, f"{redact_cut(shard, 60)} lacks {len(absent)} tensor(s) the index places there, e.g. {redact_cut(absent[0], 60)!r}"
    return True, f"{index.name}: {len(by_shard)} shard(s), {len(wm)} tensors, all present"


def _size(p: Path) -> int:
    """Size of a file inside the roots; 0 for anything else (a link out of the roots tells nothing about its target)."""
    try:
        return os.stat(paths.contain(p, "file")).st_size
    except (InputError, OSError):
        return 0


def _listing(path: Path) -> list[Path]:
    """The non-directory entries of a checkpoint folder, bounded in count and depth.

    Walked through held directory fds, sorted per directory; never the whole tree first. FIFOs
    and links are listed too: opening them (inspect_file) says why they are unusable.
    """
    out: list[Path] = []
    for d, dirnames, filenames in paths.walk(path, MAX_DIR_DEPTH):
        dirnames.sort()
        for n in sorted(filenames):
            out.append(d / n)
            if len(out) >= MAX_DIR_FILES:
                return out
    return out


def unverified(info: CheckpointInfo) -> bool:
    """Invalid only because it was too big to check (a header, a zip directory or a shard index over its cap)."""
    return info.valid is False and NOT_VERIFIED in info.reason


def inspect_dir(path: Path) -> CheckpointInfo:
    """A checkpoint folder (checkpoint-500/, global_step500/, an FSDP distcp folder): valid if its layout and weights are."""
    try:
        real = paths.contain(path, "dir")
        all_files = _listing(real)
        st = os.stat(real)
    except InputError as e:
        return _unusable(path, str(e), fmt="dir")
    except OSError as e:  # removed while it was read (a trainer's rotation of its checkpoints; twenty-seventh round)
        return _unusable(path, f"it disappeared while it was read ({e.strerror or e})", fmt="dir")
    files = [p for p in all_files if p.suffix in WEIGHT_SUFFIXES or _DCP_SHARD.match(p.name)][:200]
    top = {p.name: p for p in all_files if p.parent == real}
    size = sum(_size(p) for p in files)
    mtimes = []
    for p in files:
        try:
            mtimes.append(datetime.fromtimestamp(os.lstat(p).st_mtime, UTC))
        except OSError:
            continue
    mtime = max(mtimes or [datetime.fromtimestamp(st.st_mtime, UTC)])

    def info(fmt: str, valid: bool, reason: str) -> CheckpointInfo:
        return CheckpointInfo(path=str(path), format=fmt, size_bytes=size, mtime=mtime, step=step_of(path.name), valid=valid, reason=reason)

    for fmt, check in (("fsdp-dcp", lambda: _dcp(top)), ("deepspeed", lambda: _deepspeed(top)), ("sharded", lambda: _hf_index(real, top))):
        verdict = check()
        if verdict is not None and not verdict[0]:
            return info(fmt, False, verdict[1])
        if verdict is not None:
            bad = next(((p, i) for p in files if p.suffix in WEIGHT_SUFFIXES and not (i := inspect_file(p)).valid), None)
            if bad:
                return info(fmt, False, f"{bad[0].name}: {bad[1].reason}")
            return info(fmt, True, verdict[1])
    if not files:
        return info("dir", False, NO_WEIGHTS)
    bad = next(((p, i) for p in files if not (i := inspect_file(p)).valid), None)
    if bad:
        return info("dir", False, f"{bad[0].name}: {bad[1].reason}")
    return info("dir", True, f"{len(files)} weight files, all valid")


def tracker_iteration(pointer: Path, text: str) -> int | None:
    """The iteration Megatron reads from its tracker file (`latest_checkpointed_iteration.txt`), which it parses with
    `int(text.strip())`: '2000', and also '2_000', '+2000' and digits of other scripts ('٢٠٠٠'); None for what it refuses
    ('release', '²', which str.isdigit() accepts). Before the twenty-first round only ASCII digits were an iteration here:
    the others read as a missing file beside the pointer ("a resume from 'latest' will fail"), and a repoint moved the
    pointer off a valid iter_0002000 as a safe action, asked of no one, writing a path Megatron cannot read into it."""
    if not pointer.name.startswith("latest_checkpointed") or len(text) > 64:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def inspect_latest(pointer: Path) -> CheckpointInfo:
    """A `latest` file (DeepSpeed: a tag; Megatron latest_checkpointed_iteration.txt: an iteration) and what it points at."""
    try:
        with paths.open_binary(pointer) as f:
            st = os.fstat(f.fileno())
            raw = f.read(MAX_POINTER_BYTES + 1)
    except InputError as e:
        return _unusable(pointer, str(e), fmt="latest-pointer")
    if len(raw) > MAX_POINTER_BYTES:
        return _unusable(pointer, f"over {MAX_POINTER_BYTES} bytes: not a pointer file", fmt="latest-pointer")
    text = raw.decode("utf-8", errors="replace").strip()[:200]
    shown = redact(raw.decode("utf-8", errors="replace").strip())[:200]  # redacted, then cut: a URL password cut before its @host
    base = pointer.parent
    it = tracker_iteration(pointer, text)
    target = base / text if it is None else base / f"iter_{it:07d}"
    mtime = datetime.fromtimestamp(st.st_mtime, UTC)
    if not text:
        return CheckpointInfo(path=str(pointer), format="latest-pointer", size_bytes=st.st_size, mtime=mtime, valid=False, reason="empty pointer file")
    try:
        inside = "\0" not in text and target.resolve().is_relative_to(base.resolve())
    except RuntimeError:  # a link loop (twenty-first round: list_artifacts "failed unexpectedly (RuntimeError)")
        return CheckpointInfo(path=str(pointer), format="latest-pointer", size_bytes=st.st_size, mtime=mtime, valid=False,
                              reason=f"points to {shown}, a link that runs into a loop: a resume from it will fail")
    if not inside:  # `/`, `//`, `../..`: the fuzzer's `//` walked the whole filesystem
        return CheckpointInfo(path=str(pointer), format="latest-pointer", size_bytes=st.st_size, mtime=mtime, valid=False,
                              reason=f"points to {shown!r}, not a path inside the pointer's own folder: not followed")
    if not os.path.lexists(target):
        return CheckpointInfo(path=str(pointer), format="latest-pointer", size_bytes=st.st_size, mtime=mtime, step=step_of(text), valid=False,
                              reason=f"points to {shown}, which does not exist: a resume from 'latest' will fail")
    try:
        real = paths.contain(target, "any")  # a path read from data: confined like any other
    except InputError as e:
        return CheckpointInfo(path=str(pointer), format="latest-pointer", size_bytes=st.st_size, mtime=mtime, step=step_of(text), valid=False,
                              reason=f"points to {shown}, which is not followed: {e}")
    target_info = inspect_dir(target) if real.is_dir() else inspect_file(target)
    return CheckpointInfo(path=str(pointer), format="latest-pointer", size_bytes=st.st_size, mtime=mtime, step=target_info.step,
                          valid=target_info.valid, reason=f"points to {shown}: " + ("valid" if target_info.valid else target_info.reason))
