"""models.transformer: the whole encoder-decoder against torch.nn.Transformer (through the
bridge's TorchTransformer), masks, lengths, dropout, presets, central differences through
dropout, and errors. (The position encoding and the embeddings' √d_model are layers.py's.)"""

import numpy as np
import pytest

import autograd_lite as ag
from models import transformer
from models.layers import Dense, Embedding
from helpers.references import relative_error
from helpers.tiny_models import (TRANSFORMER, assert_dropout_in_training_only_and_seeded,
                                 tiny_transformer)

SRC_VOCAB, TGT_VOCAB, PAD = 7, 9, 0  # tiny_transformer's vocabularies


def batch(seed=1, b=3, s=6, t=5):
    """Source ids with padding at the end of two rows (never a whole row), target ids."""
    rng = np.random.default_rng(seed)
    src = rng.integers(1, SRC_VOCAB, (b, s))  # (B, S)
    src[0, 4:] = PAD
    src[1, 2:] = PAD
    return src, rng.integers(0, TGT_VOCAB, (b, t))  # (B, T)


def tiny_shared(share, **keywords):
    """tiny_transformer with share_embeddings=share; "all" needs one vocabulary: TGT_VOCAB's
    (the source ids of batch() lie in it too)."""
    src_vocab = TGT_VOCAB if share == "all" else SRC_VOCAB
    return tiny_transformer(src_vocab=src_vocab, share_embeddings=share, **keywords)


def torch_logits_and_grads(torch, p, src, tgt, weight, src_pad):
    """TorchTransformer's logits and, for Σ logits ⊙ weight, each state_dict key's .grad."""
    from models import torch_bridge
    module = torch_bridge.torch_module_for(p).eval()
    logits = module(torch.from_numpy(src), torch.from_numpy(tgt), src_pad)
    (logits * torch.from_numpy(weight)).sum().backward()
    grads = {k: module.get_parameter(k).grad.numpy() for k in module.state_dict()}
    return logits.detach().numpy(), grads


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-9), (np.float32, 1e-4)])
@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("share", [False, True, "all"])
def test_logits_and_every_gradient_match_torch(torch, dtype, rtol, norm, share):
    from models import torch_bridge
    p = tiny_shared(share, dtype=dtype, norm=norm)
    src, tgt = batch()
    weight = np.random.default_rng(5).standard_normal((3, 5, TGT_VOCAB)).astype(dtype)
    logits = transformer.apply(p, src, tgt, src_pad=PAD)  # (B, T, V)
    assert logits.shape == (3, 5, TGT_VOCAB) and logits.dtype == dtype
    (grads,) = ag.gradient(lambda p: ag.sum(transformer.apply(p, src, tgt, PAD) * weight), p)
    want_logits, want_grads = torch_logits_and_grads(torch, p, src, tgt, weight, PAD)
    assert relative_error(logits, want_logits) < rtol
    got_grads = torch_bridge.to_torch(grads)
    assert got_grads.keys() == want_grads.keys()
    for key, want in want_grads.items():
        got = got_grads[key].numpy()
        assert got.dtype == dtype, key
        assert relative_error(got, want) < rtol, f"{key}: {relative_error(got, want):.3g}"


def test_a_padded_source_token_changes_no_output():
    p = tiny_transformer()
    src, tgt = batch()
    table = p.src_embed.table.copy()
    table[PAD] += 1.0  # what the padded positions hold
    q = p._replace(src_embed=p.src_embed._replace(table=table))
    np.testing.assert_allclose(transformer.apply(q, src, tgt, PAD),
                               transformer.apply(p, src, tgt, PAD), rtol=0, atol=1e-14)
    # without the mask the change is seen, so the comparison above can fail
    assert relative_error(transformer.apply(q, src, tgt), transformer.apply(p, src, tgt)) > 1e-3


def test_a_future_target_token_changes_no_earlier_output():
    p = tiny_transformer()
    src, tgt = batch()
    later = tgt.copy()
    later[:, 3:] = (tgt[:, 3:] + 1) % TGT_VOCAB
    a, b = transformer.apply(p, src, tgt, PAD), transformer.apply(p, src, later, PAD)
    np.testing.assert_allclose(b[:, :3], a[:, :3], rtol=0, atol=1e-14)
    assert np.abs(b[:, 3:] - a[:, 3:]).max() > 1e-3


def test_decode_of_encode_is_apply_and_needs_src_for_the_pad_mask():
    p = tiny_transformer()
    src, tgt = batch()
    memory = transformer.encode(p, src, PAD)  # (B, S, D)
    assert memory.shape == (3, 6, 8)
    np.testing.assert_array_equal(transformer.decode(p, memory, tgt, PAD, src=src),
                                  transformer.apply(p, src, tgt, PAD))
    with pytest.raises(ValueError, match=r"decode: src_pad=0 needs src="):
        transformer.decode(p, memory, tgt, PAD)
    with pytest.raises(ValueError, match=r"src \(3, 5\) does not match memory \(3, 6, 8\)"):
        transformer.decode(p, memory, tgt, PAD, src=src[:, :5])
    with pytest.raises(ValueError, match=r"memory \(2, 6, 8\) must be \(B, S, 8\) with the batch"):
        transformer.decode(p, memory[:2], tgt)


def test_a_too_long_sequence_names_the_call_the_argument_and_both_lengths():
    p = tiny_transformer(max_len=4)
    src, tgt = batch(s=6, t=3)
    with pytest.raises(ValueError, match=r"transformer.apply: src \(3, 6\) at positions 0\.\.5 "
                                         r"run past the position table's max_len=4"):
        transformer.apply(p, src, tgt, PAD)
    short_src, long_tgt = batch(s=3, t=5)
    with pytest.raises(ValueError, match=r"transformer.apply: tgt \(3, 5\) at positions 0\.\.4 "
                                         r".* max_len=4"):
        transformer.apply(p, short_src, long_tgt, PAD)
    with pytest.raises(ValueError, match=r"transformer.encode: src \(3, 6\) at positions 0\.\.5 run"):
        transformer.encode(p, src, PAD)
    memory = transformer.encode(p, short_src, PAD)
    with pytest.raises(ValueError, match=r"transformer.decode: tgt \(3, 5\) at positions 0\.\.4 run"):
        transformer.decode(p, memory, long_tgt, PAD, short_src)
    with pytest.raises(ValueError, match=r"transformer.greedy_decode: src \(3, 6\) at positions"):
        transformer.greedy_decode(p, src, 1, 2, 4, PAD)
    with pytest.raises(ValueError, match=r"transformer.beam_search: src \(3, 6\) at positions"):
        transformer.beam_search(p, src, 1, 2, 4, src_pad=PAD)
    from models.layers import embed_with_positions  # an offset, as when decoding with a cache
    with pytest.raises(ValueError, match=r"positions 3\.\.4 need 5 positions but the table "
                                         r"holds max_len=4"):
        embed_with_positions(p.tgt_embed, tgt[:, :2], 4, start=3)


def test_dropout_is_off_at_inference_and_reproducible_in_training():
    p = tiny_transformer(dropout=0.3)
    src, tgt = batch()
    assert_dropout_in_training_only_and_seeded(
        lambda training, rng: transformer.apply(p, src, tgt, PAD, training, rng))
    with pytest.raises(ValueError, match="transformer.apply: training=True needs an rng"):
        transformer.apply(p, src, tgt, PAD, training=True, rng=None)  # it ran without dropout
    with pytest.raises(ValueError, match="transformer.encode: training=True needs an rng"):
        transformer.encode(p, src, PAD, training=True)


def test_gradients_through_dropout_in_training_match_central_differences():
    """The rate is static (ag.Hyper): no gradient, and the same dropout masks each call.
    (Without dropout, every gradient is checked against torch above.)"""
    p = tiny_transformer(dropout=0.3, n_encoder=1, n_decoder=1)
    src, tgt = batch(b=2, s=4, t=3)
    labels = np.random.default_rng(5).integers(0, TGT_VOCAB, (2, 3))

    def loss(p):
        logits = transformer.apply(p, src, tgt, PAD, training=True, rng=np.random.default_rng(7))
        return ag.cross_entropy(logits, labels)
    assert ag.gradient(loss, p)[0].dropout is None
    errors = ag.check_gradients(loss, p)
    assert "p.decoder[0].cross_attn.wk.w" in errors and "p.out.w" in errors


def test_presets_are_table_3():
    assert transformer.BASE == dict(d_model=512, n_heads=8, d_ff=2048, n_encoder=6, n_decoder=6,
                                    dropout=0.1)
    assert transformer.BIG == dict(d_model=1024, n_heads=16, d_ff=4096, n_encoder=6, n_decoder=6,
                                   dropout=0.3)
    p = transformer.init(np.random.default_rng(0), 10, 11, **{**transformer.BASE, "d_ff": 8,
                                                              "n_encoder": 1, "n_decoder": 1})
    assert (p.d_model, p.dropout, p.encoder[0].self_attn.n_heads) == (512, 0.1, 8)
    assert p.out.w.shape == (512, 11) and p.out.w.dtype == np.float32


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="norm must be one of"):
        transformer.init(np.random.default_rng(0), 5, 5, **{**TRANSFORMER, "norm": "middle"})
    p = tiny_transformer()
    with pytest.raises(ValueError, match=r"apply: src \(2, 6\) and tgt \(3, 5\)"):
        transformer.apply(p, batch(b=2)[0], batch()[1])
    with pytest.raises(ValueError, match=r"encode: src must be integer tokens"):
        transformer.encode(p, np.zeros((2, 3)))
    src, tgt = batch()
    with pytest.raises(ValueError, match=r"transformer.apply: src must be integer tokens "
                                         r"\(B, T\), got float64 \(3, 6\)"):
        transformer.apply(p, src.astype(np.float64), tgt)
    with pytest.raises(ValueError, match=r"transformer.apply: src must be integer tokens "
                                         r"\(B, T\), got int64 \(6,\)"):
        transformer.apply(p, src[0], tgt)
    with pytest.raises(ValueError, match=r"transformer.apply: tgt must be integer tokens "
                                         r"\(B, T\), got float64 \(3, 5\)"):
        transformer.apply(p, src, (tgt + 0.5).tolist())
    np.testing.assert_array_equal(transformer.apply(p, src.tolist(), tgt.tolist()),
                                  transformer.apply(p, src, tgt))  # nested lists are arrays
    with pytest.raises(ValueError, match=r"transformer.apply: src \(3, 6\) holds id -1, outside "
                                         r"the vocabulary 0\.\.6"):
        transformer.apply(p, src - 1, tgt)  # -1 would index the table's last row
    with pytest.raises(ValueError, match=r"transformer.decode: tgt \(3, 5\) holds id 9, outside "
                                         r"the vocabulary 0\.\.8"):
        transformer.decode(p, transformer.encode(p, src), np.where(tgt == tgt.max(), 9, tgt))


@pytest.mark.parametrize("rate", [-0.1, 1.0, 3.0, float("nan")])
def test_init_refuses_a_dropout_rate_outside_0_to_1(rate):
    with pytest.raises(ValueError,
                       match=rf"transformer.init: dropout must lie in \[0, 1\), got {rate}$"):
        transformer.init(np.random.default_rng(0), SRC_VOCAB, TGT_VOCAB,
                         **{**TRANSFORMER, "dropout": rate})


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_dropout_sites_are_the_papers_and_torchs(dropout_sites, norm):
    """The sites of a training pass, derived from the architecture rather than the code:
    the paper (§5.4) drops each sublayer's output before the residual add and the sums of
    embeddings and positions in both stacks; torch's nn.MultiheadAttention drops the
    attention weights and nn.TransformerEncoderLayer / DecoderLayer the feed-forward's
    hidden activation. Both norm orders have the same sites. Sizes all differ, so a shape
    names its site; the layer counts differ, so a site per layer is counted per stack."""
    B, S, T, H, D, F, N_ENC, N_DEC, RATE = 2, 6, 5, 4, 8, 12, 2, 3, 0.25
    p = tiny_transformer(d_model=D, n_heads=H, d_ff=F, n_encoder=N_ENC, n_decoder=N_DEC, norm=norm,
             dropout=RATE)
    src, tgt = batch(b=B, s=S, t=T)
    transformer.apply(p, src, tgt, PAD, training=True, rng=np.random.default_rng(0))
    encoder_layer = [(B, H, S, S),  # encoder self-attention weights
                     (B, S, D),  # encoder self-attention sublayer output, before the residual
                     (B, S, F),  # encoder feed-forward hidden activation (after relu)
                     (B, S, D)]  # encoder feed-forward sublayer output, before the residual
    decoder_layer = [(B, H, T, T),  # decoder masked self-attention weights
                     (B, T, D),  # decoder self-attention sublayer output
                     (B, H, T, S),  # decoder cross-attention weights (queries T, memory keys S)
                     (B, T, D),  # decoder cross-attention sublayer output
                     (B, T, F),  # decoder feed-forward hidden activation
                     (B, T, D)]  # decoder feed-forward sublayer output
    want = ([(B, S, D)]  # source embeddings · √D + positions
            + N_ENC * encoder_layer
            + [(B, T, D)]  # target embeddings · √D + positions
            + N_DEC * decoder_layer)
    assert len(want) == 2 + 4 * N_ENC + 6 * N_DEC == 28
    assert sorted(dropout_sites) == sorted((shape, RATE) for shape in want)


def untied_copy(p):
    """A model with share_embeddings=False holding the values of a share "all" model p: three
    arrays, each a copy of p's one table (out.w in its (D, V) layout)."""
    table = p.tgt_embed.table
    return p._replace(src_embed=Embedding(table.copy()), out=Dense(table.T.copy(), p.out.b))


def test_sharing_all_makes_one_table_whose_gradient_sums_its_three_uses(torch):
    """§3.4: one matrix for the source embedding, the target embedding and the pre-softmax
    projection. Its gradient, from ag.gradient, against torch's .grad of the one Parameter
    of TorchTransformer(share_embeddings="all"), and against the sum of the three separate
    matrices' gradients (torch, untied, same values): float64, relative error below 1e-10."""
    from models import torch_bridge
    p = tiny_shared("all")
    assert p.src_embed.table is None and p.out.w is None
    assert transformer.sharing(p) == "all"
    src, tgt = batch()
    weight = np.random.default_rng(5).standard_normal((3, 5, TGT_VOCAB))
    (grads,) = ag.gradient(lambda p: ag.sum(transformer.apply(p, src, tgt, PAD) * weight), p)
    assert grads.src_embed.table is None and grads.out.w is None
    shared = grads.tgt_embed.table  # (V, D)

    module = torch_bridge.torch_module_for(p)
    assert module.src_embed.weight is module.tgt_embed.weight is module.out.weight
    _, tied = torch_logits_and_grads(torch, p, src, tgt, weight, PAD)
    assert relative_error(shared, tied["tgt_embed.weight"]) < 1e-10

    untied = untied_copy(p)
    np.testing.assert_allclose(transformer.apply(untied, src, tgt, PAD),
                               transformer.apply(p, src, tgt, PAD), rtol=1e-13, atol=1e-13)
    _, uses = torch_logits_and_grads(torch, untied, src, tgt, weight, PAD)
    three = [uses["src_embed.weight"], uses["tgt_embed.weight"], uses["out.weight"]]  # (V, D)
    assert all(np.abs(use).max() > 1e-3 for use in three)  # each use contributes
    assert relative_error(shared, sum(three)) < 1e-10


def test_share_embeddings_true_is_target_and_all_keeps_one_table():
    rng = np.random.default_rng
    target = transformer.init(rng(0), SRC_VOCAB, TGT_VOCAB, share_embeddings="target",
                              **TRANSFORMER)
    true = transformer.init(rng(0), SRC_VOCAB, TGT_VOCAB, share_embeddings=True, **TRANSFORMER)
    assert ag.tree_paths(true) == ag.tree_paths(target)
    for a, b in zip(ag.tree_leaves(true), ag.tree_leaves(target)):
        np.testing.assert_array_equal(a, b)
    assert transformer.sharing(target) == "target" and target.out.w is None
    assert transformer.sharing(tiny_transformer()) is False
    separate = tiny_transformer(src_vocab=TGT_VOCAB)
    shared = tiny_shared("all")
    n_arrays = [sum(ag.is_differentiable(x) for x in ag.tree_leaves(q)) for q in (separate,
                                                                                  shared)]
    assert n_arrays[1] == n_arrays[0] - 2  # src_embed.table and out.w are tgt_embed.table


def test_sharing_all_needs_one_vocabulary_and_share_embeddings_a_known_value():
    with pytest.raises(ValueError, match=r'transformer.init: share_embeddings="all" makes one '
                                         r'\(vocab, d_model\) table .* got src_vocab=7, '
                                         r'tgt_vocab=9 \(share_embeddings="target" ties'):
        transformer.init(np.random.default_rng(0), SRC_VOCAB, TGT_VOCAB,
                         share_embeddings="all", **TRANSFORMER)
    with pytest.raises(ValueError, match=r'transformer.init: share_embeddings must be False, '
                                         r'True \(= "target"\), "target" or "all", got .both.'):
        transformer.init(np.random.default_rng(0), 9, 9, share_embeddings="both", **TRANSFORMER)


def shared_copy_loss(p, batch, rng):
    """Cross-entropy of each next token of the (src, tgt) batch: tgt[:, 1:] from tgt[:, :-1]."""
    src, tgt = batch
    return ag.cross_entropy(transformer.apply(p, src, tgt[:, :-1], PAD), tgt[:, 1:])


def test_save_and_load_keep_the_one_table_and_a_resumed_fit_is_bit_identical(tmp_path):
    """The file holds the tying as the tree does: one array, src_embed.table and out.w None.
    A fit stopped after an epoch (its last.npz: parameters and Adam's moments) and resumed
    ends bit for bit where the uninterrupted fit does."""
    from models import train
    p = tiny_shared("all")
    ag.save(tmp_path / "p.npz", p)
    for loaded in (ag.load(tmp_path / "p.npz", like=p), ag.load(tmp_path / "p.npz")):
        assert loaded.src_embed.table is None and loaded.out.w is None
        assert transformer.sharing(loaded) == "all"
        np.testing.assert_array_equal(loaded.tgt_embed.table, p.tgt_embed.table)
    with np.load(tmp_path / "p.npz") as stored:
        n_arrays = sum(isinstance(x, np.ndarray) for x in ag.tree_leaves(p))
        assert len(stored.files) == n_arrays + 1  # the arrays and "__structure__"

    def batches(epoch):
        rng = np.random.default_rng([2, epoch])
        return [batch(int(rng.integers(100)), b=2, s=4, t=4) for _ in range(3)]
    optimizer, fit = ag.optim.adam(1e-2), dict(seed=0, progress=False)
    whole, _ = train.fit(shared_copy_loss, p, optimizer, batches, 2, tmp_path / "whole", **fit)
    train.fit(shared_copy_loss, p, optimizer, batches, 1, tmp_path / "cut", **fit)
    resumed, _ = train.fit(shared_copy_loss, p, optimizer, batches, 2, tmp_path / "cut",
                           resume=True, **fit)
    assert resumed.src_embed.table is None and resumed.out.w is None
    assert resumed.tgt_embed.table.tobytes() == whole.tgt_embed.table.tobytes()
    assert np.abs(whole.tgt_embed.table - p.tgt_embed.table).max() > 1e-3  # it trained
    for a, b in zip(ag.tree_leaves(resumed), ag.tree_leaves(whole)):
        assert (a.tobytes() == b.tobytes()) if isinstance(a, np.ndarray) else a == b
