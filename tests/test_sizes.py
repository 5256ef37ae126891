"""Every size a model's init takes must be a positive int: 0 (a model of empty arrays that
would train and answer without an error), a negative, a float or a bool is refused, naming
the init and the size; a count of blocks may be 0, not negative."""
import numpy as np
import pytest

from models import classifier, lm, transformer
from models.sizes import check_sizes

SIZES = {
    classifier.init: dict(vocab_size=7, n_labels=2, d_model=8, n_heads=2, d_ff=16, n_layers=1,
                          max_len=5),
    lm.init: dict(vocab_size=7, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=5),
    transformer.init: dict(src_vocab=7, tgt_vocab=7, d_model=8, n_heads=2, d_ff=16, n_encoder=1,
                           n_decoder=1, max_len=5)}
CASES = [(init, name) for init, sizes in SIZES.items() for name in sizes]


BLOCKS = ("n_layers", "n_encoder", "n_decoder")


@pytest.mark.parametrize("init, name", CASES,
                         ids=[f"{init.__module__.split('.')[-1]}-{name}" for init, name in CASES])
@pytest.mark.parametrize("bad", [0, -3])
def test_a_size_below_one_is_refused_by_name(init, name, bad):
    caller = f"{init.__module__.split('.')[-1]}.init"
    settings = dict(SIZES[init], **{name: bad})
    if name in BLOCKS and bad == 0:  # no blocks: the embedding and the head alone
        assert init(np.random.default_rng(0), **settings) is not None
        return
    wanted = "an int >= 0" if name in BLOCKS else "a positive int"
    with pytest.raises(ValueError, match=rf"^{caller}: {name} must be {wanted}, got {bad}$"):
        init(np.random.default_rng(0), **settings)


@pytest.mark.parametrize("init", SIZES, ids=lambda init: init.__module__)
def test_the_sizes_given_make_a_model(init):
    assert init(np.random.default_rng(0), **SIZES[init]) is not None


@pytest.mark.parametrize("bad", [2.0, True, "3", None])
def test_a_size_that_is_not_an_int_is_refused(bad):
    with pytest.raises(ValueError, match=rf"^f: d must be a positive int, got {bad!r}$"):
        check_sizes("f", d=bad)
    check_sizes("f", d=np.int64(3), e=1)  # numpy ints are ints
