"""GPT-2 in lm.py's functions (models/gpt2.py), against Hugging Face's GPT2LMHeadModel: a tiny
GPT-2 (2 layers, width 32) built by transformers with random weights and saved by
save_pretrained, read back by gpt2.load; its logits to 1e-5 in float32 and 1e-10 in float64,
every gradient against torch's, and greedy generation token for token. Also: a wrong or
partial file is one error naming the tensor and both shapes, the names load with or without
"transformer.", the safetensors reader against the safetensors package, and the GPT-2 shape
of lm.init (its tree, its init's spread, its blocks under the fast rules against the plain
functions)."""
import json

import numpy as np
import pytest

import autograd_lite as ag
from conftest import missing
from helpers.fused import assert_fused_matches_composed, fused_calls, rules_off
from helpers.references import assert_close
from models import blocks, gpt2, lm
from models.attention import causal_mask

VOCAB, WIDTH, HEADS, LAYERS, POSITIONS = 61, 32, 4, 2, 24


@pytest.fixture(scope="module")
def transformers():
    try:
        import transformers as module
    except ImportError:
        missing("TRANSFORMERS", "transformers is not installed (pip install transformers)")
    module.logging.set_verbosity_error()
    return module


@pytest.fixture(scope="module")
def reference(transformers, torch, tmp_path_factory):
    """(folder, GPT2LMHeadModel in eval mode): random weights spread wider than GPT-2's init
    (and random biases and layer-norm parameters) so that every tensor shows in the logits."""
    import torch
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=LAYERS, n_embd=WIDTH, n_head=HEADS,
                                     vocab_size=VOCAB, n_positions=POSITIONS,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            tensor.normal_(1.0 if name.endswith("ln_1.weight") else 0.0, 0.3)
    folder = tmp_path_factory.mktemp("gpt2")
    model.save_pretrained(folder)
    return folder, model


def ids(batch=2, length=9, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, length))


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-5), (np.float64, 1e-10)])
def test_logits_equal_transformers(reference, dtype, rtol):
    import torch
    folder, model = reference
    p = gpt2.load(folder, dtype=dtype)
    tokens = ids()
    with torch.no_grad():
        want = model.to(getattr(torch, np.dtype(dtype).name))(torch.from_numpy(tokens)).logits
    got = lm.apply(p, tokens)
    assert got.dtype == dtype
    assert_close(got, want.numpy(), rtol, "logits", scale=float(np.abs(want.numpy()).max()))


def test_gradients_equal_torch(reference):
    import torch
    folder, model = reference
    model = model.double()
    p = gpt2.load(folder, dtype=np.float64)
    tokens, targets = ids(), ids(seed=1)

    def loss(p):
        return ag.cross_entropy(lm.apply(p, tokens), targets)
    value, (grads,) = ag.value_and_gradient(loss, p)
    model.zero_grad()
    logits = model(torch.from_numpy(tokens)).logits
    want = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                             torch.from_numpy(targets).reshape(-1))
    want.backward()
    assert_close(value, want.item(), 1e-12, "loss")
    torch_grads = {name.removeprefix("transformer."): t.grad.numpy()
                   for name, t in model.named_parameters()}
    ours = gpt2.to_tensors(grads)
    assert sorted(ours) == sorted(torch_grads)  # lm_head.weight is wte: one parameter
    for name, g in ours.items():
        assert_close(g, torch_grads[name], 1e-9, name, scale=float(np.abs(torch_grads[name]).max()))


def test_greedy_generation_gives_transformers_tokens(reference):
    import torch
    folder, model = reference
    p = gpt2.load(folder, dtype=np.float64)
    prompt = ids(batch=1, length=5, seed=2)
    with torch.no_grad():
        want = model.double().generate(torch.from_numpy(prompt), max_new_tokens=12,
                                       do_sample=False, eos_token_id=None, pad_token_id=0,
                                       attention_mask=torch.ones_like(torch.from_numpy(prompt)))
    got = lm.generate(p, prompt, 12, temperature=0.0)
    np.testing.assert_array_equal(got, want.numpy())


def test_names_without_the_transformer_prefix_and_the_reader_equal_safetensors(reference,
                                                                               tmp_path):
    from safetensors.numpy import load_file, save_file
    folder, _ = reference
    stored = load_file(folder / "model.safetensors")
    ours = gpt2.read_safetensors(folder / "model.safetensors")
    assert sorted(ours) == sorted(stored)
    for name, array in stored.items():
        assert ours[name].dtype == array.dtype
        np.testing.assert_array_equal(ours[name], array)
    save_file({k.removeprefix("transformer."): v for k, v in stored.items()},
              tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    a, b = gpt2.load(folder), gpt2.load(tmp_path)
    for x, y in zip(ag.tree_leaves(a), ag.tree_leaves(b)):
        np.testing.assert_array_equal(x, y)


def test_bfloat16_and_float16_files_widen_to_the_stored_values(transformers, torch, tmp_path):
    from safetensors.torch import save_file
    values = torch.tensor([[1.5, -2.25], [3.0e-3, 65504.0]])
    save_file({"half": values.half(), "brain": values.bfloat16()}, tmp_path / "x.safetensors")
    tensors = gpt2.read_safetensors(tmp_path / "x.safetensors")
    np.testing.assert_array_equal(tensors["half"], values.half().numpy())
    np.testing.assert_array_equal(tensors["brain"], values.bfloat16().float().numpy())


def write_files(folder, tensors, config):
    from safetensors.numpy import save_file
    save_file(tensors, folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps(config))


@pytest.fixture
def tensors_and_config(reference):
    from safetensors.numpy import load_file
    folder, _ = reference
    return (load_file(folder / "model.safetensors"),
            json.loads((folder / "config.json").read_text()))


def test_a_wrong_shape_names_the_tensor_and_both_shapes(tensors_and_config, tmp_path):
    tensors, config = tensors_and_config
    tensors["transformer.h.1.mlp.c_fc.weight"] = np.zeros((WIDTH, 100), np.float32)
    write_files(tmp_path, tensors, config)
    with pytest.raises(ValueError) as error:
        gpt2.load(tmp_path)
    assert str(error.value) == ("gpt2: transformer.h.1.mlp.c_fc.weight has shape (32, 100), "
                                "expected (32, 128)")


def test_a_partial_file_names_the_missing_tensor(tensors_and_config, tmp_path):
    tensors, config = tensors_and_config
    del tensors["transformer.h.1.ln_2.bias"]
    write_files(tmp_path, tensors, config)
    with pytest.raises(ValueError, match=r"^gpt2: transformer.h.1.ln_2.bias is missing from "
                                         r"the file; expected \(32,\)$"):
        gpt2.load(tmp_path)


def test_a_config_of_fewer_layers_than_the_file_names_the_extra_tensor(tensors_and_config,
                                                                       tmp_path):
    tensors, config = tensors_and_config
    write_files(tmp_path, tensors, dict(config, n_layer=1))
    with pytest.raises(ValueError, match=r"^gpt2: the file holds transformer.h.1.\S+ \("):
        gpt2.load(tmp_path)


def test_a_config_our_model_cannot_follow_is_refused(tensors_and_config, tmp_path):
    tensors, config = tensors_and_config
    write_files(tmp_path, tensors, dict(config, activation_function="relu"))
    with pytest.raises(ValueError, match="activation_function is 'relu'; this model takes "
                                         "'gelu_new'"):
        gpt2.load(tmp_path)


def test_a_file_that_is_not_safetensors_is_refused(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(ValueError, match="is not a safetensors file"):
        gpt2.read_safetensors(tmp_path / "model.safetensors")


# --- the GPT-2 shape of lm.init, without transformers -----------------------------------

def tiny_gpt2(dtype=np.float64, seed=0):
    config = gpt2.Config(n_layer=LAYERS, n_head=HEADS, n_embd=WIDTH, n_positions=POSITIONS,
                         vocab_size=VOCAB)
    return gpt2.init(np.random.default_rng(seed), config, dtype)


def test_the_gpt2_shape_maps_onto_every_gpt2_name_and_back():
    p = tiny_gpt2()
    config = gpt2.Config(LAYERS, HEADS, WIDTH, POSITIONS, VOCAB)
    tensors = gpt2.to_tensors(p)
    assert {k: v.shape for k, v in tensors.items()} == gpt2.expected_shapes(config)
    q = gpt2.from_tensors(tensors, config, np.float64)
    assert ag.tree_paths(q) == ag.tree_paths(p)
    for x, y in zip(ag.tree_leaves(p), ag.tree_leaves(q)):
        np.testing.assert_array_equal(x, y)


def test_gpt2_init_draws_weights_of_gpt2s_spread():
    config = gpt2.Config(n_layer=8, n_head=4, n_embd=64, n_positions=64, vocab_size=500)
    tensors = gpt2.to_tensors(gpt2.init(np.random.default_rng(0), config))
    residual = 0.02 / np.sqrt(2 * 8)
    for name, array in tensors.items():
        if name.endswith("bias"):
            assert not array.any(), name
        elif "ln" in name:
            assert (array == 1).all(), name
        else:
            want = residual if name.endswith("c_proj.weight") else 0.02
            assert abs(array.std() / want - 1) < 0.05, (name, array.std(), want)


def test_the_default_lm_keeps_its_tree_and_draws():
    """The paper's LM, as before the GPT-2 options: the same paths and the same weights as
    its parts drawn in the old order (embedding, blocks, head)."""
    from models.blocks import encoder_block_init
    from models.layers import dense_init, embedding_init
    p = lm.init(np.random.default_rng(3), 11, 8, 2, 16, 2, 10)
    rng = np.random.default_rng(3)
    table = embedding_init(rng, 11, 8)
    parts = [encoder_block_init(rng, 8, 2, 16) for _ in range(2)]
    head = dense_init(rng, 8, 11)
    assert ag.tree_paths(p)[:2] == ["embed.table", "blocks[0].self_attn.wq.w"]
    np.testing.assert_array_equal(p.embed.table, table.table)
    for block, part in zip(p.blocks, parts):
        for x, y in zip(ag.tree_leaves(block), ag.tree_leaves(part)):
            np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(p.head.w, head.w)


def test_a_gpt2_shaped_lm_saves_and_loads_with_its_activation(tmp_path):
    p = tiny_gpt2(np.float32)
    ag.save(tmp_path / "m.npz", p)
    q = ag.load(tmp_path / "m.npz", like=tiny_gpt2(np.float32, seed=1))
    assert q.blocks[0].ff.activation is ag.gelu and q.head is None
    np.testing.assert_array_equal(lm.apply(q, ids()), lm.apply(p, ids()))


def test_cached_generation_equals_the_whole_forward():
    p = tiny_gpt2()
    tokens = ids(length=7)
    logits, cache = lm.forward_cached(p, tokens[:, :4], lm.empty_cache(p, 2))
    more, _ = lm.forward_cached(p, tokens[:, 4:], cache)
    assert_close(np.concatenate([logits, more], axis=1), lm.apply(p, tokens), 1e-12, "cached")


def test_gpt2_blocks_run_the_fast_rules_and_equal_the_plain_functions(fast_rules_on):
    p = tiny_gpt2()
    x = np.random.default_rng(1).standard_normal((2, 5, WIDTH))
    mask = causal_mask(5)

    def block(b, x):
        return blocks.decoder_only_block(b, x, mask)
    calls = fused_calls(block, p.blocks[0], x)
    assert "multihead_attention" in calls and "feed_forward" in calls  # gelu takes the rule
    assert_fused_matches_composed(block, rules_off(block), p.blocks[0], x, rtol=1e-10)
    tokens = ids()
    assert_close(lm.apply(p, tokens), rules_off(lm.apply)(p, tokens), 1e-12, "whole model")


@pytest.mark.parametrize("options", [dict(positions="learned"), dict(activation=ag.gelu),
                                     dict(tied_head=True), dict(weights="gpt2")])
def test_each_option_alone_keeps_cached_decoding_equal_to_the_whole_forward(options):
    p = lm.init(np.random.default_rng(0), 13, 16, 2, 32, 2, 12, dtype=np.float64, **options)
    tokens = np.random.default_rng(1).integers(0, 13, (2, 7))
    logits, cache = lm.forward_cached(p, tokens[:, :3], lm.empty_cache(p, 2))
    more, _ = lm.forward_cached(p, tokens[:, 3:], cache)
    assert_close(np.concatenate([logits, more], axis=1), lm.apply(p, tokens), 1e-12, "cached")
    assert (p.head is None) == options.get("tied_head", False)


def test_lm_init_refuses_an_unknown_choice_by_name():
    with pytest.raises(ValueError, match=r"^lm.init: positions must be one of \('sinusoidal', "
                                         r"'learned'\), got 'rotary'$"):
        lm.init(np.random.default_rng(0), 13, 16, 2, 32, 1, 12, positions="rotary")
