"""Plan: the run's facts, ranked fixes, the commands that would decide, GO / NO-GO, the repeat rule."""
