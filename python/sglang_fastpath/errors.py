"""The one exception type the CLI turns into a one-line error and a non-zero exit."""


class FastpathError(Exception):
    """A user-facing failure: the message names the value at fault and the fix."""
