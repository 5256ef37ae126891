"""Writing a file atomically: into a temporary file beside it, synced to disk, then moved
over it (os.replace), so that a reader, or a crash, sees the old file or the new one, never
half of one. The file gets the umask's permissions, as any file the user writes."""
import os


def write_atomically(path, write, mode="wb", caller="save", encoding=None, newline=None):
    """Call write(fh) on a temporary file beside `path`, then put it in path's place.
    An OSError opening or writing it (a full disk) is one error naming `path` (and
    `caller`), not the temporary file."""
    path = os.fspath(path)
    temporary = f"{path}.partial-{os.getpid()}"
    try:
        try:
            fh = open(temporary, mode, encoding=encoding, newline=newline)
        except OSError as error:  # name the user's path, not the temporary one
            raise _naming(error, caller, path) from None
        try:
            with fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as error:  # closing after a failed write fails again: one error
            raise _naming(error, caller, path) from None
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def _naming(error, caller, path):
    """The OSError `error` as one that names `path` and `caller` (one without an errno, a
    program's own, as it is)."""
    if error.errno is None:
        return error
    return type(error)(error.errno, f"{caller}: {error.strerror}", path)


def write_text(path, text, caller="write_text"):
    """`text` into the file at path, UTF-8, atomically."""
    write_atomically(path, lambda fh: fh.write(text), mode="w", caller=caller, encoding="utf-8")
