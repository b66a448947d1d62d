"""The scan's internal markers: lines that are not catalog signatures but that the pass must find.

Each is matched by the same multi-pattern matcher as the signatures (scan.py), so a marker costs
nothing extra per chunk. 'completed' is a run's own word that it ended well (a trainer's closing
line, a runner's exit report), 'traceback' a traceback's opening, 'eval' a validation metric and
'saved' a checkpoint written (resume points for the plan).
"""

from __future__ import annotations

from ml_skills.engine.read import metric_lines

# Internal markers: (name, pattern, report once per chunk)
MARKERS: list[tuple[str, str, bool]] = [
    # Hydra's instantiate error without HYDRA_FULL_ERROR is its own short traceback (tracebacks.parse_hydra)
    ("traceback", r"(Original )?Traceback \(most recent call last\):|^(\[rank\d+\]:\s*)?Error in call to target '[\w.]+':\s*$", False),
    ("completed", (r"(?i)(training (completed|finished|complete|done)\b|'train_runtime'|\"train_runtime\"|`Trainer\.fit` stopped: `max_(epochs|steps)=\d+` reached|Training complete in|finished training|saving final model|Done training|training_done|"
     # the process's own runner saying it ended well: an IDE, LSF's job report, SLURM's sacct, HF's closing metrics block
     # and wandb.finish() reporting the script's exit code as 0 ('(failed 1)' otherwise), old wandb's 'Program ended successfully.'
     r"Process finished with exit code 0\b|^Successfully completed\.|\bState: COMPLETED\b|\*{5} train metrics \*{5}|"
     r"Waiting for W&B process to finish\W+\(success\)|wandb: Program ended successfully|"
     # a script's own closing line: 'completing training in 113880.80 seconds', 'train.py main execution finished',
     # a start/finish stamp pair's second half ('Finished: 2026-09-30 00:58:21')
     r"\bcomplet(?:ed|ing) training in \d|\b(?:main|script|pipeline) execution (?:finished|completed)\b|"
     r"^\W{0,12}(?:Finished|Completed)(?: at)?:?\s+\d{4}-\d\d-\d\d[ T]\d\d:\d\d|"
     # Ray's job CLI closing a submitted job's output ('Job 'raysubmit_6UyYLeNi217UXdBQ' succeeded'), the SageMaker
     # training toolkit's report of a user script that exited 0, XGBoost's early stop at its best round
     r"\bJob '[\w.-]{1,80}' succeeded\b|"
     # Megatron's planned exits, after the checkpoint save it makes first (--exit-duration-in-mins, --exit-interval): the
     # job's own end by design, the run resumed by the next one ('[exiting program after 1190.03 minutes] datetime: ...')
     r"\[exiting program after \d[\d.]* minutes\]|\bexiting program at iteration \d+|"
     # a result a trainer prints once its loop has returned ('Final validation metrics: {...}', verl's)
     r"\bfinal (?:validation|evaluation|eval|test) (?:metrics|results)\b|\bReporting training SUCCESS\b|^\W{0,3}Stopping\. Best iteration:|"
     # a loop's own stop at its configured total ('Reached max steps (200000). Stopping training.')
     r"\breached (?:the )?max(?:imum)?[ _](?:steps|iter(?:ation)?s|epochs|updates)\b.{0,60}\bstopping training\b|"
     # ... or as the keys of a closing summary block ('final_test_acc:   95.92%', 'final_val_loss=0.41'), one per line
     r"^\W{0,3}final_(?:test|val|valid|validation|eval|train)_[a-z0-9_]{1,30}\s{0,12}[:=]|"
     # a banner line that says only that the model is trained ('<<< Model Trained >>>'), not 'a model trained on ImageNet'
     r"^\W{0,12}(?:the )?model (?:is |has been |was )?trained\W{0,12}$|"
     # the same words in Chinese ('训练完成', '训练结束': training complete, training over), as many scripts print them
     r"训练(?:完成|结束))"), True),
    # the DeepSpeed launcher's report of each worker that returned 0 ('[launch.py:367:main] Process 4173669 exits
    # successfully.'): every one is kept, so the run's end is its last worker's, after the others' teardown noise
    ("completed", r"\[launch\.py:\d+:main\] Process \d+ exits successfully\.", False),
    # a validation metric in the chunk: on sampled logs its lines are all parsed (see _eval_lines)
    ("eval", metric_lines.EVAL, True),
    # a checkpoint written: resume points for the plan (engine/facts.py reads the last few)
    ("saved", (r"(?i)(saving (model )?checkpoint|saved? (a |the )?(model )?checkpoint|checkpoint (was )?saved|saving (the )?(best )?model (to|at|weights)|"
              r"model (weights )?saved (to|at|in)|saving model to|saved model to|saving current state to|saving weights to)"), False),
]
