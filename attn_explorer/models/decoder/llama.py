"""A Llama-family decoder's forward pass in numpy, on the explorer's own causal attention.

    x = embedding[id]
    for each layer:
        q, k, v = RMSNorm(x) · W_q, W_k, W_v            # H query heads, H_kv key/value heads
        q, k = RMSNorm_head(q), RMSNorm_head(k)          # Qwen3 only: per-head q/k norm
        q, k = RoPE(q), RoPE(k)                          # rotate halves (HF layout);
                                                         # Llama 3: frequencies / rope_freqs
        x = x + W_o · attention(q, k[kv_head(h)], v[kv_head(h)], causal)
        x = x + W_down · (SiLU(W_gate · RMSNorm(x)) ⊙ W_up · RMSNorm(x))
    logits = RMSNorm(x) · embeddingᵀ                    # tied head unless output.weight exists

Grouped-query attention: query head h reads key/value head h // (H / H_kv), as
transformers' ``repeat_kv`` does. ``generate`` decodes greedily with a KV cache:
each new token is one query row against every cached key. Float32 end to end.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from attn_explorer.compute import LIMITS, Cancelled, attention
from attn_explorer.compute.softmax import softmax_rows
from attn_explorer.models.decoder.config import DecoderConfig
from attn_explorer.models.decoder.long_pass import LayerKeys, long_attention, records_everything
from attn_explorer.models.decoder.long_stats import LongStats
from attn_explorer.models.decoder.ops import (
    ACTIVATIONS,
    KVCache,
    apply_rope,
    attend_one_row,
    kept_layer,
    rms_norm,
    rope_tables,
    softcap,
    window_keep,
)
from attn_explorer.models.decoder.sampling import GREEDY, Sampler, Sampling, top_choices
from attn_explorer.models.decoder.text.bpe import GGUFTokenizer, check_unicode
from attn_explorer.models.decoder.text.chat_template import chatml_prompt
from attn_explorer.models.decoder.text.spm import SentencePieceTokenizer
from attn_explorer.models.decoder.weights import DEFAULT_BUDGET_BYTES, DecoderWeights, LayerWeights
from attn_explorer.models.errors import ModelError, TextError, check_text
from attn_explorer.models.formats.dequantize import quantization_mix
from attn_explorer.models.formats.ggml_types import file_type_name
from attn_explorer.models.formats.gguf_file import GGUFFile
from attn_explorer.models.formats.gguf_metadata import metadata_value
from attn_explorer.models.formats.serial import OneCallAtATime, one_call_at_a_time
from attn_explorer.models.results import DecoderForward, ModelAttention

#: Tokens that end a turn, when the vocabulary has them (besides its eos token).
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>", "<end_of_turn>")


@dataclass(frozen=True)
class Generation:
    """Greedy continuation of a prompt: new ids and text, and each step's attention row.

    ``steps[s]`` is (L, H, 1, t): the weights of the query row that chose new token
    s, against the t = prompt + s tokens before it (step 0 is the prompt's last row).
    ``stopped`` is 'end of turn', 'max_new_tokens' or 'context'. ``choices[s]`` are the
    10 most likely (id, probability) of the model's distribution at step s (before any
    sampling filter), ``sampling`` how the tokens were chosen.
    """

    prompt_ids: list[int]
    prompt_tokens: list[str]
    token_ids: list[int]
    tokens: list[str]
    text: str
    steps: list[np.ndarray] = field(repr=False)
    stopped: str
    choices: list[list[tuple[int, float]]] = field(default_factory=list, repr=False)
    sampling: Sampling = GREEDY


class DecoderModel(OneCallAtATime):
    """A loaded decoder: config, tokenizer and layers dequantized from a memory-mapped GGUF."""

    def __init__(
        self,
        file: GGUFFile,
        config: DecoderConfig,
        tokenizer: GGUFTokenizer | SentencePieceTokenizer,
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
        self.scale = config.attention_scale or 1.0 / float(np.sqrt(float(config.head_dim)))
        #: Per kind of layer ("global", "local"): cos and sin for every position so far.
        self._ropes: dict[str, tuple[np.ndarray, np.ndarray]] = {}
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
        """Most tokens one pass takes: the context (a long text runs as a long pass)."""
        return self.config.context_length

    def records_everything(self, tokens: int) -> bool:
        """True when a pass of ``tokens`` keeps every head's scores and weights (short texts)."""
        c = self.config
        return records_everything(c.num_layers, c.num_heads, tokens)

    def layer_keys(self, index: int) -> LayerKeys:
        """How layer ``index``'s attention is recomputed: scale, soft cap, window if local."""
        c = self.config
        local = bool(c.layer_kinds) and c.layer_kinds[index] == "local"
        return LayerKeys(self.scale, c.attn_softcap, c.sliding_window if local else 0)

    def _check_ids(self, ids: list[int], what: str) -> None:
        if not ids:
            raise TextError(f"{what}: the text is empty; type at least one word.")
        if len(ids) > self.max_tokens:
            raise TextError(
                f"{what}: {len(ids):,} tokens, over this model's limit of {self.max_tokens:,} "
                "for one pass; shorten it."
            )

    @one_call_at_a_time
    def forward(
        self,
        input_ids: np.ndarray,
        cache: KVCache | None = None,
        record: bool = True,
        *,
        long: LongStats | None = None,
        progress: Callable[[float, str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> DecoderForward:
        """Run (T,) ids after the ``cache``'s positions; extend the cache; keep every head.

        With ``record`` the per-layer query (L, H, T, d), key/value (L, H_kv, T, d) of
        these tokens, scores/weights (L, H, T, t) against all t cached + new keys and the
        hidden states (L + 1, T, hidden) are returned; without it only the logits.
        ``long`` runs the long pass (``long_pass.py``, from position 0): attention by query
        blocks folded into ``long``; no scores or weights kept; the last position's logits.
        ``progress`` hears each layer end; ``should_stop()`` true then raises ``Cancelled``.
        """
        c = self.config
        if long is not None and cache is not None and cache.length:
            raise ValueError("forward: a long pass starts at position 0 (no cached tokens).")
        ids = np.asarray(input_ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0 or ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"input_ids: expected (T,) ids in 0 … {c.vocab_size - 1}.")
        start = cache.length if cache is not None else 0
        positions = np.arange(start, start + ids.size)  # (T,) absolute positions
        self.weights.read_ahead(should_stop)  # the first forward: every kept layer, now
        x = self.weights.embed(ids)  # (T, hidden)
        if c.embedding_scale != 1.0:
            x = x * np.float32(c.embedding_scale)  # Gemma: × √width
        activation = ACTIVATIONS[c.activation]
        hidden = np.empty((c.num_layers + 1 if record else 1, *x.shape), dtype=x.dtype)
        hidden[0], kept = x, list[np.ndarray]()  # q, k, v (scores, weights) (L, …) if recorded
        for index in range(c.num_layers):
            w = self.weights.layer(index)
            local = c.layer_kinds[index] == "local" if c.layer_kinds else False
            cos, sin = self._rope(start, start + ids.size, "local" if local else "global")
            q, k, v = self._qkv(rms_norm(x, w.attn_norm, c.rms_norm_eps), w, cos, sin)
            if cache is not None:
                k, v = cache.extend(index, k, v)  # (H_kv, t, d): cached and new positions
            keep = window_keep(positions, k.shape[1], c.sliding_window) if local else None
            if long is not None:  # by query blocks, each folded into the previews and sums
                if record:  # kept first: the blocks read the kept copies, and q, k, v go now
                    q, k, v = kept_layer(kept, c.num_layers, index, (q, k, v))
                keys = self.layer_keys(index)
                output = long_attention(q, k, v, keys, partial(long.fold, index, keys=keys))
                scores = weights = output[:0]  # nothing of the T × T grid is kept
            elif ids.size == 1:  # a decode step: one query row, no per-call checks
                scores, weights, output = attend_one_row(q, k, v, self.scale, keep, c.attn_softcap)
            elif c.attn_softcap:  # Gemma 2: the scaled scores soft-capped before the softmax
                scores, weights, output = self._capped_attention(q, k, v, keep)
            else:  # every query head against its shared key/value head, copied per head
                att = attention(
                    q,
                    k[self.kv_heads],
                    v[self.kv_heads],
                    causal=True,
                    mask=keep,
                    scale=c.attention_scale or True,
                )
                assert att.output is not None and att.scale == self.scale
                scores, weights, output = att.scores, att.weights, att.output
            mixed = output.transpose(1, 0, 2).reshape(ids.size, -1)  # (T, H·d)
            attended = mixed @ w.attn_output.T  # (T, H·d) @ (H·d, hidden)
            if w.post_attn_norm is not None:  # Gemma's sandwich norms
                attended = rms_norm(attended, w.post_attn_norm, c.rms_norm_eps)
            x = np.add(x, attended, out=attended)  # x + attended, into the product's array
            h = rms_norm(x, w.ffn_norm, c.rms_norm_eps)
            mlp = LongStats.feed_forward(h, w, activation, blocks=long is not None)  # (T, hidden)
            if w.post_ffn_norm is not None:
                mlp = rms_norm(mlp, w.post_ffn_norm, c.rms_norm_eps)
            x = np.add(x, mlp, out=mlp)
            if record:  # into (L, …) arrays as it goes: no list of layers stacked at the end
                hidden[index + 1] = x
                if long is None:
                    new = slice(k.shape[1] - ids.size, None)  # this pass's own keys and values
                    kept_layer(
                        kept, c.num_layers, index, (q, k[:, new], v[:, new], scores, weights)
                    )
            # The layer's temporaries go before the next layer makes its own: at 8 192 tokens
            # of SmolLM2 these names held 95 MB through the next layer's attention.
            del q, k, v, scores, weights, output, mixed, attended, h, mlp
            if progress is not None:
                progress((index + 1) / c.num_layers, f"layer {index + 1} of {c.num_layers}")
            if should_stop is not None and should_stop():
                raise Cancelled("forward pass stopped")
        if cache is not None:
            cache.advance(ids.size)
        last = x[-1:] if long is not None else x  # a long pass: the next token's logits only
        logits = self.weights.logits(rms_norm(last, self.weights.final_norm, c.rms_norm_eps))
        if c.final_softcap:
            logits = softcap(logits, c.final_softcap)
        if not record:
            return DecoderForward(logits, None, None, None, None, None, None, self.scale)
        q, k, v, *stages = kept  # a long pass keeps no scores or weights
        s, a = stages or (None, None)
        return DecoderForward(logits, hidden, q, k, v, s, a, self.scale)

    def _rope(self, start: int, end: int, kind: str = "global") -> tuple[np.ndarray, np.ndarray]:
        """cos and sin (end − start, d) for positions start … end − 1 of a ``kind`` of layer,
        from tables kept for every position so far (grown by doubling; computed per
        element, so a slice equals the table of just those positions). Local layers have
        their own base (Gemma 3) and no Llama 3 factors."""
        cos, sin = self._ropes.get(kind, (None, None))
        if cos is None or sin is None or end > cos.shape[0]:
            positions = np.arange(max(end, 2 * (0 if cos is None else cos.shape[0]), 64))
            c = self.config
            if kind == "local" and c.local_rope_theta:
                cos, sin = rope_tables(positions, c.head_dim, c.local_rope_theta)
            else:
                cos, sin = rope_tables(
                    positions, c.head_dim, c.rope_theta, self.weights.rope_factors
                )
            self._ropes[kind] = (cos, sin)
        return cos[start:end], sin[start:end]

    def _capped_attention(
        self, q: np.ndarray, k: np.ndarray, v: np.ndarray, keep: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Causal attention with Gemma 2's soft-capped logits: (H, T, d) queries against the
        (H_kv, t, d) keys and values their group shares."""
        c, t_q, t_k = self.config, q.shape[1], k.shape[1]
        scores = np.matmul(q, k[self.kv_heads].swapaxes(-1, -2))  # (H, T, t)
        capped = softcap(scores * np.float32(self.scale), c.attn_softcap)  # (H, T, t)
        causal = np.arange(t_k)[None, :] <= (np.arange(t_q) + t_k - t_q)[:, None]  # (T, t)
        weights, _ = softmax_rows(capped, keep=causal if keep is None else causal & keep)
        output = np.matmul(weights, v[self.kv_heads])  # (H, T, t) @ (H, t, d)
        return scores, weights, output

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
        if w.q_norm is not None and w.k_norm is not None:  # Qwen3: each head's q and k
            q, k = rms_norm(q, w.q_norm, c.rms_norm_eps), rms_norm(k, w.k_norm, c.rms_norm_eps)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def readable(self, ids: list[int]) -> list[str]:
        return [self.tokenizer.readable(i) for i in ids]

    @one_call_at_a_time
    def attention(
        self,
        text: str,
        text_pair: str | None = None,
        strategy: str = "batched",
        progress: Callable[[float, str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> ModelAttention:
        """Tokenize ``text``, run it, keep every layer's heads (see :class:`ModelAttention`).

        A text too long to record every head runs as a long pass (``models.long_context``).
        TextError for empty text, a second text, more tokens than :attr:`max_tokens` or a
        long pass over the free memory; ``progress``, ``should_stop`` as in :meth:`forward`.
        """
        check_unicode("text", check_text("text", text))
        if text_pair is not None:
            raise TextError("text_pair: a decoder reads one text; join the two.")
        if strategy != "batched":
            raise ValueError(f"strategy: a decoder runs 'batched' attention, not {strategy!r}.")
        ids = self.tokenizer.encode(text)
        self._check_ids(ids, "text")
        if not self.records_everything(len(ids)):
            from attn_explorer.models.long_context import long_attention

            return long_attention(self, ids, progress, should_stop)
        result = self.forward(np.array(ids), progress=progress, should_stop=should_stop)
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
            layer_kinds=self.config.layer_kinds,
            window=self.config.sliding_window,
            notes=self.notes(),
        )

    def notes(self) -> tuple[str, ...]:
        """What the view says of the weights and of the layers' attention, one line each."""
        c, lines = self.config, []
        names = [self.file.type_name(name) for name in self.file.tensors]
        kind = file_type_name(metadata_value(self.file, "general.file_type"))
        mix = quantization_mix(names)
        lines.append(f"{kind}: {mix}" if kind else f"weights: {mix}")
        if c.sliding_window:
            local = sum(k == "local" for k in c.layer_kinds)
            lines.append(
                f"{local} of {c.num_layers} layers local (window {c.sliding_window}), the rest "
                f"global; the pattern from {c.layer_pattern_source or 'the file'}."
            )
        return (*lines, *c.caveats)

    def chat_prompt(self, message: str) -> str:
        """``message`` as one user turn in the model's ChatML template, ready for its reply."""
        template = metadata_value(self.file, "tokenizer.chat_template")  # bounded text
        if "<start_of_turn>" in template:  # Gemma's turns (BOS comes from the tokenizer)
            return f"<start_of_turn>user\n{message}<end_of_turn>\n<start_of_turn>model\n"
        prompt = chatml_prompt(template, message)
        if prompt is None:
            raise ModelError(
                f"{self.path}: the chat template is not ChatML (<|im_start|>); "
                "run without chat, or choose a ChatML model."
            )
        return prompt

    @one_call_at_a_time
    def generate(
        self,
        prompt: str,
        max_new_tokens: int = 20,
        chat: bool = False,
        on_token: Callable[[int, np.ndarray], None] | None = None,
        sampling: Sampling | None = None,
    ) -> Generation:
        """Greedy decoding with a KV cache; stops at end of turn or ``max_new_tokens``.

        ``sampling`` (:class:`~attn_explorer.models.decoder.sampling.Sampling`) samples
        with temperature, top-k, top-p and a seed instead; the default is greedy.

        ``on_token(token_id, row)``, if given, hears each new token as soon as it is
        chosen, with its (L, H, 1, t) attention row; an exception it raises (a stop
        request) ends the generation and propagates.
        """
        check_text("prompt", prompt)
        if not prompt.strip() and not chat:
            raise TextError("prompt: the text is empty; type at least one word.")
        check_unicode("prompt", prompt)
        limit = LIMITS.max_tokens  # generation stops at the context anyway
        if (
            isinstance(max_new_tokens, bool)
            or not isinstance(max_new_tokens, numbers.Integral)
            or not 1 <= max_new_tokens <= limit
        ):
            raise ValueError(
                f"max_new_tokens: expected a whole number from 1 to {limit:,}, "
                f"got {max_new_tokens!r}."
            )
        max_new_tokens = int(max_new_tokens)
        ids = self.tokenizer.encode(self.chat_prompt(prompt) if chat else prompt)
        self._check_ids(ids, "prompt")
        cache = KVCache()
        if self.records_everything(len(ids)):
            first = self.forward(np.array(ids), cache)  # the prompt, every head recorded
            assert first.weights is not None
            row, logits = first.weights[:, :, -1:, :], first.logits[-1]  # (L, H, 1, t)
        else:  # a long prompt: by query blocks, only its last row's weights kept
            from attn_explorer.models.long_context import long_prompt

            row, logits = long_prompt(self, ids, cache)  # (L, H, 1, t), (vocab,)
        new: list[int] = []
        steps: list[np.ndarray] = []
        choices: list[list[tuple[int, float]]] = []
        sampler = Sampler(sampling or GREEDY)
        stopped = "max_new_tokens"
        while True:
            token = sampler.choose(logits)
            if token in self.end_ids:
                stopped = "end of turn"
                break
            new.append(token)
            steps.append(row)  # the query row that chose this token
            choices.append(top_choices(logits))
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
            choices=choices,
            sampling=sampler.sampling,
        )


def gguf_name(path: Path, file: GGUFFile) -> str:
    """A readable name: the file's stem (the metadata's names are often generic)."""
    return path.stem or str(file.get("general.name", "model"))


def load_gguf(path: str | Path, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> DecoderModel:
    """Open a GGUF decoder: header, configuration and tokenizer checked; layers on demand."""
    file = GGUFFile(Path(path).expanduser())
    config = DecoderConfig.from_gguf(file)  # every size checked against the table and tensors
    file.check_unquantized()  # NaN / ±inf weights refused here, by name
    metadata_value(file, "tokenizer.chat_template")  # checked once, read again for chat
    tokenizer: GGUFTokenizer | SentencePieceTokenizer
    if metadata_value(file, "tokenizer.ggml.model") == "llama":  # SentencePiece (Gemma)
        tokenizer = SentencePieceTokenizer.from_gguf(file)
    else:
        tokenizer = GGUFTokenizer.from_gguf(file)
    if tokenizer.vocab_size != config.vocab_size:
        raise ModelError(
            f"{file.path}: the tokenizer has {tokenizer.vocab_size:,} tokens but the model "
            f"{config.vocab_size:,}; the file is inconsistent."
        )
    weights = DecoderWeights(file, config, budget_bytes)
    return DecoderModel(file, config, tokenizer, weights, name=gguf_name(file.path, file))
