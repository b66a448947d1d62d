"""Analyse what was read: metric trajectories, divergence, stalls, ranks, how the log stops."""
