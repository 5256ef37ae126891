"""Reading the .npy members of a file (autograd_lite/io/npz.py), through ag.load: every layout
numpy writes reads back as np.load reads it; a member that is not an .npy array, a header
that claims more (or less) data than its member holds, a damaged member and an object array
are refused by name, before any data is read, and nothing is ever unpickled."""
import json
import os
import re
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest
from helpers.serialization import (array_entry, dict_entry, npy_bytes, write_crafted,
                                  write_members)

import autograd_lite as ag
from autograd_lite.io.serialization import MalformedFile


def test_every_layout_reads_back_as_numpy_reads_it(tmp_path):
    tree = {"fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
            "big_endian": np.arange(6, dtype=">i4").reshape(2, 3),
            "strided": np.arange(20.0).reshape(4, 5)[:, ::2],
            "empty": np.zeros((0, 3), np.float32), "zero_d": np.array(2.5),
            "bools": np.array([True, False]), "complex": np.array([1 + 2j, -1j], np.complex64),
            "half": np.float16(1.5)}
    ag.save(tmp_path / "layouts.npz", tree)
    loaded = ag.load(tmp_path / "layouts.npz")
    with np.load(tmp_path / "layouts.npz") as reference:
        for i, key in enumerate(tree):
            expected = reference[f"a{i}"]
            assert loaded[key].dtype == expected.dtype == tree[key].dtype, key
            np.testing.assert_array_equal(loaded[key], expected, err_msg=key)
            assert np.shape(loaded[key]) == expected.shape, key
    assert loaded["fortran"].flags.f_contiguous and loaded["fortran"].flags.writeable
    assert type(loaded["half"]) is np.float16
    loaded["big_endian"][0, 0] = 7  # an array of its own, not a view of read-only bytes


def write_one_member(path, name, data):
    write_members(path, dict_entry(w=array_entry("a0")), {name: data})


def expect_refusal(path, message):
    with pytest.raises(MalformedFile, match=rf"^load: {re.escape(str(path))}: the structure at "
                                            rf"'\['w'\]': {message}$"):
        ag.load(path)


@pytest.mark.parametrize("shape, descr, data, claimed, held", [
    ((10 ** 12,), "<f8", np.ones(1).tobytes(), "8,000,000,000,000", "8"),  # np.load: MemoryError
    ((2,), "<f8", np.ones(3).tobytes(), "16", "24"),
    ((4, 10 ** 9), "<i4", b"", "16,000,000,000", "0"),
])
def test_a_header_that_claims_other_than_its_member_holds_is_refused_before_reading(
        shape, descr, data, claimed, held, tmp_path):
    path = tmp_path / "claims.npz"
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    write_one_member(path, "a0.npy", npy_bytes(header=header, data=data))
    dtype = np.dtype(descr)
    expect_refusal(path, rf"the entry 'a0' claims shape {re.escape(str(shape))} {dtype} "
                         rf"\({claimed} bytes\), but its member holds {held} bytes of data")


@pytest.mark.parametrize("name, data, message", [
    # np.load hands back a member's raw bytes when it is not an .npy
    ("a0", b"raw bytes", r"the file has no array entry 'a0' \(a member of that name is not an "
                         r"\.npy array\)"),
    ("a0.npy", b"raw bytes, not an .npy", r"the entry 'a0' is not an \.npy array"),
    ("a0.npy", np.lib.format.magic(1, 0) + b"\x10\x00{'descr': nonsense}",
     r"the entry 'a0' has a malformed \.npy header \(TokenError: .*\)"),
    ("a0.npy", npy_bytes(header={"descr": "<f8", "fortran_order": False, "shape": (1, 2, 3)}
                         ).replace(b"(1, 2, 3)", b"(1, -2, 3)"),
     r"the entry 'a0' claims the shape \(1, -2, 3\), with a negative length"),
    ("a0.npy", npy_bytes(header={"descr": "<f8", "fortran_order": False, "shape": (2,)}
                         ).replace(b"'<f8'", b"'<q9'"),
     r"the entry 'a0' has a malformed \.npy header \(ValueError: descr is not a valid dtype "
     r"descriptor: '<q9'\)"),
    ("a0.npy", np.lib.format.magic(3, 0) + bytes(60),
     r"the entry 'a0' is in \.npy format version \(3, 0\), which ag\.save does not write"),
])
def test_a_member_that_is_not_an_npy_array_is_refused(name, data, message, tmp_path):
    path = tmp_path / "odd.npz"
    write_one_member(path, name, data)
    expect_refusal(path, message)


def test_a_damaged_member_is_refused_by_name(tmp_path):
    path = tmp_path / "damaged.npz"
    ag.save(path, {"w": np.ones(1000)})
    data = bytearray(path.read_bytes())
    data[data.index(np.ones(8).tobytes()) + 20] ^= 0xFF  # a byte inside a0's data
    path.write_bytes(bytes(data))
    expect_refusal(path, r"the entry 'a0' cannot be read \(Bad CRC-32 for file 'a0\.npy'\)")


def test_a_member_size_the_file_cannot_hold_is_refused(tmp_path):
    """The zip's directory says how large a member is; a stored member's data lies in the
    file, so a larger claim is false (and would be allocated)."""
    path = tmp_path / "directory.npz"
    write_one_member(path, "a0.npy", npy_bytes(np.ones(4)))
    data = bytearray(path.read_bytes())
    entry = data.rindex(b"PK\x01\x02")  # the last central directory header: a0's
    assert data[entry + 46:entry + 52] == b"a0.npy"
    data[entry + 24:entry + 28] = struct.pack("<I", 10 ** 9)  # its uncompressed size
    path.write_bytes(bytes(data))
    expect_refusal(path, r"the entry 'a0' claims 1,000,000,000 bytes in the zip's directory, "
                         r"but the file can hold at most 160")


def test_compressed_files_read_and_other_compressions_are_refused(tmp_path):
    np.savez_compressed(tmp_path / "deflated.npz", a0=np.zeros((100, 100)),
                        __structure__=np.array(json.dumps(dict_entry(w=array_entry("a0")))))
    np.testing.assert_array_equal(ag.load(tmp_path / "deflated.npz")["w"], np.zeros((100, 100)))
    path = tmp_path / "bzip2.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("__structure__.npy",
                         npy_bytes(np.array(json.dumps(dict_entry(w=array_entry("a0"))))))
        archive.writestr("a0.npy", npy_bytes(np.ones(3)), compress_type=zipfile.ZIP_BZIP2)
    expect_refusal(path, r"the entry 'a0' is compressed with zip method 12, which numpy does "
                         r"not write")


UNPICKLED = []


def _record_unpickling():
    UNPICKLED.append(True)
    return "payload"


class Payload:
    def __reduce__(self):
        return (_record_unpickling, ())


def test_load_never_unpickles(tmp_path):
    path = tmp_path / "evil.npz"
    objects = np.empty(1, dtype=object)
    objects[0] = Payload()
    np.savez(path, a0=objects, __structure__=np.array('{"kind": "array", "entry": "a0"}'))
    with pytest.raises(MalformedFile, match=r"the entry 'a0' holds Python objects \(object\), "
                                            r"which only pickle could read: refused"):
        ag.load(path)
    assert UNPICKLED == []
    assert np.load(path, allow_pickle=True)["a0"][0] == "payload" and UNPICKLED == [True]


def test_files_that_are_not_npz_archives_are_named(tmp_path):
    np.save(tmp_path / "one.npy", np.ones(3))
    with pytest.raises(MalformedFile, match=r"one\.npy: it holds a single array, not an \.npz "
                                            r"file written by ag\.save$"):
        ag.load(tmp_path / "one.npy")
    (tmp_path / "notes.txt").write_text("not a zip archive")
    with pytest.raises(MalformedFile, match=r"notes\.txt: it is not an \.npz file written by "
                                            r"ag\.save \(File is not a zip file\)$"):
        ag.load(tmp_path / "notes.txt")
    ag.save(tmp_path / "cut.npz", {"w": np.ones(1000)})
    data = (tmp_path / "cut.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[:len(data) // 2])
    with pytest.raises(MalformedFile, match=r"cut\.npz: it is not an \.npz file written by "
                                            r"ag\.save"):
        ag.load(tmp_path / "cut.npz")


HUGE = 9223372036854775808  # 2**63, past numpy's largest index


@pytest.mark.parametrize("header, message", [
    ({"descr": "|S0", "fortran_order": False, "shape": (8_000_000_000,)},
     "the entry 'a0' has the dtype '|S0' of zero bytes, which ag.save does not write"),
    ({"descr": "|V0", "fortran_order": False, "shape": (10 ** 18,)},
     "the entry 'a0' has the dtype '|V0' of zero bytes, which ag.save does not write"),
    ({"descr": "<f8", "fortran_order": False, "shape": (0, HUGE)},
     f"the entry 'a0' claims the shape (0, {HUGE}) float64, which numpy refuses"),
    ({"descr": "<i1", "fortran_order": False, "shape": (2 ** 62, 0, 4)},
     f"the entry 'a0' claims the shape ({2 ** 62}, 0, 4) int8, which numpy refuses"),
])
def test_a_header_no_data_could_match_is_refused_by_name(header, message, tmp_path):
    """Headers that no data in the file can match, each refused naming the entry, its shape
    and dtype: a zero-byte dtype, which the size check alone would let claim a huge array of
    b'' from a small file, and a shape with a 0 and a length past 2**63, where numpy's bare
    'Maximum allowed dimension exceeded' would otherwise escape."""
    path = tmp_path / "claims.npz"
    write_one_member(path, "a0.npy", npy_bytes(header=header))
    expect_refusal(path, re.escape(message) + ".*")


def test_an_entry_referenced_twice_is_refused(tmp_path):
    """An entry is read once: a structure that references it twice is refused (save writes
    each entry once, so no file of ours has one)."""
    path = tmp_path / "twice.npz"
    structure = {"kind": "list", "children": [array_entry("a0"), array_entry("a0")]}
    write_members(path, structure, {"a0.npy": npy_bytes(np.zeros(4))})
    with pytest.raises(MalformedFile, match=re.escape(
            f"load: {path}: the structure at '[1]': the entry 'a0' is referenced more than "
            "once; save writes each array once")):
        ag.load(path)


def _peak_bytes_of_load(path):
    """(peak bytes traced by tracemalloc while ag.load reads `path`, what load raised or None)."""
    tracemalloc.start()
    try:
        ag.load(path)
        raised = None
    except MalformedFile as error:
        raised = error
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak, raised


def _hostile_files(tmp_path):
    """Files ag.save did not write, each claiming far more than it holds: name -> path."""
    mib = np.zeros(1 << 17)  # 1 MiB of float64
    files = {"a structure of 100,000 empty objects": tmp_path / "objects.npz"}
    write_crafted(files["a structure of 100,000 empty objects"], "[" + "{}," * 99_999 + "{}]")
    files["1000 references to one 1 MiB entry"] = tmp_path / "references.npz"
    write_members(files["1000 references to one 1 MiB entry"],
                  {"kind": "list", "children": [array_entry("a0")] * 1000},
                  {"a0.npy": npy_bytes(mib)})
    for name, header in [("|S0 of 8e9 elements", {"descr": "|S0", "shape": (8_000_000_000,)}),
                         ("(0, 2**63) float64", {"descr": "<f8", "shape": (0, HUGE)}),
                         ("1e12 float64 in 8 bytes", {"descr": "<f8", "shape": (10 ** 12,)})]:
        files[name] = tmp_path / f"{len(files)}.npz"
        write_one_member(files[name], "a0.npy",
                         npy_bytes(header={**header, "fortran_order": False},
                                   data=np.ones(1).tobytes() if "1e12" in name else b""))
    return files


def test_memory_allocated_by_load_is_a_small_multiple_of_the_file_size(tmp_path, rng):
    """load's docstring promises at most about ten times the file; tracemalloc counts numpy's
    allocations too. A file save wrote (0.5 MiB of arrays) takes a few times its size."""
    honest = tmp_path / "honest.npz"
    ag.save(honest, {"w": rng.standard_normal((256, 256)), "b": rng.standard_normal(256)})
    peak, raised = _peak_bytes_of_load(honest)
    size = os.path.getsize(honest)
    assert raised is None and size <= peak <= 4 * size + 200_000  # chunks zipfile copies
    for name, path in _hostile_files(tmp_path).items():
        peak, raised = _peak_bytes_of_load(path)
        assert isinstance(raised, MalformedFile), name
        assert peak <= 10 * os.path.getsize(path) + 200_000, (name, peak, os.path.getsize(path))
