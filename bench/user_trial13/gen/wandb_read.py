"""Read an offline .wandb file's history records (leveldb-log framing, W&B header) for the key."""
import json
import sys

from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32768


def records(path):
    data = open(path, "rb").read()  # noqa: SIM115 - the generator as it ran
    pos = 7  # ':W&B' magic + version header
    buf = b""
    while pos + 7 <= len(data):
        left = BLOCK - (pos % BLOCK)
        if left < 7:
            pos += left
            continue
        length = int.from_bytes(data[pos + 4:pos + 6], "little")
        kind = data[pos + 6]
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        if kind == 1:
            yield chunk
        elif kind == 2:
            buf = chunk
        elif kind == 3:
            buf += chunk
        elif kind == 4:
            yield buf + chunk
            buf = b""


def history(path):
    for raw in records(path):
        r = pb.Record()
        r.ParseFromString(raw)
        kind = r.WhichOneof("record_type")
        if kind == "history":
            yield {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item}
        elif kind in ("exit", "run", "summary"):
            yield {"_record": kind, "text": str(getattr(r, kind))[:300]}


if __name__ == "__main__":
    for h in history(sys.argv[1]):
        print(h)
