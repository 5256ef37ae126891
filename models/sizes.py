"""The sizes a model's init is given (vocabularies, labels, widths, heads, positions) must
each be a positive int: a size of 0 would make a model with empty arrays that trains and
answers without an error, and a float or a bool is a mistake. A count of blocks may be 0
(the embedding and the head alone, a model the tests use)."""
import numbers


def check_sizes(caller, least=1, **sizes):
    """Each of `sizes` (name=value) an int of at least `least` (1: positive); else a
    ValueError naming `caller` ("classifier.init"), the size and its value."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
            wanted = "a positive int" if least == 1 else f"an int >= {least}"
            raise ValueError(f"{caller}: {name} must be {wanted}, got {value!r}")
