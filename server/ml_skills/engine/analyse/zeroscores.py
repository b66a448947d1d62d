"""A run whose summary reports every detection, segmentation, F1, Matthews correlation or translation score as zero (at most
NEAR_ZERO).

A detector that found nothing ('Average Precision for class 1: 0.0' ... 'Mean Average Precision: 0.000000', YOLOX's
'the best AP is 0.00', Caffe's 'mAP = 0'), a segmenter whose Dice or IoU is 0 (nnU-Net's 'Average global foreground
Dice: [0.0]') or a translator whose BLEU is 0.000000 on every test set trained to a
useless model, or is scored against the wrong labels: the run may have finished, but its result is not usable. Read
from the log's last lines, where summaries are printed, and only when no such score there is above zero.
"""

from __future__ import annotations

from ml_skills.engine.read.excerpts import LINE_QUOTE
from ml_skills.lazyre import lazy
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, Severity
from ml_skills.safety.redact import redact_cut

_SCORE = lazy(
    r"(?i)(\bm?AP(50|75|@?[\d.:]+)?\b|average precision|\bbleu\b|_bleu\b)[^\n]{0,90}?(?:[:=]|->|\bis\b)\s*"
    r"(?P<v>-?\d+(?:\.\d+)?)\s*(?:%\s*)?(?:\.?[}\])]+\s*|\.\s*)?$")  # also a printed dict: "{'bbox AP': 0.0}"
# a segmentation score with its value right after its name, ending the line: nnU-Net's 'Average global foreground
# Dice: [0.0]', 'mIoU: 0.0000' (not a training line's running 'IOU: 0.13(0.17) ... LR: 0.01')
# (or ending a sentence, in any notation: 'dice score: 1.37e-05. The running time is 653.5')
_SEG = lazy(r"(?i)(?:\b|(?<=_))(?:foreground |mean )?(?:dice|m?iou)\b[\w ]{0,20}[:=]\s*\[?(?P<v>\d+(?:\.\d+)?(?:e-\d+)?)\s*%?\s*[\])]*\s*(?:[.,;]\s|$)")
# BLEU's score is the first number after its name in every tool's format: multi-bleu.perl and sacrebleu's
# 'BLEU = 0.00, 32.2/2.9/0.8/0.0 (BP=0.005, ...)', fairseq's 'BLEU4 = 0.00', a training loop's '... BLEU 0.00, <date>'
_BLEU = lazy(r"(?i)\bBLEU[-_ ]?4?\s*(?:[=:]\s*)?(?P<v>\d+(?:\.\d+)?)(?![\d.]|/)")
# a classifier's or tagger's F1 ('F1 (micro): 0.000%', 'dev_f1 = 0.0000', 'fscore: 0.000000, macro-fscore: ...'): an
# F1 of 0 at every evaluation means no prediction ever matched a label (precision 100% over no prediction, recall 0)
_F1 = lazy(r"(?i)(?:\b|(?<=_))f(?:1|-?score)\b(?:\s*+\((?:micro|macro|weighted)\))?\s*+(?:[:=]|\bis\b)\s*+(?P<v>\d++(?:\.\d++)?)\s*+%?\s*+(?:[,;]|$)")
# a classifier's Matthews correlation (GLUE's CoLA: 'eval_matthews_correlation = 0.0', 'mcc: 0.0'): 0 is what scikit-learn
# returns when every prediction is one class, and a model no better than chance scores about 0
_MCC = lazy(r"(?i)(?:\b|(?<=_))(?:matthews(?:_?corr(?:elation)?)?|mcc)\b\s*+(?:[:=]|\bis\b)\s*+(?P<v>-?\d++(?:\.\d++)?)\s*+(?:[,;|]|$)")
# a tqdm bar: '98%|', '2.43it/s' (a rate read from its first digit: a line of digits is no quadratic search)
_BAR = lazy(r"\d%\||(?<![\d.])\d+(?:\.\d+)?\s?(?:it|s)/(?:s|it)\b")
_COUNTER = lazy(r"(?i)\b(iteration|iter|step|epoch)\b\D{0,5}(?P<n>\d+(\.\d+)?)")
WINDOW = 40  # the summary block: the log's last lines
# a score on the 0-1 (or 0-100) scale no working detector or translator ends at: COCO's AP of 0.002 with AP50 of
# 0.009 is as useless as 0.0 (predictions counted under the wrong category), and such a table never reads exactly 0
NEAR_ZERO = 0.01


# a YOLO validation row: 'all', images, labels (instances), then P, R, mAP@.5, mAP@.5:.95 (YOLOv5 to v8)
_YOLO_ALL = lazy(r"^\s*all\s+(?P<images>\d+)\s+(?P<labels>\d+)(?P<scores>(?:\s+\d*\.?\d+){4,})\s*$")


def _unlabelled_split(tail: list[str], tail_start: int, source: str) -> Anomaly | None:
    """A YOLO validation row over images with no labels at all: every score is 0 because nothing can be matched."""
    for i in range(len(tail) - 1, max(-1, len(tail) - WINDOW - 1), -1):
        m = _YOLO_ALL.match(tail[i])
        if m is not None and int(m["images"]) > 0 and int(m["labels"]) == 0:
            return Anomaly(
                kind=AnomalyKind.VALIDATION_METRIC_NEAR_ZERO, failure_class=FailureClass.EVALUATION_MISMATCH,
                severity=Severity.SIGNIFICANT, source=source, line_no=tail_start + i,
                detail=(f"the evaluation ran over {m['images']} images with 0 labels (line {tail_start + i}): every score "
                        "is 0 because there is nothing to match - the split's label files were not found or not read "
                        "(label paths, the images/ -> labels/ naming, an empty or wrong-format label set)" + _quote(tail[i])))
    return None


ZERO_ROWS = 2  # validations in a row that matched nothing: one may be a detector's first epoch


def _yolo_nothing_found(tail: list[str], tail_start: int, source: str) -> Anomaly | None:
    """YOLO validation rows over labelled images whose P, R, mAP@.5 and mAP@.5:.95 are all 0, every epoch shown."""
    rows = [(tail_start + i, m) for i in range(max(0, len(tail) - WINDOW), len(tail)) if (m := _YOLO_ALL.match(tail[i])) is not None]
    if len(rows) < ZERO_ROWS or any(int(m["labels"]) == 0 or any(float(v) > NEAR_ZERO for v in m["scores"].split()[-4:])
                                    for _, m in rows):
        return None
    line_no, m = rows[0]
    return Anomaly(
        kind=AnomalyKind.VALIDATION_METRIC_NEAR_ZERO, failure_class=FailureClass.EVALUATION_MISMATCH,
        severity=Severity.SIGNIFICANT, source=source, line_no=line_no,
        detail=(f"precision, recall and mAP are 0 in each of the {len(rows)} validations from line {line_no} ({m['images']} "
                f"images, {m['labels']} labels): the model matches none of the labels - class ids or box format that do "
                "not fit the evaluator, or a model that is not learning (a classification loss that does not fall)"
                + _quote(tail[line_no - tail_start])))


def _quote(line: str) -> str:
    """The summary line itself, after the finding, so the report cites what the log printed."""
    return f"{LINE_QUOTE}{redact_cut(line.strip(), 300)}"


def _zero(seen: list[tuple[int, float]]) -> str:
    top = max(v for _, v in seen)
    return "exactly 0" if top == 0 else f"at most {top:g}, about 0"


# a batch scheduler's report appended after the program's own output (LSF's 'Sender: LSF System' mail, its resource
# summary): the summary block to read ends where it starts
_JOB_REPORT = lazy(r"^(Sender: LSF System|Subject: Job \d+|Job <[^>]*> was submitted from host|Resource usage summary:)")


def zero_scores(tail: list[str], tail_start: int, source: str) -> Anomaly | None:
    end = next((i for i, x in enumerate(tail) if _JOB_REPORT.match(x)), len(tail))
    if not any("The output (if any) follows" in x for x in tail[end:]):  # LSF's report put before the output, not after
        tail = tail[:end]
    if (unlabelled := _unlabelled_split(tail, tail_start, source) or _yolo_nothing_found(tail, tail_start, source)) is not None:
        return unlabelled
    seen: list[tuple[int, float]] = []
    start = max(0, len(tail) - WINDOW)
    for i in range(start, len(tail)):
        m = _BLEU.search(tail[i]) or _SCORE.search(tail[i]) or _SEG.search(tail[i]) or _F1.search(tail[i]) or _MCC.search(tail[i])
        # COCO prints -1.000 for an area with no ground truth: no score, not a zero
        # a loss term named after the score ('loss_dice: 0.0') is no score, nor is a progress bar's running value beside the
        # loss ('loss=3.100, validation_bleu=0.000'); a summary line's loss elsewhere on it does not matter
        if m is None:
            continue
        near = tail[i] if _BAR.search(tail[i]) else tail[i][max(0, m.start() - 6) : m.end()]
        if "loss" not in near.lower() and float(m["v"]) >= 0:
            seen.append((tail_start + i, float(m["v"])))
    if not seen or any(v > NEAR_ZERO for _, v in seen):
        return None
    line_no, last = seen[0][0], seen[-1][0]
    # an evaluation before any training (Caffe's 'Iteration 0, Testing net') scores an untrained model: zero is expected
    # (read at the last score: epoch 0's evaluation after its training is followed by epoch 1's)
    for text in reversed(tail[max(0, last - tail_start - 12) : last - tail_start]):
        m = _COUNTER.search(text)
        if m is not None:
            if float(m["n"]) == 0:
                return None
            break
    return Anomaly(
        kind=AnomalyKind.VALIDATION_METRIC_NEAR_ZERO, failure_class=FailureClass.EVALUATION_MISMATCH,
        severity=Severity.SIGNIFICANT, source=source, line_no=line_no,
        detail=(f"every detection, segmentation, F1, Matthews correlation or translation score in the run's summary is {_zero(seen)} ({len(seen)} from line {line_no}): "
                "the model predicts nothing that matches the labels - a class/label mapping or annotation format that "
                "does not fit the evaluator, or a model that never learned" + _quote(tail[line_no - tail_start])),
    )
