"""Collectors: the only code that touches the outside world. None of them writes anything."""
