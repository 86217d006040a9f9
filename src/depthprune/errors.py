"""The project's error contract: bad input is an ``InputError``; anything else is a bug.

``depthprune`` (cli.py) reports an ``InputError`` — a config key, an option, a file or a value the
user gave that cannot be used — as one line naming it, exit 2, with no traceback. Any exception of
another type that reaches the command line, a plain ``ValueError`` or ``KeyError`` from a library
or from our own code included, is reported as an internal error (a bug) with its traceback, exit 1:
a bug must never read like a typo in the user's config.

``InputError`` subclasses ``ValueError`` so that a caller (or a test) that expects a ``ValueError``
for a bad value keeps working.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: the message names the option, config key or file (and line) and says what to do."""
