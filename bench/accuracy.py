"""Score the engine on real failure logs and write docs/accuracy.md: python bench/accuracy.py [--lab DIR] [--out FILE] [--quiet]

The scorer lives in tests/scoring/accuracy.py (the tests share it); this is its command line.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.scoring.accuracy import main

if __name__ == "__main__":
    raise SystemExit(main())
