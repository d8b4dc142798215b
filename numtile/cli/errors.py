"""How the ``numtile`` command reports errors: one line on stderr and an exit status.

Exit status 2: the command line cannot work (a flag value out of range or contradicting
another, a bad ``--model``, a ``--data``/``--resume``/``--checkpoint``/``--trace``/
``--init-from``/``--log-dir`` path that is missing, a folder, unwritable or not a usable file,
a tokenizer that does not fit the model's vocabulary); the command stops before any work.
Exit status 1: the work itself failed (training diverged, out of memory, an I/O or runtime
error while running). Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys

# what a run can raise for reasons outside the program (everything else is a bug)
FAILURES = (OSError, ValueError, ArithmeticError, MemoryError, ImportError, RuntimeError)


class UsageError(Exception):
    """The command line cannot work: reported in one line, exit status 2."""


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (``KeyError`` quotes dropped).

    >>> one_line(KeyError("no such   tensor"))
    'no such tensor'
    """
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    return " ".join(str(text).split()) or type(exc).__name__


def report(command: str, exc: Exception) -> int:
    """Print ``exc`` for ``numtile command`` in one line; return its exit status (or raise it).

    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     status = report("train", UsageError("--steps must be >= 1, got -1"))
    >>> status, err.getvalue()
    (2, 'numtile train: error: --steps must be >= 1, got -1\\n')
    """
    if isinstance(exc, UsageError):
        status = 2
    elif isinstance(exc, FAILURES):
        status = 1
    else:
        raise exc
    print(f"numtile {command}: error: {one_line(exc)}", file=sys.stderr)
    return status
