"""PyTorch twins of the models, written the fastest way eager PyTorch offers: torch.nn.functional
ops over a flat dict of leaf tensors (F.embedding, F.linear, F.layer_norm,
F.scaled_dot_product_attention, F.cross_entropy) and torch.optim.Adam(foreach=True).

Each twin starts from our parameters, mapped by models.torch_bridge (to_torch for the
encoder-decoder, classifier_to_torch, lm_to_torch): Linear weights (d_out, d_in), attention's
W_Q, W_K, W_V packed in one in_proj (3D, D), so self-attention is one F.linear, as in
nn.MultiheadAttention. The same mapping turns our gradient tree into torch's names, which is
how `gradient_errors` compares every gradient.

    twin = Twin(torch, torch_bridge.lm_to_torch(p), functools.partial(lm_logits, ...), loss)
    twin.step()                      # forward, cross-entropy, backward, Adam
"""
import math

import numpy as np

from models.layers import position_encoding

ATTENTION = {"kernel": "sdpa"}  # "sdpa" (F.scaled_dot_product_attention) or "explicit"


def linear(F, w, prefix, x):
    return F.linear(x, w[prefix + "weight"], w[prefix + "bias"])


def layer_norm(F, w, prefix, x):
    return F.layer_norm(x, x.shape[-1:], w[prefix + "weight"], w[prefix + "bias"], 1e-5)


def split_heads(x, n_heads):
    """(B, T, D) -> (B, H, T, D/H)"""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def attend(torch, q, k, v, mask, causal):
    """softmax(q kᵀ / √d_head, masked) v over (B, H, T, d_head); mask True = may attend."""
    F = torch.nn.functional
    if ATTENTION["kernel"] == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    scores = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(q.shape[-1]))  # (B, H, T_q, T_k)
    if causal:
        mask = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention(torch, w, prefix, n_heads, x_q, x_kv=None, mask=None, causal=False):
    """Multi-head attention of x_q (B, T_q, D) over x_kv (B, T_k, D), or self-attention when
    x_kv is None (Q, K and V from one packed F.linear). -> (B, T_q, D)"""
    F = torch.nn.functional
    packed, bias = w[prefix + "in_proj_weight"], w[prefix + "in_proj_bias"]  # (3D, D), (3D,)
    d = packed.shape[1]
    if x_kv is None:
        q, k, v = F.linear(x_q, packed, bias).split(d, dim=-1)  # (B, T, D) each
    else:
        q = F.linear(x_q, packed[:d], bias[:d])  # (B, T_q, D)
        k, v = F.linear(x_kv, packed[d:], bias[d:]).split(d, dim=-1)  # (B, T_k, D) each
    heads = attend(torch, *(split_heads(a, n_heads) for a in (q, k, v)), mask, causal)
    b, _, t, _ = heads.shape
    merged = heads.transpose(1, 2).reshape(b, t, d)  # (B, T_q, D)
    return linear(F, w, prefix + "out_proj.", merged)


def feed_forward(F, w, prefix, x):
    return linear(F, w, prefix + "linear2.", F.relu(linear(F, w, prefix + "linear1.", x)))


def sublayer(F, w, norm, x, f, pre):
    """pre-LN x + f(LN(x)), or post-LN LN(x + f(x)) (blocks.residual, without dropout)."""
    if pre:
        return x + f(layer_norm(F, w, norm, x))
    return layer_norm(F, w, norm, x + f(x))


def self_attention_block(torch, w, prefix, n_heads, x, pre, mask=None, causal=False):
    """An encoder block or the LM's decoder-only block.  x: (B, T, D) -> (B, T, D)"""
    F = torch.nn.functional
    x = sublayer(F, w, prefix + "norm1.", x, lambda h: attention(
        torch, w, prefix + "self_attn.", n_heads, h, mask=mask, causal=causal), pre)
    return sublayer(F, w, prefix + "norm2.", x, lambda h: feed_forward(F, w, prefix, h), pre)


def decoder_block(torch, w, prefix, n_heads, x, memory, memory_mask, pre):
    F = torch.nn.functional
    x = sublayer(F, w, prefix + "norm1.", x, lambda h: attention(
        torch, w, prefix + "self_attn.", n_heads, h, causal=True), pre)
    x = sublayer(F, w, prefix + "norm2.", x, lambda h: attention(
        torch, w, prefix + "multihead_attn.", n_heads, h, memory, mask=memory_mask), pre)
    return sublayer(F, w, prefix + "norm3.", x, lambda h: feed_forward(F, w, prefix, h), pre)


_POSITION_TABLES = {}


def positions(torch, max_len, d_model, length, dtype):
    """PE[:length] (length, D) in dtype (a torch dtype), the table made once per size and
    dtype, as models.layers caches it."""
    key = (max_len, d_model, dtype)
    if key not in _POSITION_TABLES:
        numpy_dtype = np.float64 if dtype == torch.float64 else np.float32
        table = np.array(position_encoding(max_len, d_model, numpy_dtype))  # a writable copy
        _POSITION_TABLES[key] = torch.from_numpy(table)
    return _POSITION_TABLES[key][:length]


def embed(torch, table, ids, max_len, scale):
    """E[ids] (· √D when scale) + PE[:T].  ids (B, T) -> (B, T, D)"""
    x = torch.nn.functional.embedding(ids, table)
    if scale:
        x = x * math.sqrt(table.shape[1])
    return x + positions(torch, max_len, table.shape[1], ids.shape[1], x.dtype)


# ---- the three models, as models/ writes them -----------------------------------------------

def classifier_logits(torch, w, ids, n_heads, n_layers, max_len):
    """models.classifier with pool="flatten", no padding, post-LN.  ids (B, T) -> (B, L)"""
    F = torch.nn.functional
    x = embed(torch, w["embed.weight"], ids, max_len, scale=False)  # (B, T, D)
    for i in range(n_layers):
        x = self_attention_block(torch, w, f"encoder.{i}.", n_heads, x, pre=False)
    scores = linear(F, w, "agg.", x).squeeze(-1)  # (B, T)
    return linear(F, w, "head.", scores)  # (B, L)


def lm_logits(torch, w, ids, n_heads, n_layers, max_len):
    """models.lm: pre-LN causal blocks, a final layer norm.  ids (B, T) -> (B, T, V)"""
    F = torch.nn.functional
    x = embed(torch, w["embed.weight"], ids, max_len, scale=True)  # (B, T, D)
    for i in range(n_layers):
        x = self_attention_block(torch, w, f"blocks.{i}.", n_heads, x, pre=True, causal=True)
    return linear(F, w, "head.", layer_norm(F, w, "norm.", x))  # (B, T, V)


def transformer_logits(torch, w, src, tgt, src_pad, n_heads, n_encoder, n_decoder, max_len,
                       pre=False):
    """models.transformer (untied output): src (B, S), tgt (B, T) -> (B, T, V)"""
    F = torch.nn.functional
    keep = None if src_pad is None else (src != src_pad)[:, None, None, :]  # (B, 1, 1, S)
    x = embed(torch, w["src_embed.weight"], src, max_len, scale=True)  # (B, S, D)
    for i in range(n_encoder):
        x = self_attention_block(torch, w, f"transformer.encoder.layers.{i}.", n_heads, x, pre,
                                 mask=keep)
    memory = layer_norm(F, w, "transformer.encoder.norm.", x)  # (B, S, D)
    y = embed(torch, w["tgt_embed.weight"], tgt, max_len, scale=True)  # (B, T, D)
    for i in range(n_decoder):
        y = decoder_block(torch, w, f"transformer.decoder.layers.{i}.", n_heads, y, memory, keep,
                          pre)
    return linear(F, w, "out.", layer_norm(F, w, "transformer.decoder.norm.", y))  # (B, T, V)


# ---- a twin: parameters, loss, training step ----------------------------------------------

class Twin:
    """A functional torch model: `weights` {name: leaf tensor}, `logits()` over the batch it
    closes over, the mean cross-entropy against `labels`, and Adam."""

    def __init__(self, torch, state, logits, labels, lr=1e-4):
        self.torch = torch
        self.weights = {name: t.detach().clone().requires_grad_(True)
                        for name, t in state.items()}
        self.logits = lambda: logits(self.weights)
        self.labels = torch.from_numpy(np.ascontiguousarray(labels))
        self.optimizer = torch.optim.Adam(self.weights.values(), lr=lr, foreach=True)

    def loss(self):
        logits = self.logits()
        return self.torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), self.labels.reshape(-1))

    def gradients(self):
        """The loss and {name: gradient} at the current weights."""
        for t in self.weights.values():
            t.grad = None
        loss = self.loss()
        loss.backward()
        return loss.item(), {name: t.grad.numpy().copy() for name, t in self.weights.items()}

    def step(self):
        self.optimizer.zero_grad(set_to_none=True)
        self.loss().backward()
        self.optimizer.step()

    def infer(self):
        with self.torch.no_grad():
            return self.logits()


def gradient_errors(ours, theirs):
    """{name: ‖ours - theirs‖ / ‖theirs‖} (Frobenius norms) over the same names, both
    {name: array}. Norm-wise rather than entry-wise: on w3 a few entries of the twin's
    float32 gradient of a feed-forward weight differ by 0.6% of its largest entry from the
    float64 result (0.05% norm-wise; ours: 1e-6 either way), and a test entry by entry
    would measure those few entries only."""
    if sorted(ours) != sorted(theirs):
        raise AssertionError(f"the twin's parameters {sorted(theirs)[:4]}... differ from ours "
                             f"{sorted(ours)[:4]}...")
    errors = {}
    for name, reference in theirs.items():
        reference = np.asarray(reference, dtype=np.float64)
        scale = float(np.linalg.norm(reference))
        difference = float(np.linalg.norm(np.asarray(ours[name], dtype=np.float64) - reference))
        errors[name] = difference / scale if scale else difference
    return errors
