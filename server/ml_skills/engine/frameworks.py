"""Which frameworks wrote a log, from markers read where a framework shows itself.

The head of a log names its framework (imports, banners, config dumps), and so do its
tracebacks' file paths and its tail; the chunks in between are step lines. The markers are read
there only, not in every chunk: `[rankN]:` and `torch.` are on every line of some logs, and in the
main signature database these markers cost a quarter of its time. A log of up to three chunks is
read for them whole.
"""

from __future__ import annotations

from functools import cache

from ml_skills.engine.matcher import Matcher

HEAD_CHUNKS = 2
TRACEBACK_CHUNKS = 16  # chunks holding a traceback read for markers, at most
MARKERS: list[tuple[str, str]] = [
    ("lightning", r"(pytorch_lightning|lightning\.pytorch|lightning_fabric|lightning/pytorch|LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES|`Trainer\.fit`)"),
    ("deepspeed", r"(?i)(deepspeed|\bzero_optimization\b|DeepSpeedEngine)"),
    ("fsdp", r"(FullyShardedDataParallel|\bFSDP\b|fully_sharded|torch\.distributed\.fsdp)"),
    ("hf-trainer", r"(transformers/trainer\.py|\*\*\*\*\* Running training \*\*\*\*\*|'train_runtime'|\{'loss': [0-9.naei]+, 'grad_norm'|\{'loss': [0-9.naei]+, 'learning_rate'|transformers\.trainer)"),
    ("tensorflow", r"(tensorflow|keras\b|Keras|tf\.keras|I tensorflow/)"),
    ("jax", r"(\bjax\b|jaxlib|\bflax\b|XlaRuntimeError|optax)"),
    ("pytorch", r"(torch/|torch\.|\btorch \d|\bPyTorch\b|torchrun|\[rank\d+\]:)"),
]


@cache
def _matcher(engine: str | None) -> Matcher:
    return Matcher([p for _, p in MARKERS], single=[True] * len(MARKERS), engine=engine)


class Tally:
    """Framework -> number of chunks that named it, over one pass.

    The chunks read are kept as events (always read: the head and the last; holds a traceback), and the
    counts are replayed from them, so the tallies of consecutive ranges of a log merge into the tally of
    the whole (scanpass.py): only the first TRACEBACK_CHUNKS chunks with a traceback count.
    """

    def __init__(self, engine: str | None):
        self.engine = engine
        self._events: list[tuple[bool, bool, dict[str, int]]] = []  # (always read, holds a traceback, its markers)
        self._traceback_chunks = 0

    def read(self, chunk: bytes, chunk_no: int, last: bool, traceback: bool) -> None:
        """Count the chunk's markers if it is one where a framework shows itself."""
        forced = chunk_no < HEAD_CHUNKS or last
        traceback = traceback and self._traceback_chunks < TRACEBACK_CHUNKS
        if not (forced or traceback):
            return
        self._traceback_chunks += traceback
        counts: dict[str, int] = {}
        for idx, _ in _matcher(self.engine).find(chunk):
            name = MARKERS[idx][0]
            counts[name] = counts.get(name, 0) + 1
        self._events.append((forced, traceback, counts))

    def merge(self, later: Tally) -> None:
        """Add the tally of the range of the log right after this one's."""
        self._events += later._events
        self._traceback_chunks += later._traceback_chunks

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        seen = 0
        for forced, traceback, counts in self._events:
            traceback = traceback and seen < TRACEBACK_CHUNKS
            if not (forced or traceback):
                continue
            seen += traceback
            for name, n in counts.items():
                out[name] = out.get(name, 0) + n
        return out
