"""Framework detection on every corpus log that names its framework: python bench/framework_accuracy.py [--half dev|held-out|all] [--wrong]

The scorer lives in tests/scoring/frameworks.py (the tests share it); this is its command line.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.scoring.frameworks import main

if __name__ == "__main__":
    raise SystemExit(main())
