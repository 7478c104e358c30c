"""Headless export of a real model's attention: the work behind ``attn-explorer export --model``.

``run_model_export(folder, text, out_dir, fmt)`` loads the model, runs the sentence
and writes ``out_dir/<name>.npz`` (every array plus ``tokens``) or
``out_dir/<name>.png`` (the model view: a layers × heads montage of attention
heatmaps, a :class:`~attn_explorer.state.views.figure.Figure` painted by the same
:mod:`attn_explorer.render.figure` as every heatmap export). ``run_head_export``
writes one head of one layer instead: ``out_dir/<name>_layer<L>_head<H>_<stage>.npz``
holding that (T × T) float32 array and ``input_ids``. ``read_text_file`` reads a
``--text-file`` as UTF-8, exactly as written. Qt is imported only inside
the PNG path, so this module and the rest of ``attn_explorer.models`` stay free of Qt.
Both are written atomically (``state.files.write_atomic``): a failed write, on a
full disk say, leaves the previous file as it was.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.typing import ArrayLike

from attn_explorer.models.decoder import long_pass
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.decoder.long_pass import MAX_RECORD_BYTES
from attn_explorer.models.errors import LimitError, Refusal, check_text
from attn_explorer.models.loading import AnyModel, load_model
from attn_explorer.models.results import ModelAttention
from attn_explorer.models.session import shown_values
from attn_explorer.state.storage.export import DEFAULT_WIDTH
from attn_explorer.state.storage.safe_files import write_atomic, write_atomic_with
from attn_explorer.state.views.figure import Figure, Panel

FORMATS = ("npz", "png")

#: Stages one head can be exported as (the arrays a model run keeps per head).
HEAD_STAGES = ("weights", "scores")

#: Longest file stem of an export (file systems allow 255 bytes per name).
MAX_EXPORT_STEM = 100


def export_name(result: ModelAttention) -> str:
    """File stem for an export: the model's name made safe for a file system, and short."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", result.model_name)[:MAX_EXPORT_STEM]
    return stem.strip("._") or "model"


def write_npz(result: ModelAttention, path: Path, text: str, text_pair: str | None) -> Path:
    """Every array of ``result`` plus ``tokens`` and the summaries, as an uncompressed .npz.

    Streamed into a temporary file next to ``path`` and renamed over it.
    """
    summaries = result.summaries()
    arrays: dict[str, ArrayLike] = {
        "tokens": np.array(result.tokens, dtype=str),
        "input_ids": result.input_ids,
        "token_type_ids": result.token_type_ids,
        "query": result.query,
        "key": result.key,
        "value": result.value,
        "scores": result.scores,
        "weights": result.weights,
        "hidden_states": result.hidden_states,
        "last_hidden_state": result.last_hidden_state,
        "entropy": summaries.entropy,
        "cls": summaries.cls,
        "sep": summaries.sep,
        "previous": summaries.previous,
        "scale": np.float32(result.scale),
        "truncated": np.bool_(result.truncated),
        "model_name": np.array(result.model_name),
        "text": np.array(text),
        "text_pair": np.array(text_pair or ""),
    }
    if result.logits is not None:  # a decoder: its next-token scores and shared heads
        arrays["logits"] = result.logits
    if result.kv_heads is not None:
        arrays["kv_heads"] = result.kv_heads
    return write_atomic_with(path, lambda stream: np.savez(stream, allow_pickle=False, **arrays))


def montage_figure(result: ModelAttention, values: str = "weights") -> Figure:
    """The model view as a figure: rows of panels = layers, columns = heads, one heatmap each.

    Each heatmap has rows = query token i and columns = key token j; ``values`` is
    ``"weights"`` (viridis, 0 → 1) or ``"scores"`` (raw Q·Kᵀ, diverging about 0 over
    the range of every head). Painted by :func:`attn_explorer.render.figure.render_png`,
    like every exported heatmap.
    """
    shown = shown_values(result, scores=values == "scores")  # the model view's colours
    low, high = shown.levels
    n_layers, n_heads = shown.values.shape[:2]
    panels = [
        Panel("", np.asarray(shown.values[layer, head], dtype=np.float64), low, high)
        for layer in range(n_layers)
        for head in range(n_heads)
    ]
    tokens = " ".join(result.tokens)
    return Figure(
        title=f"{result.model_name} · {shown.label} · rows = query i, columns = key j",
        stage="weights" if values == "weights" else "scores",
        colormap=shown.colormap,
        row_labels=list(result.tokens),
        col_labels=list(result.tokens),
        x_label="key j",
        panels=panels,
        shared_scale=True,
        columns=n_heads,
        token_labels=False,
        row_titles=tuple(f"layer {layer + 1}" for layer in range(n_layers)),
        column_titles=tuple(f"head {head + 1}" for head in range(n_heads)),
        subtitle=("[truncated] " if result.truncated else "") + tokens,
    )


def run_model_export(
    folder: str | Path,
    text: str,
    out_dir: str | Path,
    fmt: str,
    text_pair: str | None = None,
    *,
    strategy: str = "batched",
    values: str = "weights",
    width: int = DEFAULT_WIDTH,
) -> list[Path]:
    """Run ``text`` (and ``text_pair``) through the model in ``folder`` and write ``fmt`` files.

    ``fmt`` is ``"npz"`` (arrays + tokens) or ``"png"`` (the model view; ``values``
    chooses weights or raw scores). Returns the paths written. Raises ``ModelError``
    for a bad folder, ``TextError`` for bad text (both ``ValueError``; a decoder's text
    too long to keep every head for an .npz is a ``LimitError`` before the pass), ``ValueError``
    for an unknown format and ``OSError`` when a file cannot be written (the
    previous file is then unchanged).
    """
    if fmt not in FORMATS:
        raise Refusal("format", f"{fmt!r} is not one of {', '.join(FORMATS)} for a model export")
    if values not in ("weights", "scores"):
        raise Refusal("values", f"{values!r}", "choose 'weights' or 'scores'")
    check_text("text", text)  # before the model is loaded
    check_text("text_pair", text_pair, optional=True)
    model = load_model(folder)
    if fmt == "npz":
        check_every_head_fits(model, text)  # before the pass, which would hold none of them
    result = model.attention(text, text_pair, strategy=strategy)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{export_name(result)}.{fmt}"
    if fmt == "npz":
        return [write_npz(result, path, text, text_pair)]
    from attn_explorer.render.figure import render_png  # Qt only on the PNG path

    return [write_atomic(path, render_png(montage_figure(result, values), width))]


def longest_full_text(layers: int, heads: int) -> int:
    """Most tokens whose every head's (T × T) scores and weights one pass keeps."""
    return int((MAX_RECORD_BYTES / (layers * heads * 8)) ** 0.5)


def check_every_head_fits(model: AnyModel, text: str) -> None:
    """LimitError, before any pass, when ``text`` is too long for a decoder to keep every
    head's scores and weights (it then runs as a long pass, which keeps none of them):
    the .npz of every head cannot be written, one head at a time can."""
    if not isinstance(model, DecoderModel):
        return  # an encoder truncates to its positions, far under the limit
    tokens = len(model.tokenizer.encode(text))
    if model.records_everything(tokens):
        return
    layers, heads = model.config.num_layers, model.config.num_heads
    longest = longest_full_text(layers, heads)
    size = layers * heads * tokens * tokens * 8  # scores and weights, float32
    raise LimitError(
        "text",
        f"{tokens:,} tokens are too many to export every head: the scores and weights of "
        f"{layers} layers × {heads} heads would take {size / 1e9:.1f} GB, over the "
        f"{MAX_RECORD_BYTES / 1e9:.1f} GB one pass keeps (at most {longest:,} tokens)",
        "export one head with run_head_export(layer=, head=), the montage with fmt='png', "
        f"or a text of at most {longest:,} tokens",
        value=tokens,
        expected=longest,
        hints={
            "cli": f"export one head with --layer L --head H (L from 1 to {layers}, H from 1 "
            f"to {heads}), every head as a picture with --format png, or a text of at most "
            f"{longest:,} tokens",
        },
    )


def read_text_file(path: str | Path) -> str:
    """The text of ``path`` decoded as UTF-8 exactly as written: no stripping, no newline
    added or removed. ValueError, with the byte offset, when it is not UTF-8; OSError when
    it cannot be read."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: is not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x}); "
            "save it as UTF-8"
        ) from None


def _check_stage(stage: str) -> None:
    if stage not in HEAD_STAGES:
        raise Refusal(
            "stage",
            f"one head exports as {' or '.join(HEAD_STAGES)}",
            value=stage,
            quote_value=True,
        )


#: Rows of one head computed and written at a time by :func:`write_head_npz` (at 8 192
#: tokens, 8 MB: the (T × T) head itself, 268 MB there, is never held). A whole number
#: of the long pass's query blocks, so that a long text's head is recomputed in the same
#: blocks of rows as when it is read whole (``HeadStack.rows``): the same numbers.
HEAD_ROWS = 4 * long_pass.QUERY_BLOCK


def _check_head(result: ModelAttention, layer: int, head: int, stage: str) -> None:
    """Refusal naming ``layer`` or ``head`` (from 1) when the model has none such, or ``stage``."""
    n_layers, n_heads = result.weights.shape[:2]
    for name, number, count in (("layer", layer, n_layers), ("head", head, n_heads)):
        if not 1 <= number <= count:
            raise Refusal(
                name, f"the model has {name}s 1 to {count}", value=number, quote_value=True
            )
    _check_stage(stage)


def head_rows(
    result: ModelAttention, layer: int, head: int, stage: str, start: int, stop: int
) -> np.ndarray:
    """Rows ``start`` … ``stop`` − 1 of one head (layer and head from 1): (rows, T) float32.

    A long text's head is recomputed for just these rows (``HeadStack``). A decoder's
    weights are exactly 0 above the diagonal (a hidden key's weight), whatever rounding did.
    """
    values = result.weights if stage == "weights" else result.scores
    rows = np.array(values[layer - 1, head - 1, start:stop], dtype=np.float32)  # a copy
    if stage == "weights" and result.causal:
        later = np.arange(rows.shape[1])[None, :] > np.arange(start, stop)[:, None]
        rows[later] = 0.0
    return rows


def head_array(result: ModelAttention, layer: int, head: int, stage: str) -> np.ndarray:
    """One (T × T) float32 array of ``result``: ``stage`` of ``layer`` and ``head`` (from 1).

    A decoder's weights are exactly 0 above the diagonal (a hidden key's weight).
    """
    _check_head(result, layer, head, stage)
    return head_rows(result, layer, head, stage, 0, result.weights.shape[-1])


def write_head_npz(
    stream: BinaryIO, result: ModelAttention, layer: int, head: int, stage: str
) -> None:
    """One head as an uncompressed .npz on ``stream``: ``stage`` (T × T float32) and
    ``input_ids`` (T,), as ``np.savez`` writes them, the head HEAD_ROWS rows at a time.

    ``np.load`` reads it as it reads a ``savez`` file: the same zip entries
    (``<name>.npy``, stored, zip64) holding the same ``.npy`` header and bytes.
    """
    _check_head(result, layer, head, stage)
    t = result.weights.shape[-1]
    with zipfile.ZipFile(stream, mode="w", compression=zipfile.ZIP_STORED) as archive:
        with archive.open(f"{stage}.npy", mode="w", force_zip64=True) as entry:
            header = {"descr": "<f4", "fortran_order": False, "shape": (t, t)}
            np.lib.format.write_array_header_1_0(entry, header)
            step = -(-HEAD_ROWS // long_pass.QUERY_BLOCK) * long_pass.QUERY_BLOCK
            for start in range(0, t, step):
                rows = head_rows(result, layer, head, stage, start, min(start + step, t))
                entry.write(rows.astype("<f4", copy=False).tobytes())
        with archive.open("input_ids.npy", mode="w", force_zip64=True) as entry:
            np.lib.format.write_array(entry, np.asarray(result.input_ids, dtype=np.int64))


def run_head_export(
    folder: str | Path,
    text: str,
    out_dir: str | Path,
    *,
    layer: int,
    head: int,
    stage: str = "weights",
    fmt: str = "npz",
) -> list[Path]:
    """Run ``text`` through the model in ``folder`` and write one head as one ``.npz``.

    The file holds ``stage`` (``weights`` or ``scores``, T × T float32, rows = query i,
    columns = key j) of ``layer`` and ``head`` (both from 1) and ``input_ids`` (T,).
    Returns ``[path]``. Raises ValueError for a bad folder, text, layer, head, stage or
    format before anything is written, and OSError when the file cannot be written.
    """
    if fmt != "npz":
        raise Refusal("format", f"one head exports as npz, not {fmt!r}")
    _check_stage(stage)
    check_text("text", text)
    result = load_model(folder).attention(text)
    _check_head(result, layer, head, stage)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{export_name(result)}_layer{layer}_head{head}_{stage}.npz"
    return [
        write_atomic_with(path, lambda stream: write_head_npz(stream, result, layer, head, stage))
    ]
