"""A result printed once about the finished model (its score on the test set, the model saved) that ends the
log after the last training line: what a script prints when its training loop has returned."""

from __future__ import annotations

from ml_skills.engine.analyse.quietend import ERROR, EVAL_ONLY, INT, QUIET_END, printed_before
from ml_skills.engine.read.metrics import parse_line
from ml_skills.lazyre import lazy

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
        elif _SAVED.search(text) and not ERROR.search(text):
            final = tail_start + i  # checked against the last step's counter below
            saved = {int(n) for n in INT.findall(text)}
        elif parsed is not None and (parsed[1] is not None or parsed[2] is not None):
            counters = {int(v) for v in parsed[1:3] if v is not None and float(v).is_integer()}
            periodic = final is not None and _SAVED.search(tail[final - tail_start]) and (
                counters & saved or printed_before(tail[final - tail_start], tail[:i]))
            return None if periodic else final  # the training's last line, with only final results after it
        elif parsed is not None and final is not None and parsed[0] and set(parsed[0]) <= EVAL_ONLY and not ERROR.search(text):
            continue  # the last epoch's own validation, printed between its training line and the final test
        elif ERROR.search(text) or parsed is not None:
            return None
        if seen > QUIET_END:
            return None
    return None
