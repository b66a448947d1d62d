"""Whether a log shows its run reaching its end, when no completion message says so.

A run that printed the last epoch or step of its own configured total ('Epoch 5/5', 'step 1000/1000',
'[100/100]') and nothing fatal after it finished training, whatever it printed next; so did a process
whose runner reported exit code 0 (an IDE's 'Process finished with exit code 0', LSF's 'Successfully
completed.'). Either is read from the run's own counters, never from how old the file is.
"""

from __future__ import annotations

import re

# an epoch or step counter with its total: 'Epoch 5/5', 'epoch [10/10]', 'Epoch: [99/100]', 'iteration 1000/1000'
_COUNTER = re.compile(
    r"(?i)\b(?P<what>epoch|step|iter|iteration|global step)s?\s*[:#]?\s*\[?\s*(?P<n>\d+)\s*/\s*(?P<total>\d+)\s*\]?")


def final_counter(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The line of the last epoch/step counter if it names the last of its total and is the run's last progress.

    Only the newest counter line counts (an earlier 'Epoch 5/5' of a first run appended to the same log says
    nothing about the second), and it must be at or just before the last progress line: a Keras header
    'Epoch 5/5' is followed by that epoch's bar, the progress line itself.
    """
    for i in range(len(tail) - 1, -1, -1):
        m = _COUNTER.search(tail[i])
        if m is None:
            continue
        line_no = tail_start + i
        if last_progress_line is not None and line_no < last_progress_line - 2:
            return None  # training went on past this counter (or the counter is not the training's)
        n, total = int(m["n"]), int(m["total"])
        return line_no if total > 1 and n == total else None
    return None
