"""The screens preflight-run puts a script, its data and its launch through before a paid run, one module per
concern; checks/preflight.py gates on them."""
