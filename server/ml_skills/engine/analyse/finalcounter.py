"""A run's own epoch or step counter reaching the total it prints ('Epoch 5/5', 'step 1000/1000', a whole-run bar
at 250/250): the last of its configured total, with nothing fatal after it."""

from __future__ import annotations

import re

from ml_skills.engine.analyse.quietend import EVAL_ONLY, QUIET_END, fatal, printed_before
from ml_skills.engine.read.metrics import parse_line
from ml_skills.lazyre import lazy

# an epoch or step counter with its total: 'Epoch 5/5', 'epoch [10/10]', 'Epoch: [99/100]', 'iteration 1000/1000';
# an RL loop's environment steps ('timesteps 2048/1000000', Rainbow's 'T = 50000 / 50000000': a bare T only before '=')
COUNTER = lazy(
    r"(?i)\b(?P<what>epoch|step|iter|iteration|global step|episode|update|upd|timestep|t(?=\s*=))s?\s*(?:[:#=]\s*)?(?:\[\s*)?(?P<n>\d+)\s*/\s*(?P<total>\d+)\s*\]?")
# the same counter as a JSON-lines trainer log writes it (LLaMA-Factory's trainer_log.jsonl: '"current_steps": 8660,
# "total_steps": 8660')
_JSON_COUNTER = lazy(r'"(?P<what>current_steps)":\s*+(?P<n>\d+),\s*+"total_steps":\s*+(?P<total>\d+)')
# a loop's own counter with no name, bracketed at the start of each of its lines ('[079/100] D: 0.5125 | G: 1.2052'):
# an epoch's or a batch's, so the last one ends the run only when a line the loop never printed closes the log
_BARE_COUNTER = lazy(r"^\s*+\[\s*+(?P<what>)(?P<n>\d+)\s*+/\s*+(?P<total>\d+)\s*+\]\s*+\S")
# a line that reports one epoch ('Epoch 1 mean loss: 0.61'): what a batch counter's epoch prints when it ends
_EPOCH_REPORT = lazy(r"(?i)^\W*+epoch\s*+[:#]?\s*+\d")


# an Ultralytics (YOLOv5/v8) results row, whose first column is the epoch out of the run's total and whose second is the
# GPU memory ('    100/100      3.38G      2.293 ...'; YOLOv5 counts from 0, to '299/299'); its bar over the epoch's
# batches, when the row carries one, must be full for the epoch to be over
_YOLO_EPOCH = lazy(r"^\s*(?P<what>)(?P<n>\d+)/(?P<total>\d+)\s+\d[\d.]*G\s")
# (or a loop's own header in the same shape, set off by a rule: '=== EPOCH 199/199 ===', Open3D-ML's pipelines)
_KERAS_HEADER = lazy(r"(?i)^[\s=*#-]*+Epoch \d+/\d+[\s=*#-]*+$")
_EPOCH_LINES = 6  # the lines an epoch's header may stand above its last one: a rule, train, val, a save
# the epoch's bar (or, with verbose=2, its one summary line) as Keras prints it at the epoch's end
_KERAS_DONE = lazy(r"^\s*(?:(?P<i>\d+)/(?P<n>\d+) (?:\[=+\]|- \d)|(?:-\s*)?\d+s - loss)")


# an evaluation started once training's loop has returned (PaddleSeg's 'Start evaluating (total_samples: 119, ...)'
# after 'iter: 16000/16000'); its own bar and results are progress lines, not training's
_EVAL_START = lazy(r"(?i)^\W*+(?:\S++\s++){0,4}?(?:start(?:ing|s)?|begin(?:ning|s)?|running)\s++(?:the\s++)?(?:final\s++)?"
                   r"(?:evaluat|validat|test)")


def _evaluation_after(after: list[str]) -> bool:
    """The lines after a counter are an evaluation: the first of them starts one, no training counter comes later
    and nothing fatal is printed."""
    lines = [x for x in after if x.strip()]
    return (bool(lines) and bool(_EVAL_START.search(lines[0])) and not any(COUNTER.search(x) for x in lines)
            and not any(fatal(x) for x in lines))


def final_counter(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The line of the last epoch/step counter if it names the last of its total and is the run's last progress.

    Only the newest counter line counts (an earlier 'Epoch 5/5' of a first run appended to the same log says
    nothing about the second), and it must be at or just before the last progress line: a Keras header
    'Epoch 5/5' is followed by that epoch's bar, the progress line itself.
    """
    for i in range(len(tail) - 1, -1, -1):
        frame = tail[i].split("\r")[-1]
        yolo = _YOLO_EPOCH.match(frame)
        m = COUNTER.search(tail[i]) or _JSON_COUNTER.search(tail[i]) or yolo
        if m is None:
            if (bare := _BARE_COUNTER.match(tail[i])) is None:
                continue
            return tail_start + i if _bare_counter_closed(tail[:i], tail[i + 1 :], bare) else None
        if m is yolo and "%|" in frame and "100%|" not in frame:
            return None  # the last epoch's row with its bar still short of its end: inside the epoch
        line_no = tail_start + i
        if _KERAS_HEADER.match(tail[i]):
            # Keras prints 'Epoch 16/16' as the epoch begins: the epoch ended only if its bar reached its own end
            # below it ('4451/4451 [====...] - loss: ...'); what follows then (evaluate(), predict()) is not training
            nxt = next((x for x in tail[i + 1 :] if x.strip()), None)
            bar = _KERAS_DONE.match(nxt) if nxt is not None else None
            if bar is not None:
                return line_no if int(m["n"]) == int(m["total"]) > 1 and bar["i"] == bar["n"] else None
            # a hand-written loop's header ('Epoch 50/50', a rule, then its train and val lines): the epoch's own
            # lines follow it, so it stands up to a few lines above the last progress line
            if last_progress_line is None or not line_no < last_progress_line <= line_no + _EPOCH_LINES:
                return None  # the epoch has no line of its own yet (it just began), or training went on past it
            n, total = int(m["n"]), int(m["total"])
            return line_no if total > 1 and n == total else None
        if last_progress_line is not None and line_no < last_progress_line - 2 and not _evaluation_after(tail[i + 1 :]):
            return None  # training went on past this counter (or the counter is not the training's)
        n, total = int(m["n"]), int(m["total"])
        if n == total == 1:  # the one epoch of a one-epoch run: over when its step counter beside it is ('[1/1](56608/56608)'),
            # or when the line is that epoch's evaluation ('Epoch 1/1, Validation Loss: 0.67', after its training line)
            inner = _INNER.match(tail[i], m.end())
            evaluated = (parsed := parse_line(tail[i])) is not None and bool(parsed[0]) and set(parsed[0]) <= EVAL_ONLY
            return line_no if inner is not None and inner["n"] == inner["total"] != "1" or evaluated else None
        if total > 1 and n == total - 1 and _closed_by_a_summary(tail[:i], tail[i + 1 :]):
            return line_no  # a 0-based counter's last ('epoch=249/250'), then a line the run prints once, at its end
        return line_no if total > 1 and (n == total or _last_of_interval(tail[:i], tail[i + 1 :], m)) else None
    return _whole_run_bar(tail, tail_start, last_progress_line)


def _bare_counter_closed(before: list[str], after: list[str], m: re.Match[str]) -> bool:
    """An unnamed counter at its total ('[100/100]') one past the same counter on an earlier line, then a summary the
    loop never printed ('Inception Score: 2.179 | FID: 20.17'): the loop over the whole run returned. A batch counter at
    the end of one epoch is followed by that epoch's own lines, printed at every epoch."""
    n, total = int(m["n"]), int(m["total"])
    prev = next((p for x in reversed(before) if (p := _BARE_COUNTER.match(x)) is not None), None)
    return (total > 1 and n == total and prev is not None and int(prev["total"]) == total and int(prev["n"]) == n - 1
            and not any(_EPOCH_REPORT.match(x) for x in after) and _closed_by_a_summary(before, after))


def _closed_by_a_summary(before: list[str], after: list[str]) -> bool:
    """A few plain lines end the log, none fatal, one of a shape never printed during training ('best_loss: 0.0767
    best_epoch: 244'): what a loop prints once it has returned. A 1-based run cut one epoch short ends instead on the
    lines it prints every epoch."""
    rest = [x for x in after if x.strip()]
    if not rest or len(rest) > QUIET_END or any(fatal(x) for x in rest):
        return False
    return any(not COUNTER.search(x) and not printed_before(x, before) for x in rest)


# the step counter printed right after a one-epoch run's 'Epoch:[1/1]': '(56608/56608)', ' step 500/500'
_INNER = lazy(r"\W{0,3}(?:(?:step|iter(?:ation)?|batch)\s*(?::\s*)?(?:\(\s*)?|\(?\s*)(?P<n>\d+)\s*/\s*(?P<total>\d+)\b")
# a progress bar over the whole run, not over one epoch: named for steps or training, no epoch in its name, at its
# total ('Steps: 100%|██████████| 250/250 [05:08<00:00, ...]': diffusers' DreamBooth and LoRA scripts); a bar named
# 'Epoch' with no epoch number counts the epochs themselves (old Hugging Face examples' trange(epochs, desc="Epoch"):
# 'Epoch: 100%|██████████| 5/5'), unlike 'Epoch 3: 100%|...| 500/500', one epoch's batches
_RUN_BAR = lazy(r"(?i)^\s*(?:global[ _]|total[ _]|training[ _]|train[ _])?(?:steps?|iterations?|iters?|training|epochs?)\s*:?\s*100%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\b")


_EPOCH_BAR = lazy(r"(?i)\bepochs?\s*+:?\s*+\d{1,3}%\|[^|\n]{0,200}\|\s*+(?P<n>\d+)/(?P<total>\d+)\b")


def _whole_run_bar(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The line of a whole-run progress bar at its total, when it is the run's last progress (a bar's redrawn frames
    joined on one line: the newest frame counts)."""
    if last_progress_line is None or not tail_start <= last_progress_line < tail_start + len(tail):
        return None
    text = tail[last_progress_line - tail_start].split("\r")[-1]
    m = _RUN_BAR.search(text)
    if m is None or not m["n"] == m["total"] != "1":
        return None
    # a batch bar at its total ('Iteration: 100%| 8/8') under an epoch bar still short of its own ('Epoch: 67%| 2/3'):
    # one epoch is over, not the run
    above = "\n".join(tail[max(0, last_progress_line - tail_start - _EPOCH_LINES * 10) : last_progress_line - tail_start + 1])
    epochs = list(_EPOCH_BAR.finditer(above))
    return None if epochs and epochs[-1]["n"] != epochs[-1]["total"] else last_progress_line


def _last_of_interval(before: list[str], after: list[str], m: re.Match[str]) -> bool:
    """A counter short of its total by less than its own logging interval ('step: 3300/ 3305' after 3200/3305) is the
    last the loop prints; with other lines after it (a final evaluation, a save), the loop has returned."""
    n, total = int(m["n"]), int(m["total"])
    if not 0 < total - n or not any(x.strip() for x in after):
        return False
    prev = next((p for x in reversed(before) if (p := COUNTER.search(x)) is not None and p["what"].lower() == m["what"].lower()), None)
    if prev is None or int(prev["total"]) != total:
        return False
    interval = n - int(prev["n"])
    return interval > 0 and n + interval > total
