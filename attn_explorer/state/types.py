"""The session's value types: options, snapshots, presets, and how numbers are read and written.

Qt-free, and free of the session itself, so presets, file formats and the
stepper can use them without importing :mod:`attn_explorer.state.session`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from attn_explorer.compute import GRANULARITIES, STAGES, STRATEGIES
from attn_explorer.compute.tiled import DEFAULT_BLOCK, MAX_BLOCK, MIN_BLOCK
from attn_explorer.compute.validation import LIMITS, MAX_ABS_VALUE
from attn_explorer.state.colormaps import COLORMAPS

#: The name of a session that has no file (New, a preset, a lesson, a model head).
UNTITLED = "untitled"
MATRICES = ("query", "key", "value")
MATRIX_LETTER = {"query": "Q", "key": "K", "value": "V"}
FILL_MODES = ("zero", "random")
DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class Options:
    """Everything about how the session is computed and shown, except the numbers."""

    strategy: str = "batched"
    stage: str = "scores"
    scale: bool = True
    causal: bool = False
    shared_scale: bool = True
    score_colormap: str = "diverging"
    weight_colormap: str = "sequential"
    batch_index: int = 0
    head: int = 0
    dtype: str = "float64"
    fill: str = "random"  # new cells visible in a heatmap, unlike zeros
    seed: int = 0
    granularity: str = "multiply-add"
    step: int = -1
    predict: bool = False
    #: Query rows and key columns of one tile of the tiled strategy.
    block: int = DEFAULT_BLOCK
    #: A sliding window of this many keys on the causal mask (0 = none): query i sees
    #: keys i − w + 1 … i. It acts only while ``causal`` is on (see :attr:`mask_window`).
    window: int = 0

    @property
    def mask_window(self) -> int | None:
        """The window the computation uses: ``window`` while causal is on, else None."""
        return self.window if self.causal and self.window > 0 else None

    def colormap_for(self, stage: str) -> str:
        """The colour map ``stage`` is drawn with: sequential (0..1) for the softmax
        weights, diverging centred at 0 for every kind of score."""
        return self.weight_colormap if stage == "weights" else self.score_colormap

    def validate(self, batch: int, heads: int) -> None:
        """Raise ValueError naming the first invalid option."""
        choices = {
            "strategy": STRATEGIES,
            "stage": STAGES,
            "fill": FILL_MODES,
            "dtype": DTYPES,
            "granularity": GRANULARITIES,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name}: {getattr(self, name)!r} is not one of {', '.join(allowed)}."
                )
        for name in ("score_colormap", "weight_colormap"):
            if getattr(self, name) not in COLORMAPS:
                raise ValueError(
                    f"{name}: {getattr(self, name)!r} is not one of {', '.join(COLORMAPS)}."
                )
        # Types matter: head=1.5 passes a range check but breaks indexing later, and
        # causal="no" is truthy.
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "bool" and not isinstance(value, bool | np.bool_):
                raise ValueError(f"{f.name}: expected True or False, got {value!r}.")
            if f.type == "int" and (
                isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral)
            ):
                raise ValueError(f"{f.name}: expected a whole number, got {value!r}.")
        if not MIN_BLOCK <= self.block <= MAX_BLOCK:
            raise ValueError(f"block: {self.block} is outside {MIN_BLOCK}..{MAX_BLOCK}.")
        if not 0 <= self.window <= LIMITS.max_tokens:
            raise ValueError(
                f"window: {self.window} is outside 0..{LIMITS.max_tokens} (0 = no window)."
            )
        if self.seed < 0:
            raise ValueError(f"seed: {self.seed} is negative; use 0 or more.")
        if self.step < -1:
            raise ValueError(f"step: {self.step} is before the first step (-1).")
        if not 0 <= self.batch_index < batch:
            raise ValueError(f"batch_index: {self.batch_index} is outside 0..{batch - 1}.")
        if not 0 <= self.head < heads:
            raise ValueError(f"head: {self.head} is outside 0..{heads - 1}.")


@dataclass(frozen=True)
class Snapshot:
    """The numbers and names of a session at one moment (for undo and presets)."""

    tokens: tuple[str, ...]
    query: np.ndarray
    key: np.ndarray
    value: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(B, H, T, d)."""
        b, h, t, d = self.query.shape
        return b, h, t, d


def parse_number(text: str, *, max_abs: float | None = None) -> float:
    """A float typed by the user, in C locale, at full precision; ValueError otherwise.

    Accepts ``1``, ``-2.5``, ``1e-3``, ``.5``; rejects text, NaN and ±inf with a
    message saying what to type instead, and with ``max_abs`` (for a cell:
    ``MAX_ABS_VALUE``) any number larger in magnitude, naming that limit.
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("the cell is empty; type a number such as 0 or 1.5")
    try:
        # Python's float() also takes "1_000" and non-ASCII digits; the C locale does not.
        if "_" in stripped or not stripped.isascii():
            raise ValueError(stripped)
        value = float(stripped)
    except ValueError:
        hint = " (use a dot as the decimal separator)" if "," in stripped else ""
        raise ValueError(f"{stripped!r} is not a number{hint}; type a number such as 1.5") from None
    if math.isnan(value):
        raise ValueError("NaN is not allowed; type a finite number")
    if math.isinf(value):
        raise ValueError(f"{stripped!r} is infinite; type a finite number")
    if max_abs is not None and abs(value) > max_abs:
        raise ValueError(
            f"{stripped!r} is over the limit of ±{max_abs:g}; type a number from "
            f"-{max_abs:g} to {max_abs:g}"
        )
    return value


def cell_label(matrix: str, index: Sequence[int], tokens: Sequence[str], batches: int = 1) -> str:
    """How the user sees a cell of a (B, H, T, d) tensor, numbered from 1:
    ``Q[t2, d1] (head 1)``, with the batch entry when there is more than one."""
    b, h, t, d = index
    token = tokens[t] if 0 <= t < len(tokens) else f"row {t + 1}"
    where = f"batch {b + 1}, head {h + 1}" if batches > 1 else f"head {h + 1}"
    return f"{MATRIX_LETTER[matrix]}[{token}, d{d + 1}] ({where})"


def out_of_range(value: float) -> str:
    """Why a value is refused: not finite, or over ``MAX_ABS_VALUE``."""
    if not math.isfinite(value):
        return f"{value} is not a finite number"
    return f"{value!r} is over the limit of ±{MAX_ABS_VALUE:g} (larger values overflow the scores)"


def default_tokens(count: int, start: int = 1) -> list[str]:
    """Token names ``t<start>`` … for ``count`` new tokens, as the explorer names them."""
    return [f"t{n}" for n in range(start, start + count)]


@dataclass(frozen=True)
class Preset:
    """A named starting point: numbers, names and options."""

    name: str
    title: str
    description: str
    snapshot: Snapshot
    options: Options = field(default_factory=Options)
    #: A query (0-based) the preset is about: the window opens the vectors view on it.
    vectors_query: int | None = None


def number_list(numbers: Sequence[int]) -> str:
    """1-based head numbers as a reader writes them: ``4–6`` for a run, else ``1, 4, 7``."""
    values = sorted(numbers)
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}–{values[-1]}"
    return ", ".join(str(n) for n in values)


@dataclass(frozen=True)
class HeadSource:
    """Where a taken head's Q, K and V came from: a real model's layer and query head, and
    the key/value head its K and V are (grouped-query attention shares one among several
    query heads). Indices count from 0; the text counts from 1, as the Model dock does.

    The document keeps it beside its name (:attr:`Document.source`); it describes the
    explorer's inputs only while they still have the taken head's shape and tokens.
    """

    model: str
    layer: int
    query_head: int
    kv_head: int
    #: Every query head that reads ``kv_head`` (just ``query_head`` without sharing).
    shared_by: tuple[int, ...]
    tokens: tuple[str, ...]
    d_head: int

    @property
    def grouped(self) -> bool:
        """True when K and V are a key/value head other query heads read too."""
        return self.shared_by != (self.query_head,) or self.kv_head != self.query_head

    def describes(self, tokens: Sequence[str], shape: tuple[int, int, int, int]) -> bool:
        """The inputs are still this head's: one head, d_head columns, the same tokens."""
        return shape[1] == 1 and shape[3] == self.d_head and tuple(tokens) == self.tokens

    def head_name(self) -> str:
        """``layer 5 query head 6`` (``layer 1 head 1`` when no head shares its keys)."""
        what = "query head" if self.grouped else "head"
        return f"layer {self.layer + 1} {what} {self.query_head + 1}"

    def kv_text(self) -> str:
        """``K, V: key/value head 2, shared by query heads 4–6``; empty without sharing."""
        if not self.grouped:
            return ""
        others = [h + 1 for h in self.shared_by]
        shared = f", shared by query heads {number_list(others)}" if len(others) > 1 else ""
        return f"K, V: key/value head {self.kv_head + 1}{shared}"

    def short_title(self) -> str:
        """A heatmap's title: ``layer 5 query head 6 · K, V: head 2``."""
        kv = f" · K, V: head {self.kv_head + 1}" if self.grouped else ""
        return self.head_name() + kv

    def describe(self) -> str:
        """The whole provenance in one line: model, layer, query head and KV head."""
        kv = self.kv_text()
        return f"{self.model} {self.head_name()}" + (f" ({kv})" if kv else "")

    def as_dict(self) -> dict[str, object]:
        """JSON-ready metadata for exports, numbered from 1 like the text."""
        return {
            "model": self.model,
            "layer": self.layer + 1,
            "query_head": self.query_head + 1,
            "kv_head": self.kv_head + 1,
            "kv_shared_by_query_heads": [h + 1 for h in self.shared_by],
            "tokens": len(self.tokens),
            "d_head": self.d_head,
            "text": self.describe(),
        }


def head_label(head: int, source: HeadSource | None) -> str:
    """What views call explorer head ``head`` (from 0): ``head 2``, or for a taken model
    head (the only head) where it came from (:meth:`HeadSource.short_title`)."""
    return source.short_title() if source is not None and head == 0 else f"head {head + 1}"
