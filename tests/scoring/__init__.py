"""The scorers behind docs/accuracy.md: the corpus, healthy-set, plan and framework figures (run through bench/)."""
