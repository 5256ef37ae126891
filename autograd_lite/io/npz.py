"""Reading the arrays of an .npz archive (a zip of one .npy member per array) one member at
a time, without pickle and without trusting what the file claims: np.load would hand back
the raw bytes of a member that is not an .npy, and allocate whatever a header claims.
A member's size in the zip's directory is checked against the file's size, then its .npy
header against that size, and only then is the data read, into an array of the size
checked. A member is read at most once and a dtype of zero bytes (any shape would fit in no
data) is refused, so what an archive allocates is bounded by the data its members hold.
Every refusal is a MalformedFile naming the entry; `ag.load` adds the file's name.
"""
import math
import os
import tokenize
import zipfile
import zlib

import numpy as np

_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}
_CHUNK_BYTES = 1 << 20
_LARGEST_BYTES = np.iinfo(np.intp).max  # numpy refuses a shape whose nonzero lengths pass it
# how many times its compressed size a member's data can be: stored, as np.savez writes
# them, or deflated (np.savez_compressed), at most 1032 times smaller
_GROWTH = {zipfile.ZIP_STORED: 1, zipfile.ZIP_DEFLATED: 1032}
# what zipfile raises on a damaged archive or member
_DAMAGED = (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError, RuntimeError)


class MalformedFile(ValueError):
    """A file that `ag.save` did not write (or that was changed since), or that does not
    hold the tree `like` describes."""


class NpzArchive:
    """The .npz file at `path`, open for reading: `archive.array(key)` reads member 'key.npy'.
    Use it in a `with` block, which closes the file."""

    def __init__(self, path):
        try:
            self._zip = zipfile.ZipFile(path)
        except zipfile.BadZipFile as error:
            with open(path, "rb") as fh:
                if fh.read(len(np.lib.format.MAGIC_PREFIX)) == np.lib.format.MAGIC_PREFIX:
                    raise MalformedFile("it holds a single array, not an .npz file written by "
                                        "ag.save") from None
            raise MalformedFile(f"it is not an .npz file written by ag.save ({error})") from None
        self._members = {info.filename: info for info in self._zip.infolist()}
        self._size = os.path.getsize(path)
        self._read = set()  # the members read: each one at most once

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._zip.close()

    def __contains__(self, key):
        return f"{key}.npy" in self._members

    def array(self, key):
        """The array stored in member 'key.npy'; a second read of it is refused (save writes
        each array once, so a repeated reference could only multiply what loading allocates)."""
        info = self._members.get(f"{key}.npy")
        if info is None:
            found = " (a member of that name is not an .npy array)" if key in self._members else ""
            raise MalformedFile(f"the file has no array entry {key!r}{found}")
        if key in self._read:
            raise MalformedFile(f"the entry {key!r} is referenced more than once; save writes "
                                "each array once")
        self._read.add(key)
        _check_member_size(key, info, self._size)
        try:
            with self._zip.open(info) as member:
                shape, fortran_order, dtype = _read_header(key, member)
                n_bytes = math.prod(shape) * dtype.itemsize
                held = info.file_size - member.tell()
                if n_bytes != held:
                    raise MalformedFile(f"the entry {key!r} claims shape {shape} {dtype} "
                                        f"({n_bytes:,} bytes), but its member holds {held:,} "
                                        "bytes of data")
                data = _read_exactly(key, member, n_bytes)
        except _DAMAGED as error:
            raise MalformedFile(f"the entry {key!r} cannot be read ({error})") from None
        if not n_bytes:
            return np.zeros(shape, dtype)
        return data.view(dtype).reshape(shape, order="F" if fortran_order else "C")


def _check_member_size(key, info, archive_size):
    """Refuse a member whose size in the zip's directory cannot be true: its data, stored
    or deflated, lies in the file, which bounds what reading it can take."""
    if info.compress_type not in _GROWTH:
        raise MalformedFile(f"the entry {key!r} is compressed with zip method "
                            f"{info.compress_type}, which numpy does not write")
    largest = _GROWTH[info.compress_type] * min(info.compress_size, archive_size)
    if info.file_size > largest:
        raise MalformedFile(f"the entry {key!r} claims {info.file_size:,} bytes in the zip's "
                            f"directory, but the file can hold at most {largest:,}")


def _read_header(key, member):
    """(shape, fortran_order, dtype) from the .npy header at the start of `member`."""
    try:
        version = np.lib.format.read_magic(member)
    except ValueError:
        raise MalformedFile(f"the entry {key!r} is not an .npy array") from None
    if version not in _HEADER_READERS:
        raise MalformedFile(f"the entry {key!r} is in .npy format version {version}, which "
                            "ag.save does not write")
    try:
        shape, fortran_order, dtype = _HEADER_READERS[version](member)
    except (ValueError, SyntaxError, tokenize.TokenError) as error:  # numpy parses it as Python
        raise MalformedFile(f"the entry {key!r} has a malformed .npy header "
                            f"({type(error).__name__}: {error})") from None
    if any(n < 0 for n in shape):
        raise MalformedFile(f"the entry {key!r} claims the shape {shape}, with a negative length")
    if dtype.itemsize == 0:
        raise MalformedFile(f"the entry {key!r} has the dtype {dtype.str!r} of zero bytes, "
                            "which ag.save does not write (any shape would fit in no data)")
    if math.prod(n for n in shape if n) * dtype.itemsize > _LARGEST_BYTES:  # even with a 0
        raise MalformedFile(f"the entry {key!r} claims the shape {shape} {dtype}, which numpy "
                            f"refuses: its nonzero lengths span more than {_LARGEST_BYTES:,} "
                            "bytes")
    if dtype.hasobject:
        raise MalformedFile(f"the entry {key!r} holds Python objects ({dtype}), which only "
                            "pickle could read: refused")
    return shape, fortran_order, dtype


def _read_exactly(key, member, n_bytes):
    """n_bytes from `member` as a uint8 array, read in chunks straight into it."""
    data = np.empty(n_bytes, np.uint8)
    view, filled = memoryview(data), 0
    while filled < n_bytes:
        got = member.readinto(view[filled:filled + _CHUNK_BYTES])
        if not got:
            raise MalformedFile(f"the entry {key!r} ends after {filled:,} of its "
                                f"{n_bytes:,} bytes")
        filled += got
    return data
