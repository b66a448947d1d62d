"""ml-skills: diagnose failed or unstable ML training runs from their evidence."""

import os as _os
import sys as _sys

__version__ = "0.1.0"

if _sys.argv[:1] == ["-m"] and _sys.path and _sys.path[0] in ("", _os.getcwd()):
    # `python -m ml_skills...` put the working folder first on the import path, and the server's working folder is a run
    # folder (its default root): a json.py or psutil.py planted there ran inside the server as it started or as a tool
    # imported it (thirty-first round). The package is already found; nothing of ours is imported from there.
    del _sys.path[0]
