"""Writing a file atomically: into a temporary file beside it, synced to disk, then moved
over it (os.replace), so that a reader, or a crash, sees the old file or the new one, never
half of one. The file gets the umask's permissions, as any file the user writes."""
import os


def write_atomically(path, write, mode="wb", caller="save", encoding=None, newline=None):
    """Call write(fh) on a temporary file beside `path`, then put it in path's place.
    An error opening it names `path` (and `caller`), not the temporary file."""
    path = os.fspath(path)
    temporary = f"{path}.partial-{os.getpid()}"
    try:
        try:
            fh = open(temporary, mode, encoding=encoding, newline=newline)
        except OSError as error:  # name the user's path, not the temporary one
            raise type(error)(error.errno, f"{caller}: {error.strerror}", path) from None
        with fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def write_text(path, text, caller="write_text"):
    """`text` into the file at path, UTF-8, atomically."""
    write_atomically(path, lambda fh: fh.write(text), mode="w", caller=caller, encoding="utf-8")
