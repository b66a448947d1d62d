"""What may follow a run's last step when the run ended well: nothing fatal, nothing it printed during training
again, and at most a few lines. Each shape of a finished run (completion.py) reads the log's end with these."""

from __future__ import annotations

import re

from ml_skills.lazyre import lazy

ERROR = lazy(r"(?i)(error|exception|traceback|killed|fatal|abort|fail|nan\b)")
# an error rate that is a metric, not a failure: 'validation error 5.716667 %', 'test error: 0.12', 'top-1 error = 23.1'
_ERROR_METRIC = lazy(r"(?i)\b(?:validation|valid|val|test|train(?:ing)?|top-?\d|classification|mean[ _]squared|mean[ _]absolute)"
                     r"[ _]error(?:[ _]rate)?\s*(?:[:=]\s*)?-?\d"
                     # or any error given as a fraction, which no failure prints ('Avg TD Error: 414.078789', 'MSE error = 0.12')
                     r"|\berror(?:[ _]rate)?\s*[:=]\s*-?\d*\.\d+")


# a process reported gone with a non-zero code ('Process 23918 exits with return code = 1', 'exitcode: 1')
_NONZERO_EXIT = lazy(r"(?i)\bexit(?:s|ed)?\s++with\s++(?:return\s++|exit\s++)?code\s*+=?\s*+-?[1-9]|\bexit\s?+code\s*+[:=]\s*+-?[1-9]")
INT = lazy(r"\d+")
QUIET_END = 5  # the plain lines a finished run may print after its last step
EVAL_ONLY = frozenset({"val_loss", "val_acc"})  # the values of a line that is an evaluation, not a training step


# advice a framework logs about what could go wrong, not that it did ('you may encounter an out-of-memory (OOM) error
# if your GPU does not have sufficient memory. If this happens, ...': maskrcnn-benchmark before every evaluation)
_ADVICE = lazy(r"(?i)\b(?:may|might|could)\s++(?:encounter|run out|cause|fail|lead to|raise)\b|\bif this happens\b")


# an error the program says it went on past ('INFO - Ignoring parse error (tolerant parsing mode)', Python's 'Exception
# ignored in: <function ...__del__>' at exit): reported, not fatal
_IGNORED = lazy(r"(?i)\bignor(?:e|es|ed|ing)\b")


def advice(line: str) -> bool:
    return bool(_ADVICE.search(line) or _IGNORED.search(line))


def fatal(line: str) -> bool:
    """The line reports a failure (an error rate printed as a metric aside, advice about one too), or a process gone
    with a non-zero code."""
    if advice(line):
        return False
    return bool(ERROR.search(_ERROR_METRIC.sub("", line)) or _NONZERO_EXIT.search(line))


def printed_before(line: str, earlier: list[str], number: re.Pattern[str] = INT) -> bool:
    """The same line, the `number`s in it aside, was printed during training: a scheduled save, not the final one."""
    shape = number.sub("#", line.strip())
    return any(number.sub("#", x.strip()) == shape for x in earlier)
