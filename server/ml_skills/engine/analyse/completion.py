"""Whether a log shows its run reaching its end, when no completion message says so.

A run that printed the last epoch or step of its own configured total ('Epoch 5/5', 'step 1000/1000',
'[100/100]') and nothing fatal after it finished training, whatever it printed next; so did a process
whose runner reported exit code 0 (an IDE's 'Process finished with exit code 0', LSF's 'Successfully
completed.'). Either is read from the run's own counters, never from how old the file is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ml_skills.engine.read.metrics import parse_line
from ml_skills.lazyre import lazy
from ml_skills.models import MetricPoint

# an epoch or step counter with its total: 'Epoch 5/5', 'epoch [10/10]', 'Epoch: [99/100]', 'iteration 1000/1000'
_COUNTER = lazy(
    r"(?i)\b(?P<what>epoch|step|iter|iteration|global step|episode)s?\s*[:#=]?\s*\[?\s*(?P<n>\d+)\s*/\s*(?P<total>\d+)\s*\]?")
# the same counter as a JSON-lines trainer log writes it (LLaMA-Factory's trainer_log.jsonl: '"current_steps": 8660,
# "total_steps": 8660')
_JSON_COUNTER = lazy(r'"(?P<what>current_steps)":\s*+(?P<n>\d+),\s*+"total_steps":\s*+(?P<total>\d+)')


_KERAS_HEADER = lazy(r"^\s*Epoch \d+/\d+\s*$")
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
    return (bool(lines) and bool(_EVAL_START.search(lines[0])) and not any(_COUNTER.search(x) for x in lines)
            and not any(_fatal(x) for x in lines))


def final_counter(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The line of the last epoch/step counter if it names the last of its total and is the run's last progress.

    Only the newest counter line counts (an earlier 'Epoch 5/5' of a first run appended to the same log says
    nothing about the second), and it must be at or just before the last progress line: a Keras header
    'Epoch 5/5' is followed by that epoch's bar, the progress line itself.
    """
    for i in range(len(tail) - 1, -1, -1):
        m = _COUNTER.search(tail[i]) or _JSON_COUNTER.search(tail[i])
        if m is None:
            continue
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
            evaluated = (parsed := parse_line(tail[i])) is not None and bool(parsed[0]) and set(parsed[0]) <= _EVAL_ONLY
            return line_no if inner is not None and inner["n"] == inner["total"] != "1" or evaluated else None
        if total > 1 and n == total - 1 and _closed_by_a_summary(tail[:i], tail[i + 1 :]):
            return line_no  # a 0-based counter's last ('epoch=249/250'), then a line the run prints once, at its end
        return line_no if total > 1 and (n == total or _last_of_interval(tail[:i], tail[i + 1 :], m)) else None
    return _whole_run_bar(tail, tail_start, last_progress_line)


def _closed_by_a_summary(before: list[str], after: list[str]) -> bool:
    """A few plain lines end the log, none fatal, one of a shape never printed during training ('best_loss: 0.0767
    best_epoch: 244'): what a loop prints once it has returned. A 1-based run cut one epoch short ends instead on the
    lines it prints every epoch."""
    rest = [x for x in after if x.strip()]
    if not rest or len(rest) > _QUIET_END or any(_fatal(x) for x in rest):
        return False
    return any(not _COUNTER.search(x) and not _printed_before(x, before) for x in rest)


# the step counter printed right after a one-epoch run's 'Epoch:[1/1]': '(56608/56608)', ' step 500/500'
_INNER = lazy(r"\W{0,3}(?:(?:step|iter(?:ation)?|batch)\s*:?\s*)?\(?\s*(?P<n>\d+)\s*/\s*(?P<total>\d+)\b")
# a progress bar over the whole run, not over one epoch: named for steps or training, no epoch in its name, at its
# total ('Steps: 100%|██████████| 250/250 [05:08<00:00, ...]': diffusers' DreamBooth and LoRA scripts)
_RUN_BAR = lazy(r"(?i)^\s*(?:global[ _]|total[ _]|training[ _]|train[ _])?(?:steps?|iterations?|iters?|training)\s*:?\s*100%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\b")


def _whole_run_bar(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The line of a whole-run progress bar at its total, when it is the run's last progress (a bar's redrawn frames
    joined on one line: the newest frame counts)."""
    if last_progress_line is None or not tail_start <= last_progress_line < tail_start + len(tail):
        return None
    text = tail[last_progress_line - tail_start].split("\r")[-1]
    m = _RUN_BAR.search(text)
    return last_progress_line if m is not None and m["n"] == m["total"] != "1" else None


def _last_of_interval(before: list[str], after: list[str], m: re.Match[str]) -> bool:
    """A counter short of its total by less than its own logging interval ('step: 3300/ 3305' after 3200/3305) is the
    last the loop prints; with other lines after it (a final evaluation, a save), the loop has returned."""
    n, total = int(m["n"]), int(m["total"])
    if not 0 < total - n or not any(x.strip() for x in after):
        return False
    prev = next((p for x in reversed(before) if (p := _COUNTER.search(x)) is not None and p["what"].lower() == m["what"].lower()), None)
    if prev is None or int(prev["total"]) != total:
        return False
    interval = n - int(prev["n"])
    return interval > 0 and n + interval > total


# What a run prints once, after its last step, about the whole run: a budget compared with its limit ('num_updates:
# 25 >= max_update: 25'), the duration of all training ('Total training time: 0:06:14', '3 epochs completed in 0.2
# hours', 'Overall training speed: 298 iterations in 0:06:13'), training said to be over ('Training of experiment is
# done'). Each is a summary of the run, not of a step: no step line prints it.
_LIMIT = lazy(r"(?i)\b(?P<n>\d+)\s*>=\s*max[\w ]{0,20}?[:=]?\s*(?P<total>\d+)\b")
_SUMMARY = lazy(
    # (not a profiler's 'Total time used in this flop counting step', printed at a step, nor the 'total time (s)' column
    # of Ray Tune's status table, printed while trials run; Tune's own end is 'Total run time: 15.67 seconds')
    r"(?i)(\btotal (training |train |run )?time\b(?!\s*\(s\)|.{0,40}\b(flop|profil))|\btrain(?:ing)? time\s*[:=]?\s*\d+:\d\d:\d\d\b|\boverall training (speed|time)\b|\b(epochs?|iterations?|steps?) completed in\b|"
    r"\btraining\b.{0,40}\b(is|was) (done|finished|complete|over)\b|\bend of training\b|"
    # the run's own early stop, its planned end by its patience rule: Keras' 'Epoch 00036: early stopping', LightGBM's
    # 'Early stopping, best iteration is:', 'Early Stopping....@ 72 epoch' (not a flag, a callback's repr or a counter)
    r"\bearly[ _]?stopping\b(?:\s*[.,!:@]|\s*$|\s+(?:at|triggered)\b)|\bearly stop triggered\b|"
    # a throughput benchmark's closing total over all its workers (Horovod's and tf_cnn_benchmarks' 'Total img/sec on
    # 4 GPU(s): 432.8', 'total images/sec: 1234.5')
    r"\btotal (?:img|images)/sec\b|"
    # training named as finished by the run itself: 'Training finished', 'Train finish time: ...', 'training complete'
    r"\btrain(?:ing)?\]?\s+(?:finish(?:ed)?|done|complete[d]?|ended)\b(?!\s+(?:for\s+)?(?:epoch|step|iter))|"
    # the whole run's last evaluation or loss, named final ('[Eval FINAL]:', 'final eval finished', 'Final Loss: 0.08'),
    # and the time all of training took ('Time ellapsed in training is: 1271.3', 'training took 3:02:11')
    r"\[eval final\]|\bfinal (?:eval(?:uation)?|test(?:ing)?) (?:finished|done|complete[d]?)\b|\bfinal (?:train(?:ing)? )?loss\s*[:=]\s*-?\d|"
    r"\btime e?l+apsed (?:in|for|of) training\b|\btraining took \d|"
    # DeepXDE's timer on its whole training call ("'train' took 1178.429103 s"; its "'compile' took" comes first)
    r"'train' took \d|"
    # what a trainer prints once its loop has returned: Hugging Face's whole-run 'train_runtime' (in its final metrics
    # dict or a tracker's run summary), YOLOv5/v8's 'Optimizer stripped from .../best.pt' before the final validation
    r"\btrain_runtime\b|\boptimizer stripped from\b|"
    # Megatron's evaluation on the test split, which it runs once, after the last iteration ('validation loss at
    # iteration 50 on test set | lm loss value: ...'; during training it evaluates on the validation set)
    r"\bloss at iteration \d+ on test set\b|"
    # a solver's or tuner's own end of the whole optimisation (Caffe's 'Optimization Done.', the Theano tutorials'
    # 'Optimization complete with best validation score', LightGBM's 'Finish train'), a pipeline's 'All enabled phases
    # completed.', a loop over its whole input done ('Done with all triples!')
    r"\boptimization (?:done|complete[d]?|finished)\b|\bfinish(?:ed)? train(?:ing)?\s*[.!]*\s*$|"
    r"\ball\b[^\n]{0,30}\b(?:phases|stages|tasks|experiments|folds)\b[^\n]{0,10}\b(?:completed|finished|done)\b|\bdone with all\b|"
    # the process, job or script saying it ended well, about itself as a whole
    r"\b(process|job|script|run|pipeline) (completed|finished|ended) successfully\b|"
    # the DeepSpeed launcher's line for each of its processes that returned 0 ('Process 23917 exits successfully.'); one
    # that did not prints 'exits with return code = 1', which no run that ended well prints after its last step
    r"\bprocess \d+ exits successfully\b|"
    # training said to have succeeded as the line's last words (MindSpore's model zoo: 'train success'), and CatBoost's
    # own early stop ('Stopped by overfitting detector  (100 iterations wait)': its planned end by its patience rule)
    r"\btrain(?:ing)? (?:success(?:ful(?:ly)?)?|succeeded)\s*[.!]*\s*$|\bStopped by overfitting detector\b|"
    # or as the line's last words ('>>> CatBoost Process Finished'; never 'Process finished with exit code 1')
    r"\b(process|job|script|pipeline) (completed|finished|ended|done)\s*[.!]*\s*$|"
    # the same in the other languages training scripts print in: Chinese (training/task finished, total time taken),
    # Japanese, Korean, Spanish, Portuguese, German, French, Indonesian
    r"(训练|訓練|任务|任務)[^\n]{0,8}(完成|结束|結束)|总耗时|總耗時|学習(が)?(完了|終了)|학습\s*(완료|종료)|"
    r"\bentrenamiento (completado|finalizado|terminado)\b|\btreinamento (conclu[ií]do|finalizado)\b|"
    r"\bTraining (abgeschlossen|beendet)\b|\bentra[iî]nement termin[eé]\b|\btraining selesai\b)")
# a shell prompt on the log's last line: the process returned to its shell ('user@host:~/dir$ ', '(env) user@host:~$',
# PowerShell's '(.venv) PS C:\Users\me\proj> ')
_PROMPT = lazy(r"^(\([\w.-]+\)\s*)?(?:[\w.-]+@[\w.-]+:[^\s]*\s*[$#]|PS [A-Za-z]:\\[^<>|\n]*>)\s*$")
_ERROR = lazy(r"(?i)(error|exception|traceback|killed|fatal|abort|fail|nan\b)")
# an error rate that is a metric, not a failure: 'validation error 5.716667 %', 'test error: 0.12', 'top-1 error = 23.1'
_ERROR_METRIC = lazy(r"(?i)\b(?:validation|valid|val|test|train(?:ing)?|top-?\d|classification|mean[ _]squared|mean[ _]absolute)"
                     r"[ _]error(?:[ _]rate)?\s*(?:[:=]\s*)?-?\d"
                     # or any error given as a fraction, which no failure prints ('Avg TD Error: 414.078789', 'MSE error = 0.12')
                     r"|\berror(?:[ _]rate)?\s*[:=]\s*-?\d*\.\d+")


# a process reported gone with a non-zero code ('Process 23918 exits with return code = 1', 'exitcode: 1')
_NONZERO_EXIT = lazy(r"(?i)\bexit(?:s|ed)?\s++with\s++(?:return\s++|exit\s++)?code\s*+=?\s*+-?[1-9]|\bexit\s?+code\s*+[:=]\s*+-?[1-9]")


def _fatal(line: str) -> bool:
    return bool(_ERROR.search(_ERROR_METRIC.sub("", line)) or _NONZERO_EXIT.search(line))


def _last_counted(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The last progress line, or the run's summary before it when every progress line after the summary is a lone
    result with no step, epoch or loss (Keras' 'Epoch 44: early stopping', then a converted model's 'Accuracy: 0.7647'):
    a metric printed alone after the summary is a result about the run, not a step of it."""
    if last_progress_line is None or not 0 <= (i := last_progress_line - tail_start) < len(tail) or not _lone_result(tail[i]):
        return last_progress_line
    k = next((k for k in range(i, -1, -1) if _SUMMARY.search(tail[k])), None)
    if k is None or k == i:
        return last_progress_line
    between = tail[k + 1 : i + 1]
    results = [x for x in between if parse_line(x) is not None]
    if len(results) > _QUIET_END or any(_COUNTER.search(x) for x in between) or not all(map(_lone_result, results)):
        return last_progress_line
    return tail_start + k


def _lone_result(line: str) -> bool:
    """A metric line that is no step of training: no step, epoch, loss or counter ('Accuracy: 0.7647')."""
    p = parse_line(line)
    return (p is not None and p[1] is None and p[2] is None and not any("loss" in k for k in p[0])
            and not _COUNTER.search(line))


def summary_after_training(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The line of a whole-run summary printed after the last progress line, with no error anywhere after it.

    The run's shape, not a framework's wording: a limit reached by its own counter, a duration for the whole of
    training, or the shell prompt the process returned to, each after the last step and followed by nothing fatal.
    """
    # from just before the last progress line: a checkpoint save that follows the summary may be read as progress;
    # with no progress line read at all (a table of epochs, a bar glued to an evaluation), the summary itself says
    # training ran, so the tail after it is what must hold no error
    last_progress_line = _last_counted(tail, tail_start, last_progress_line)
    start = tail_start if last_progress_line is None else last_progress_line - 2
    after = [(tail_start + i, x) for i, x in enumerate(tail) if tail_start + i >= start]
    if last_progress_line is None:
        first = next((k for k, (_, x) in enumerate(after) if _SUMMARY.search(x) and not _printed_before(x, tail[:k])), None)
        if first is None:
            return None
        after = after[first:]
    if not after or any(_fatal(x) for _, x in after if not _SUMMARY.search(x) and not _LIMIT.search(x)):
        return None
    for line_no, text in after:
        m = _LIMIT.search(text)
        if m is not None and int(m["n"]) >= int(m["total"]) > 0:
            return line_no
        if _SUMMARY.search(text):
            return line_no
    nonempty = [(n, x) for n, x in after if x.strip()]
    if nonempty and last_progress_line is not None and nonempty[-1][0] > last_progress_line and _PROMPT.match(nonempty[-1][1].strip()):
        return nonempty[-1][0]
    return None


# A result printed once, after the last step, about the finished model: its score on the held-out test set ('test
# Accuracy: 0.9487', 'Accuracy on Test-Set: 71.38%', a named model's 'PGD Detector Test Accuracy: 99.43%'), or the model written out ('Saved model to data/big.mytorch',
# 'saved -> .../model.pt'). A per-epoch evaluation or a periodic checkpoint carries the epoch or step it was taken at.
_TEST_RESULT = lazy(
    r"(?i)^\W*(?:[a-z][\w-]*\s+){0,2}?(?:final\s+)?(?:test(?:ing)?|held[- ]?out)(?:[-_ ]?(?:set|data|split))?\b[^\n]{0,40}?"
    r"\b(?:acc(?:uracy)?|loss|f1|auc|m?ap|bleu|wer|cer|score|precision|recall|rmse|mae|perplexity|ppl)\b[^\n]{0,20}?[:=]\s*(?:tensor\()?-?\d"
    r"|\b(?:acc(?:uracy)?|loss|f1|auc|m?ap|bleu|wer|score)\s+(?:on|of)\s+(?:the\s+)?test\b[^\n]{0,20}?[:=]\s*-?\d"
    # the PyTorch tutorial's 'Accuracy of the network on the 10000 test images: 97.45 %'
    r"|\b(?:acc(?:uracy)?|loss|error)\b[^\n]{0,30}?\bon\s+(?:the\s+)?(?:\d+\s+)?test\b[^\n]{0,20}?[:=]\s*-?\d")
_SAVED = lazy(r"(?i)^\W*(?:(?:final|best|trained)\s+)?(?:model\s+)?(?:saved?|saving|exported?|wrote)\b"
              r"|\b(?:model|weights)\b[^\n]{0,30}\b(?:saved|written|exported)\b")
_INT = lazy(r"\d+")
_QUIET_END = 5
_EVAL_ONLY = frozenset({"val_loss", "val_acc"})


def final_result_after_training(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The line of a final test result or final model save that ends the log: after the last training line there
    are only such lines, blanks or plain words (at most a few), and no error.

    A scheduled evaluation or checkpoint names the epoch or step it belongs to; a save that names the last step
    ('checkpoint-3950') is periodic, so it does not count. Such a result is what a script prints when its training
    loop has returned.
    """
    if last_progress_line is None:
        return None
    final, seen, saved = None, 0, set[int]()
    for i in range(len(tail) - 1, -1, -1):
        text = tail[i]
        if not text.strip():
            continue
        seen += 1
        parsed = parse_line(text)
        if _TEST_RESULT.search(text) and not (parsed and (parsed[1] is not None or parsed[2] is not None)):
            final = tail_start + i
        elif _SAVED.search(text) and not _ERROR.search(text):
            final = tail_start + i  # checked against the last step's counter below
            saved = {int(n) for n in _INT.findall(text)}
        elif parsed is not None and (parsed[1] is not None or parsed[2] is not None):
            counters = {int(v) for v in parsed[1:3] if v is not None and float(v).is_integer()}
            periodic = final is not None and _SAVED.search(tail[final - tail_start]) and (
                counters & saved or _printed_before(tail[final - tail_start], tail[:i]))
            return None if periodic else final  # the training's last line, with only final results after it
        elif parsed is not None and final is not None and parsed[0] and set(parsed[0]) <= _EVAL_ONLY and not _ERROR.search(text):
            continue  # the last epoch's own validation, printed between its training line and the final test
        elif _ERROR.search(text) or parsed is not None:
            return None
        if seen > _QUIET_END:
            return None
    return None


def _printed_before(line: str, earlier: list[str]) -> bool:
    """The same line, numbers aside, was printed during training: a scheduled save, not the final one."""
    shape = _INT.sub("#", line.strip())
    return any(_INT.sub("#", x.strip()) == shape for x in earlier)


def _round_total(n: int) -> bool:
    """A total of epochs people configure: 5, 10, ... 50, then tens up to 500, then fifties (100, 120, 150, 300)."""
    return (n <= 50 and n % 5 == 0) or (n <= 500 and n % 10 == 0) or n % 50 == 0


def planned_last_epoch(tail: list[str], tail_start: int, points: Sequence[MetricPoint]) -> int | None:
    """The line of the last epoch of a run that counts epochs from 0 and ends on the lines of epoch 4, 99 or 149:
    one short of a round total, the last epoch of 5, 100 or 150 that the run's configuration (not in the log)
    asked for.

    A log cut while its run is alive stops at any epoch, mostly inside one; a finished run's whole log stops right
    after the summary of its last. So: epoch 0 is in the log (the counter is 0-based), the last epoch point is a
    whole epoch's summary (not a bar inside it), and after it come at most a few plain lines and nothing fatal.
    """
    epochs = [p for p in points if p.epoch is not None]
    if not epochs or min(p.epoch for p in epochs if p.epoch is not None) != 0:
        return None
    last = epochs[-1]
    e = last.epoch
    if e is None or not e.is_integer() or e < 4 or not _round_total(int(e) + 1) or points[-1] is not last:
        return None
    if last.batch is not None and last.batches is not None and last.batch < last.batches:
        return None  # inside the epoch
    i = last.line_no - tail_start
    if not 0 <= i < len(tail):
        return None
    after = [x for x in tail[i + 1 :] if x.strip()]
    if len(after) > _QUIET_END or any(_ERROR.search(x) for x in after):
        return None
    return last.line_no


# the whole run's estimated time left, as detectron2, mmcv/mmengine and YOLOX print it on every iteration line: zero on
# the last iteration of the run (not of an epoch: a tqdm bar's '<00:00' is the epoch's)
_ETA_ZERO = lazy(r"(?i)\beta:\s*(?:0:00:00|0?0:00|0s)(?:\s|,|$)")
_ETA = lazy(r"(?i)\beta:\s*+(?:(?P<d>\d{1,4}) days?,\s*+)?(?P<h>\d{1,6}):(?P<m>\d\d):(?P<s>\d\d)\b")
_FATAL = lazy(r"(?i)(error|exception|traceback|killed|fatal|abort)")
_AFTER_LAST_ETA = 40
# what such runners print once training's last interval is over: the final checkpoint, the final evaluation
_WRAP_UP = lazy(r"(?i)\b(?:sav(?:e|ed|ing)\s++checkpoint|checkpoint\s++saved|evaluat\w*+|Epoch\(val\)|Average (?:Precision|Recall))\b")


def _eta_seconds(m: re.Match[str]) -> int:
    return ((int(m["d"] or 0) * 24 + int(m["h"])) * 60 + int(m["m"])) * 60 + int(m["s"])


def eta_reached_zero(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The last progress line when it says no time is left for the whole run, and nothing fatal follows it (the
    final save and evaluation that such runners print next may report NaN for metrics they cannot compute); or the
    last line giving the whole run's time left, when that time is less than it fell by since the line before (the run
    was in its last logging interval: mmdet's 'eta: 0:00:16' at iteration 250 of 271 after 'eta: 0:00:54' at 200), and
    a few lines follow it, among them the final save or evaluation, none fatal (an experiment's name alone is no end)."""
    if (last_progress_line is not None and 0 <= (i := last_progress_line - tail_start) < len(tail)
            and _ETA_ZERO.search(tail[i]) and not any(_FATAL.search(x) for x in tail[i + 1 :])):
        return last_progress_line
    etas = [(k, m) for k, x in enumerate(tail) if "eta" in x.lower() and (m := _ETA.search(x))]
    if len(etas) < 2:
        return None
    (_, before), (k, last) = etas[-2], etas[-1]
    after = [x for x in tail[k + 1 :] if x.strip()]
    if len(after) > _AFTER_LAST_ETA or not any(_WRAP_UP.search(x) for x in after) or any(_FATAL.search(x) for x in after):
        return None
    left, fell = _eta_seconds(last), _eta_seconds(before) - _eta_seconds(last)
    return tail_start + k if 0 < fell and left < fell else None


def run_end(tail: list[str], tail_start: int, last_progress_line: int | None,
            points: Sequence[MetricPoint] = ()) -> int | None:
    """The line that shows the run reached its end when no completion message says so: its own counter reaching
    its configured total, a summary of the whole run after its last step, a final test result or model save, a
    whole-run ETA of zero, or a 0-based epoch counter ending on the last epoch of a round total."""
    for shape in (final_counter, summary_after_training, final_result_after_training, eta_reached_zero):
        if (line := shape(tail, tail_start, last_progress_line)) is not None:
            return line
    return planned_last_epoch(tail, tail_start, points)
