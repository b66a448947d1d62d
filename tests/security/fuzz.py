"""Coverage-guided fuzzing with atheris: `python -m tests.security.fuzz TARGET [libFuzzer flags]`.

    python -m tests.security.fuzz redact -runs=200000          # a longer run
    python -m tests.security.fuzz scan_text -max_total_time=600

Targets are in tests/security/fuzz_targets.py. Unless a corpus directory is given, the run
starts from a fresh temporary corpus seeded with real inputs (the repo's real logs, fake
secrets of every kind, real checkpoints, real argv), with -len_control=0 so mutated inputs
reach -max_len at once. A crash (an unexpected exception, a broken property) makes libFuzzer
print the input and exit non-zero; slow inputs (-timeout, seconds) count as hangs. libFuzzer's
last line, 'Done N runs in S second(s)', gives the iterations run.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["ml_skills"]):  # coverage feedback from our code only
    from tests.security import fuzz_targets


def main() -> None:
    name = sys.argv[1]
    if name not in fuzz_targets.TARGETS:
        sys.exit(f"unknown target {name!r}: choose from {', '.join(fuzz_targets.TARGETS)}")

    def one(data: bytes) -> None:
        fuzz_targets.run(name, data)

    flags = sys.argv[2:]
    if not any(not f.startswith("-") for f in flags):  # no corpus given: seed a temporary one
        corpus = Path(tempfile.mkdtemp(prefix=f"ml-skills-corpus-{name}-"))
        for i, seed in enumerate(fuzz_targets.seeds(name)):
            (corpus / f"seed-{i:03d}").write_bytes(seed)
        flags.append(str(corpus))
        import atexit

        atexit.register(shutil.rmtree, corpus, True)
    atheris.Setup([sys.argv[0], "-timeout=10", "-len_control=0", *flags], one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
