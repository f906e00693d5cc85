"""The error that means "the command line is wrong": ``nntile-lab`` exits 2 on it.

Every other error of the work exits 1 (see :mod:`nntile_lab.cli`). Raise ``UsageError`` (a
``ValueError``, so library callers can keep catching ``ValueError``) where an option's value is
wrong on its face, with the option's name and the fix in the message.
"""


class UsageError(ValueError):
    """A bad option or argument value; the message names it and says what to give."""
