"""File-system errors as one sentence: the path, what is wrong, what to do.

``OSError`` texts like ``[Errno 13] Permission denied: 'runs/x'`` name neither the option
nor the fix; the commands print ``os_error_message(exc)`` instead.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

_WHAT = {
    errno.ENOENT: ("does not exist", "create it, or give a path whose folders exist"),
    errno.EACCES: ("is not accessible to you (permission denied)",
                   "give a path you can write, or change its permissions"),
    errno.EPERM: ("may not be changed (operation not permitted)",
                  "give a path you own, or change its permissions"),
    errno.EROFS: ("is on a read-only file system", "give a path on a writable disk"),
    errno.ENOSPC: ("cannot be written: the disk is full",
                   "free some space, or give a path on another disk"),
    errno.EDQUOT: ("cannot be written: the disk quota is used up",
                   "free some space, or give a path on another disk"),
    errno.ENOTDIR: ("has a file where a folder should be", "give a path made of folders"),
    errno.EISDIR: ("is a folder where a file is needed", "give a file's path"),
    errno.EEXIST: ("already exists", "remove it, or give another path"),
    errno.ENAMETOOLONG: ("is too long a name", "give a shorter path"),
    errno.ELOOP: ("has too many symbolic links", "give the real path"),
}


def os_error_message(exc: OSError) -> str:
    """``exc`` as one sentence naming the path (both, for a rename) and the fix."""
    path = exc.filename
    what, fix = _WHAT.get(exc.errno, (f"cannot be used ({(exc.strerror or str(exc)).lower()})",
                                      "check the path and the disk"))
    if exc.errno == errno.EEXIST and path is not None and os.path.isfile(path):
        # mkdir on a file's path (a cache or trace folder given as a file): "already exists:
        # remove it" would send the user to delete their file
        what, fix = "is a file where a folder is needed", "give a folder's path"
    if path is None:
        return f"a file operation failed: {exc.strerror or exc}; check the paths and the disk"
    where = f"{path}" + (f" (moving to {exc.filename2})" if exc.filename2 else "")
    return f"{where} {what}: {fix}"


def writable_dir(path, option: str):
    """Create ``path`` (an output folder) now, before any work: ValueError naming the
    option, the path and the fix when it cannot be."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ValueError(f"{option} {path} is a file, not a folder: give a folder") from None
    except OSError as exc:
        raise ValueError(f"{option}: {os_error_message(exc)}") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path} is not writable by you: give a folder you can "
                         "write, or change its permissions")
    return p


class UsageError(ValueError):
    """A bad option or argument value; the message names it and says what to give.
    ``nntile-lab`` exits 2 on it (the command line is wrong); every other error of the work
    exits 1 (nntile_lab.cli). A ``ValueError``, so library callers can keep catching
    ``ValueError``."""


def described(what) -> str:
    """An error's subject given as a string, or as a function making it: hot paths (a
    tensor's creation, an op's checks) pass a function, so the text is built only for an
    error."""
    return what() if callable(what) else what
