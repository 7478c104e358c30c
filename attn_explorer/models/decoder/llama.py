"""A Llama-family decoder's forward pass in numpy, on the explorer's own causal attention.

    x = embedding[id]
    for each layer:
        q, k, v = RMSNorm(x) · W_q, W_k, W_v            # H query heads, H_kv key/value heads
        q, k = RoPE(q), RoPE(k)                          # rotate halves (HF layout)
        x = x + W_o · attention(q, k[kv_head(h)], v[kv_head(h)], causal)
        x = x + W_down · (SiLU(W_gate · RMSNorm(x)) ⊙ W_up · RMSNorm(x))
    logits = RMSNorm(x) · embeddingᵀ                    # tied head unless output.weight exists

Grouped-query attention: query head h reads key/value head h // (H / H_kv), as
transformers' ``repeat_kv`` does. ``generate`` decodes greedily with a KV cache:
each new token is one query row against every cached key. Float32 end to end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attn_explorer.compute import LIMITS, attention
from attn_explorer.compute.softmax import softmax_rows
from attn_explorer.models.decoder.bpe import GGUFTokenizer
from attn_explorer.models.decoder.weights import (
    DEFAULT_BUDGET_BYTES,
    DecoderConfig,
    DecoderWeights,
    LayerWeights,
)
from attn_explorer.models.encoder.bert import ModelAttention
from attn_explorer.models.errors import ModelError, TextError, check_text
from attn_explorer.models.formats.gguf_file import GGUFFile

#: Largest (scores + weights) a single ``attention`` call keeps: L·H·T²·8 bytes.
MAX_RECORD_BYTES = 1 << 30
#: Tokens that end a turn, when the vocabulary has them (besides its eos token).
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>")


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x / √(mean(x²) + eps) · weight over the last axis."""
    t = x.dtype.type
    mean_square = (x * x).mean(axis=-1, keepdims=True)  # (..., 1)
    normed: np.ndarray = x / np.sqrt(mean_square + t(eps)) * weight
    return normed


def silu(x: np.ndarray) -> np.ndarray:
    """x · sigmoid(x)."""
    gated: np.ndarray = x / (x.dtype.type(1) + np.exp(-x))
    return gated


def rope_tables(positions: np.ndarray, head_dim: int, theta: float) -> tuple[np.ndarray, ...]:
    """cos and sin, each (T, d): frequency i for dims i and i + d/2 (the halves layout)."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # (d/2,)
    angles = positions.astype(np.float64)[:, None] * inv_freq[None, :]  # (T, d/2)
    angles = np.concatenate([angles, angles], axis=-1)  # (T, d)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rotate_halves(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """RoPE on (..., T, d): (x1, x2) -> (x1 cos − x2 sin, x2 cos + x1 sin) per frequency."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)  # rotate_half
    turned: np.ndarray = x * cos + rotated * sin
    return turned


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """:func:`rotate_halves` of (..., T, d) into one new C-contiguous array, bit for bit.

    ``x`` may be a strided view (the heads of a projection); the rotated copy
    ``rotate_halves`` builds is never made: x1·cos + (−x2)·sin is x1·cos − x2·sin
    exactly in floating point, and cos and sin repeat over the two halves.
    """
    half = x.shape[-1] // 2
    c, s = cos[..., :half], sin[..., :half]  # (T, d/2): the halves' angles are the same
    x1, x2 = x[..., :half], x[..., half:]
    out = np.empty(x.shape, dtype=x.dtype)
    o1, o2 = out[..., :half], out[..., half:]
    np.multiply(x1, c, out=o1)
    tmp = x2 * s
    np.subtract(o1, tmp, out=o1)
    np.multiply(x2, c, out=o2)
    np.multiply(x1, s, out=tmp)
    np.add(o2, tmp, out=o2)
    return out


def attend_one_row(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Causal attention of one new query row per head against every cached key.

    ``q`` (H, 1, d); ``k``, ``v`` (H_kv, t, d), query head h reading KV head
    h // (H / H_kv). Returns scores, weights (H, 1, t) and output (H, 1, d), equal bit
    for bit to ``compute.attention(q, k[kv_heads], v[kv_heads], causal=True)``: the
    same one-row matmuls (the KV head is broadcast across its group, not copied) and
    the same softmax, without the per-call checks (the last row sees every key, so
    the causal mask hides nothing).
    """
    heads, kv, t = q.shape[0], k.shape[0], k.shape[1]
    group = heads // kv
    q4 = q.reshape(kv, group, 1, q.shape[-1])  # (H_kv, group, 1, d)
    scores = np.matmul(q4, k[:, None].swapaxes(-1, -2))  # (H_kv, group, 1, t)
    weights, _ = softmax_rows(scores.reshape(heads, 1, t), factor=scale)  # (H, 1, t)
    output = np.matmul(weights.reshape(kv, group, 1, t), v[:, None])  # (H_kv, group, 1, d)
    return scores.reshape(heads, 1, t), weights, output.reshape(heads, 1, -1)


@dataclass
class KVCache:
    """Each layer's keys and values so far and how many positions they hold.

    ``keys[i]`` and ``values[i]`` are (H_kv, capacity, d) buffers whose first
    ``length`` positions are filled; they grow by doubling, so a generated token
    writes its key and value in place instead of copying the whole cache.
    """

    keys: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)
    length: int = 0

    def extend(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Store (H_kv, T, d) keys and values after ``length``; views of all length + T.

        ``length`` itself moves on once every layer has its new positions (``advance``).
        """
        end = self.length + k.shape[1]
        if layer == len(self.keys):
            capacity = 2 * end
            self.keys.append(np.empty((k.shape[0], capacity, k.shape[2]), k.dtype))
            self.values.append(np.empty((v.shape[0], capacity, v.shape[2]), v.dtype))
        elif end > self.keys[layer].shape[1]:
            for buffers in (self.keys, self.values):
                old = buffers[layer]
                heads, capacity, d = old.shape
                grown = np.empty((heads, max(end, 2 * capacity), d), old.dtype)
                grown[:, : self.length] = old[:, : self.length]
                buffers[layer] = grown
        keys, values = self.keys[layer], self.values[layer]
        keys[:, self.length : end] = k
        values[:, self.length : end] = v
        return keys[:, :end], values[:, :end]

    def advance(self, count: int) -> None:
        self.length += count


@dataclass(frozen=True)
class DecoderForward:
    """One forward pass: per-layer (L, H or H_kv, T, …) arrays when recorded, and logits."""

    logits: np.ndarray
    hidden_states: np.ndarray | None
    query: np.ndarray | None
    key: np.ndarray | None
    value: np.ndarray | None
    scores: np.ndarray | None
    weights: np.ndarray | None
    scale: float


@dataclass(frozen=True)
class Generation:
    """Greedy continuation of a prompt: new ids and text, and each step's attention row.

    ``steps[s]`` is (L, H, 1, t): the weights of the query row that chose new token
    s, against the t = prompt + s tokens before it (step 0 is the prompt's last row).
    ``stopped`` is 'end of turn', 'max_new_tokens' or 'context'.
    """

    prompt_ids: list[int]
    prompt_tokens: list[str]
    token_ids: list[int]
    tokens: list[str]
    text: str
    steps: list[np.ndarray] = field(repr=False)
    stopped: str


class DecoderModel:
    """A loaded decoder: config, tokenizer and layers dequantized from a memory-mapped GGUF."""

    def __init__(
        self,
        file: GGUFFile,
        config: DecoderConfig,
        tokenizer: GGUFTokenizer,
        weights: DecoderWeights,
        name: str = "",
    ) -> None:
        self.file = file
        self.path = file.path
        self.config = config
        self.tokenizer = tokenizer
        self.weights = weights
        self.name = name
        group = config.group_size
        self.kv_heads = np.arange(config.num_heads) // group  # (H,): query head -> KV head
        self.scale = 1.0 / float(np.sqrt(float(config.head_dim)))  # as compute.attention's
        self._rope_cos = self._rope_sin = np.empty((0, config.head_dim), dtype=np.float32)
        self.end_ids = frozenset(
            i
            for i in [tokenizer.eos_id, *map(tokenizer.token_id, END_OF_TURN)]
            if i is not None and 0 <= i < config.vocab_size
        )

    def __repr__(self) -> str:
        c = self.config
        return (
            f"DecoderModel({self.name!r}: {c.architecture}, {c.num_layers} layers × "
            f"{c.num_heads} query heads sharing {c.num_kv_heads} key/value heads, "
            f"width {c.hidden_size}, vocab {c.vocab_size})"
        )

    def kv_head(self, head: int) -> int:
        """The key/value head query head ``head`` reads."""
        return int(self.kv_heads[head])

    @property
    def max_tokens(self) -> int:
        """Most tokens one pass takes: the context, the explorer's limit, memory for attention."""
        c = self.config
        per_token_pair = c.num_layers * c.num_heads * 8  # scores + weights, float32
        by_memory = int((MAX_RECORD_BYTES / per_token_pair) ** 0.5)
        return min(c.context_length, LIMITS.max_tokens, by_memory)

    def _check_ids(self, ids: list[int], what: str) -> None:
        if not ids:
            raise TextError(f"{what}: the text is empty; type at least one word.")
        if len(ids) > self.max_tokens:
            raise TextError(
                f"{what}: {len(ids):,} tokens, over this model's limit of {self.max_tokens:,} "
                "for one pass; shorten it."
            )

    def forward(
        self, input_ids: np.ndarray, cache: KVCache | None = None, record: bool = True
    ) -> DecoderForward:
        """Run (T,) ids after the ``cache``'s positions; extend the cache; keep every head.

        With ``record`` the per-layer query (L, H, T, d), key/value (L, H_kv, T, d) of
        these tokens, scores/weights (L, H, T, t) against all t cached + new keys and the
        hidden states (L + 1, T, hidden) are returned; without it only the logits.
        """
        c = self.config
        ids = np.asarray(input_ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0 or ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"input_ids: expected (T,) ids in 0 … {c.vocab_size - 1}.")
        start = cache.length if cache is not None else 0
        cos, sin = self._rope(start, start + ids.size)
        x = self.weights.embed(ids)  # (T, hidden)
        hidden = np.empty((c.num_layers + 1 if record else 1, *x.shape), dtype=x.dtype)
        hidden[0], kept = x, list[np.ndarray]()  # q, k, v, scores, weights (L, …) if recorded
        for index in range(c.num_layers):
            w = self.weights.layer(index)
            q, k, v = self._qkv(rms_norm(x, w.attn_norm, c.rms_norm_eps), w, cos, sin)
            if cache is not None:
                k, v = cache.extend(index, k, v)  # (H_kv, t, d): cached and new positions
            if ids.size == 1:  # a decode step: one query row, no per-call checks
                scores, weights, output = attend_one_row(q, k, v, self.scale)
            else:  # every query head against its shared key/value head, copied per head
                att = attention(q, k[self.kv_heads], v[self.kv_heads], causal=True)
                assert att.output is not None and att.scale == self.scale
                scores, weights, output = att.scores, att.weights, att.output
            mixed = output.transpose(1, 0, 2).reshape(ids.size, -1)  # (T, H·d)
            x = x + mixed @ w.attn_output.T  # (T, H·d) @ (H·d, hidden)
            h = rms_norm(x, w.ffn_norm, c.rms_norm_eps)
            x = x + (silu(h @ w.gate.T) * (h @ w.up.T)) @ w.down.T  # (T, ff) -> (T, hidden)
            if record:  # into (L, …) arrays as it goes: no list of layers stacked at the end
                new = slice(k.shape[1] - ids.size, None)  # this pass's own keys and values
                layer = (q, k[:, new], v[:, new], scores, weights)
                kept = kept or [np.empty((c.num_layers, *a.shape), dtype=a.dtype) for a in layer]
                for into, array in zip([hidden[1:], *kept], [x, *layer], strict=True):
                    into[index] = array
        if cache is not None:
            cache.advance(ids.size)
        logits = self.weights.logits(rms_norm(x, self.weights.final_norm, c.rms_norm_eps))
        if not record:
            return DecoderForward(logits, None, None, None, None, None, None, self.scale)
        q, k, v, s, a = kept
        return DecoderForward(logits, hidden, q, k, v, s, a, self.scale)

    def _rope(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """cos and sin (end − start, d) for positions start … end − 1, from tables kept
        for every position so far (grown by doubling; computed per element, so a
        slice equals the table of just those positions)."""
        if end > self._rope_cos.shape[0]:
            positions = np.arange(max(end, 2 * self._rope_cos.shape[0], 64))
            c = self.config
            self._rope_cos, self._rope_sin = rope_tables(positions, c.head_dim, c.rope_theta)
        return self._rope_cos[start:end], self._rope_sin[start:end]

    def _qkv(
        self, h: np.ndarray, w: LayerWeights, cos: np.ndarray, sin: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(T, hidden) -> query (H, T, d) and key, value (H_kv, T, d), RoPE applied.

        One token: one matmul for Q, K and V together (the same numbers as three; one
        BLAS call instead of three). More tokens: three matmuls, as a fused one would
        round differently and is no faster there (measured on SmolLM2, 32 tokens).
        """
        c = self.config
        t, d = h.shape[0], c.head_dim
        parts: list[np.ndarray] = []
        if t == 1:
            y = h @ w.qkv.T  # (1, hidden) @ (hidden, (H + 2·H_kv)·d)
            if w.qkv_bias is not None:
                y = y + w.qkv_bias
            parts = list(np.split(y, [w.query_rows, w.query_rows + w.kv_rows], axis=1))
        else:
            for index, weight in enumerate((w.query, w.key, w.value)):
                y = h @ weight.T  # (T, hidden) @ (hidden, count·d)
                bias = w.bias(index)
                parts.append(y if bias is None else y + bias)
        q, k, v = (p.reshape(t, -1, d).transpose(1, 0, 2) for p in parts)  # (count, T, d)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def readable(self, ids: list[int]) -> list[str]:
        return [self.tokenizer.readable(i) for i in ids]

    def attention(
        self, text: str, text_pair: str | None = None, strategy: str = "batched"
    ) -> ModelAttention:
        """Tokenize ``text``, run it, keep every layer's heads (see :class:`ModelAttention`).

        TextError for empty text, a second text (a decoder reads one) or more tokens
        than :attr:`max_tokens`.
        """
        check_text("text", text)
        if text_pair is not None:
            raise TextError("text_pair: a decoder reads one text; join the two.")
        if strategy != "batched":
            raise ValueError(f"strategy: a decoder runs 'batched' attention, not {strategy!r}.")
        ids = self.tokenizer.encode(text)
        self._check_ids(ids, "text")
        result = self.forward(np.array(ids))
        assert result.query is not None and result.hidden_states is not None
        assert result.key is not None and result.value is not None
        assert result.scores is not None and result.weights is not None
        return ModelAttention(
            tokens=self.readable(ids),
            input_ids=np.array(ids, dtype=np.int64),
            token_type_ids=np.zeros(len(ids), dtype=np.int64),
            query=result.query,
            key=result.key,
            value=result.value,
            scores=result.scores,
            weights=result.weights,
            hidden_states=result.hidden_states,
            scale=result.scale,
            strategy=strategy,
            model_name=self.name,
            full_length=len(ids),
            causal=True,
            logits=result.logits,
            kv_heads=self.kv_heads.copy(),
        )

    def chat_prompt(self, message: str) -> str:
        """``message`` as one user turn in the model's ChatML template, ready for its reply."""
        template = str(self.file.get("tokenizer.chat_template", ""))
        if "<|im_start|>" not in template:
            raise ModelError(
                f"{self.path}: the chat template is not ChatML (<|im_start|>); "
                "run without chat, or choose a ChatML model."
            )
        prompt = ""
        default = re.search(r"<\|im_start\|>system\\n(.*?)<\|im_end\|>", template)
        if default is None:
            default = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", template, re.S)
        if default is not None:
            prompt += f"<|im_start|>system\n{default[1]}<|im_end|>\n"
        return prompt + f"<|im_start|>user\n{message}<|im_end|>\n<|im_start|>assistant\n"

    def generate(
        self,
        prompt: str,
        max_new_tokens: int = 20,
        chat: bool = False,
        on_token: Callable[[int, np.ndarray], None] | None = None,
    ) -> Generation:
        """Greedy decoding with a KV cache; stops at end of turn or ``max_new_tokens``.

        ``on_token(token_id, row)``, if given, hears each new token as soon as it is
        chosen, with its (L, H, 1, t) attention row; an exception it raises (a stop
        request) ends the generation and propagates.
        """
        check_text("prompt", prompt)
        if not prompt.strip() and not chat:
            raise TextError("prompt: the text is empty; type at least one word.")
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens: must be at least 1.")
        ids = self.tokenizer.encode(self.chat_prompt(prompt) if chat else prompt)
        self._check_ids(ids, "prompt")
        cache = KVCache()
        first = self.forward(np.array(ids), cache)  # the prompt, every head recorded
        assert first.weights is not None
        row, logits = first.weights[:, :, -1:, :], first.logits[-1]  # (L, H, 1, t)
        new: list[int] = []
        steps: list[np.ndarray] = []
        stopped = "max_new_tokens"
        while True:
            token = int(np.argmax(logits))
            if token in self.end_ids:
                stopped = "end of turn"
                break
            new.append(token)
            steps.append(row)  # the query row that chose this token
            if on_token is not None:
                on_token(token, row)
            if len(new) == max_new_tokens:
                break
            if cache.length >= self.max_tokens:
                stopped = "context"
                break
            step = self.forward(np.array([token]), cache)  # one query row, every cached key
            assert step.weights is not None
            row, logits = step.weights, step.logits[-1]
        return Generation(
            prompt_ids=ids,
            prompt_tokens=self.readable(ids),
            token_ids=new,
            tokens=self.readable(new),
            text=self.tokenizer.decode(new),
            steps=steps,
            stopped=stopped,
        )


def gguf_name(path: Path, file: GGUFFile) -> str:
    """A readable name: the file's stem (the metadata's names are often generic)."""
    return path.stem or str(file.get("general.name", "model"))


def load_gguf(path: str | Path, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> DecoderModel:
    """Open a GGUF decoder: header, configuration and tokenizer checked; layers on demand."""
    file = GGUFFile(Path(path).expanduser())
    config = DecoderConfig.from_gguf(file)
    tokenizer = GGUFTokenizer.from_gguf(file)
    if tokenizer.vocab_size != config.vocab_size:
        raise ModelError(
            f"{file.path}: the tokenizer has {tokenizer.vocab_size:,} tokens but the model "
            f"{config.vocab_size:,}; the file is inconsistent."
        )
    weights = DecoderWeights(file, config, budget_bytes)
    return DecoderModel(file, config, tokenizer, weights, name=gguf_name(file.path, file))
