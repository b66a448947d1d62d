"""A summary of the whole run printed after its last step ('Total training time: 0:06:14', 'num_updates: 25 >=
max_update: 25', 'Training finished'), or the shell prompt the process returned to, with no error after it."""

from __future__ import annotations

from ml_skills.engine.analyse.finalcounter import COUNTER
from ml_skills.engine.analyse.quietend import QUIET_END, fatal, printed_before
from ml_skills.engine.read.metrics import parse_line
from ml_skills.lazyre import lazy

# What a run prints once, after its last step, about the whole run: a budget compared with its limit ('num_updates:
# 25 >= max_update: 25'), the duration of all training ('Total training time: 0:06:14', '3 epochs completed in 0.2
# hours', 'Overall training speed: 298 iterations in 0:06:13'), training said to be over ('Training of experiment is
# done'). Each is a summary of the run, not of a step: no step line prints it.
_LIMIT = lazy(r"(?i)\b(?P<n>\d+)\s*>=\s*max[\w ]{0,20}?[:=]?\s*(?P<total>\d+)\b")
# `\s*+[.!]*+\s*+$`, possessive: `\s*[.!]*\s*$` tried each split of a run of spaces after 'process done' (a 2,000-character
# line in 65 ms, 500 of them in 32 s; twenty-second round)
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
    # (not 'Training completed or interrupted': verl's line for either ending says neither)
    r"\btrain(?:ing)?\]?\s+(?:finish(?:ed)?|done|complete[d]?|ended)\b(?!\s+(?:for\s+)?(?:epoch|step|iter)|\s+or\b)|"
    # the whole run's last evaluation or loss, named final ('[Eval FINAL]:', 'final eval finished', 'Final Loss: 0.08'),
    # and the time all of training took ('Time ellapsed in training is: 1271.3', 'training took 3:02:11')
    r"\[eval final\]|\bfinal (?:eval(?:uation)?|test(?:ing)?) (?:finished|done|complete[d]?)\b|\bfinal (?:train(?:ing)? )?loss\s*[:=]\s*-?\d|"
    r"\btime e?l+apsed (?:in|for|of) training\b|\btraining took \d|"
    # a script's closing timer on its own line ('Completed in 253.5 seconds', 'Finished in 3.2 min', 'Done in 41s')
    r"^\s*(?:completed|finished|done) in \d[\d.]*\s*(?:s|secs?|seconds|m|mins?|minutes|h|hrs?|hours)\s*+[.!]*+\s*+$|"
    # DeepXDE's timer on its whole training call ("'train' took 1178.429103 s"; its "'compile' took" comes first)
    r"'train' took \d|"
    # what a trainer prints once its loop has returned: Hugging Face's whole-run 'train_runtime' (in its final metrics
    # dict or a tracker's run summary), YOLOv5/v8's 'Optimizer stripped from .../best.pt' before the final validation
    r"\btrain_runtime\b|\boptimizer stripped from\b|"
    # llama-recipes' (llama-cookbook's) finetuning.py printing its returned results once training is over ('Key:
    # avg_train_prep, Value: 1.0189', 'Key: avg_eval_loss, Value: 0.848')
    r"^\s*Key: avg_(?:train|eval)_\w+, Value: |"
    # Megatron's evaluation on the test split, which it runs once, after the last iteration ('validation loss at
    # iteration 50 on test set | lm loss value: ...'; during training it evaluates on the validation set)
    r"\bloss at iteration \d+ on test set\b|"
    # a solver's or tuner's own end of the whole optimisation (Caffe's 'Optimization Done.', the Theano tutorials'
    # 'Optimization complete with best validation score', LightGBM's 'Finish train'), a pipeline's 'All enabled phases
    # completed.', a loop over its whole input done ('Done with all triples!')
    r"\boptimization (?:done|complete[d]?|finished)\b|\bfinish(?:ed)? train(?:ing)?\s*+[.!]*+\s*+$|"
    r"\ball\b[^\n]{0,30}\b(?:phases|stages|tasks|experiments|folds)\b[^\n]{0,10}\b(?:completed|finished|done)\b|\bdone with all\b|"
    # the process, job or script saying it ended well, about itself as a whole
    r"\b(process|job|script|run|pipeline) (completed|finished|ended) successfully\b|"
    # the DeepSpeed launcher's line for each of its processes that returned 0 ('Process 23917 exits successfully.'); one
    # that did not prints 'exits with return code = 1', which no run that ended well prints after its last step
    r"\bprocess \d+ exits successfully\b|"
    # a reinforcement-learning loop ending at its target score (the Udacity DRL projects' and their many descendants'
    # 'Environment solved in 245 episodes!\tAverage Score: 13.02', printed when the loop breaks on the target)
    r"\benvironment solved in \d+ (?:episodes?|iterations?|steps?)\b|"
    # training said to have succeeded as the line's last words (MindSpore's model zoo: 'train success'), and CatBoost's
    # own early stop ('Stopped by overfitting detector  (100 iterations wait)': its planned end by its patience rule)
    r"\btrain(?:ing)? (?:success(?:ful(?:ly)?)?|succeeded)\s*+[.!]*+\s*+$|\bStopped by overfitting detector\b|"
    # or as the line's last words ('>>> CatBoost Process Finished'; never 'Process finished with exit code 1')
    r"\b(process|job|script|pipeline) (completed|finished|ended|done)\s*+[.!]*+\s*+$|"
    # the same in the other languages training scripts print in: Chinese (training/task finished, total time taken),
    # Japanese, Korean, Spanish, Portuguese, German, French, Indonesian
    r"(训练|訓練|任务|任務)[^\n]{0,8}(完成|结束|結束)|总耗时|總耗時|学習(が)?(完了|終了)|학습\s*(완료|종료)|"
    r"\bentrenamiento (completado|finalizado|terminado)\b|\btreinamento (conclu[ií]do|finalizado)\b|"
    r"\bTraining (abgeschlossen|beendet)\b|\bentra[iî]nement termin[eé]\b|\btraining selesai\b)")
# a script's closing timer for its whole run, alone on its line after an optional logger prefix ('INFO:root:Execution
# time: 1933.9 seconds', 'Total elapsed time: 41 s'): a summary only when printed once (a per-epoch timer repeats)
# (each run of spaces read by one possessive quantifier: `time\s*[:=]?\s*\d` tried every split of a run of spaces between
# its two quantifiers, 3.7 s for a line of 20,000)
_CLOSING_TIMER = lazy(r"(?i)^(?:[A-Z]++:[\w.]*+:)?\s*+(?:total |overall )?(?:execution|elapsed|wall[- ]?clock|running) time\s*+(?:[:=]\s*+)?"
                      r"\d[\d.]*+\s*+(?:s|secs?|seconds|m|mins?|minutes|h|hrs?|hours)\s*+[.!]*+\s*+$")
# a shell prompt on the log's last line: the process returned to its shell ('user@host:~/dir$ ', '(env) user@host:~$',
# PowerShell's '(.venv) PS C:\Users\me\proj> ')
_PROMPT = lazy(r"^(\([\w.-]+\)\s*)?(?:[\w.-]+@[\w.-]+:[^\s]*\s*[$#]|PS [A-Za-z]:\\[^<>|\n]*>)\s*$")


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
    if len(results) > QUIET_END or any(COUNTER.search(x) for x in between) or not all(map(_lone_result, results)):
        return last_progress_line
    return tail_start + k


def _lone_result(line: str) -> bool:
    """A metric line that is no step of training: no step, epoch, loss or counter ('Accuracy: 0.7647')."""
    p = parse_line(line)
    return (p is not None and p[1] is None and p[2] is None and not any("loss" in k for k in p[0])
            and not COUNTER.search(line))


def _a_repeated_step(line: str, earlier: list[str]) -> bool:
    """A step's own line printed at every step in the same shape ('Steps 200, Total time 5.96, ... Loss 2.155e+01'): its
    'Total time' is the step's, not the run's."""
    p = parse_line(line)
    if p is None or (p[1] is None and not any("loss" in k for k in p[0])):
        return False
    return printed_before(line, earlier, _NUMBER)


_NUMBER = lazy(r"[-+]?\d[\d.]*(?:[eE][-+]?\d+)?")  # a number whole, sign and exponent too ('1.942e+01', '9.524e-01')


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
        first = next((k for k, (_, x) in enumerate(after) if _SUMMARY.search(x) and not printed_before(x, tail[:k])), None)
        if first is None:
            return None
        after = after[first:]
    if not after or any(fatal(x) for _, x in after if not _SUMMARY.search(x) and not _LIMIT.search(x)):
        return None
    for line_no, text in after:
        m = _LIMIT.search(text)
        if m is not None and int(m["n"]) >= int(m["total"]) > 0:
            return line_no
        if _SUMMARY.search(text) and not _a_repeated_step(text, tail[: line_no - tail_start]):
            return line_no
        if _CLOSING_TIMER.search(text) and not printed_before(text, tail[: line_no - tail_start]):
            return line_no
    nonempty = [(n, x) for n, x in after if x.strip()]
    if nonempty and last_progress_line is not None and nonempty[-1][0] > last_progress_line and _PROMPT.match(nonempty[-1][1].strip()):
        return nonempty[-1][0]
    return None
