"""The one exception type the benchmark CLIs turn into a one-line error and exit status 2."""


class BenchError(Exception):
    """A user-facing failure: the message names the value at fault and the fix."""
