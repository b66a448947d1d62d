"""A log record's own level: a line its program logged as information is not the failure that ended a run.

Read where a record is judged (engine/classify/terminal.py, a signature's line) and where a relayed record is met
(engine/read/tracebacks.py: another program's INFO record inside an ERROR line).
"""

from __future__ import annotations

from ml_skills.lazyre import lazy

# A line its program logged at INFO or DEBUG level: logging's '- INFO -', 'INFO:name:', '[INFO]', loguru's '| INFO |',
# glog's 'I0610 06:55:34'. The program itself judged it informational ('No checkpoint found. Initializing model from
# scratch'): it reports a choice the run made and went on from, not a failure, unless it carries an error's words
# (TF's 'INFO:tensorflow:Error reported to Coordinator', a metric line whose loss is nan).
_INFO_LEVEL = lazy(r"(^|[\s\[|(:-])(INFO|DEBUG)(\s*[\]|:-]|\s)|^[ID]\d{4} \d\d:\d\d:\d\d")
ERROR_WORDS = lazy(r"(?i)(error|fail|exception|fatal|abort|killed|\bnan\b|\binf\b|infinity|overflow|timed? ?out|denied|refused|"
                   r"exhausted|out of memory|corrupt|illegal|segmentation|traceback|exit ?code|signal)")


def informational(text: str) -> bool:
    """A line logged at INFO/DEBUG level with no error in its words: never the failure that ended a run."""
    m = _INFO_LEVEL.search(text[:160])
    return m is not None and not ERROR_WORDS.search(text[m.end():])
