"""The words and code lines the stepper shows: counters, working, locals, summaries.

Pure functions of the trace and a :class:`~attn_explorer.state.views.frame.Frame`, so
the panel stays thin and the texts are tested without Qt.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attn_explorer.compute import LoopTrace, TimingResult, call_counts, strategy_source
from attn_explorer.state.formatting import format_number, format_seconds

if TYPE_CHECKING:
    from attn_explorer.state.views.frame import Frame


def describe(
    trace: LoopTrace,
    strategy: str,
    granularity: str,
    cursor: int,
    index: int,
    count: int,
    token: Callable[[int], str],
) -> tuple[str, dict[str, Any]]:
    """The counter text and the Frame fields (step, cell, head, batch, working) at ``cursor``.

    e.g. ``multiply-add 7 of 18 · cell (t2, t1) · head 1 of 1`` and ``0·1 = 0``;
    ``token(i)`` names token i.
    """
    batches, heads, t_q, t_k, d = trace.shape
    fields_: dict[str, Any] = {}
    if cursor >= 0 and strategy == "loop":
        step = trace.step(cursor)
        where = f"head {step.head + 1} of {heads}"
        if batches > 1:
            where += f" · batch {step.batch + 1} of {batches}"
        pair = f"({token(step.i)}, {token(step.j)})"
        what = {
            "multiply-add": f"multiply-add {index + 1} of {count} · cell {pair}",
            "cell": f"cell {index + 1} of {count} · {pair}",
            "row": f"row {index + 1} of {count} · query {token(step.i)}",
            "head": f"head {index + 1} of {count} · {t_q * t_k * d:,} multiply-adds",
        }[granularity]
        counter = what if granularity == "head" else f"{what} · {where}"
        fields_ = {
            "step": step,
            "cell": (step.batch, step.head, step.i, step.j),
            "head": step.head,
            "batch": step.batch,
            "working": trace.working(cursor),
        }
    elif cursor >= 0 and strategy == "matmul":
        batch, head = divmod(index, heads)
        per_head = f"head {head + 1} of {heads}"
        if batches > 1:
            per_head += f" · batch {batch + 1} of {batches}"
        counter = f"matmul call {index + 1} of {count} · {per_head} · 1 matmul call per head"
        fields_ = {
            "head": head,
            "batch": batch,
            "working": f"S[head {head + 1}] = Q Kᵀ: ({t_q}×{d}) @ ({d}×{t_k}) → {t_q}×{t_k}",
        }
    elif cursor >= 0 and strategy == "tiled":
        counter = "tiled: every tile done · step its key blocks in the tiled read-out below"
        fields_ = {"working": "output = O / ℓ for every query block (no T×T grid held)"}
    elif cursor >= 0:
        n = batches * heads
        counter = f"batched call 1 of 1 · all {n} head{'s' if n != 1 else ''} in one call"
        fields_ = {
            "working": (
                f"S = Q Kᵀ, every head: ({batches}, {heads}, {t_q}, {d}) @ "
                f"({batches}, {heads}, {d}, {t_k}) → ({batches}, {heads}, {t_q}, {t_k})"
            )
        }
    else:
        unit = {"all": "batched call", "head": "head"}.get(granularity, granularity)
        if strategy == "matmul":
            unit = "matmul call"
        counter = f"{unit} 0 of {count} · nothing computed yet"
    return counter, fields_


@functools.cache
def _code_line(strategy: str, needle: str) -> int:
    # cached: reading the source with inspect costs more than a whole step
    lines = strategy_source(strategy).splitlines()
    return next(n for n, line in enumerate(lines) if needle in line)


def code_lines(frame: Frame | None) -> tuple[int | None, int | None]:
    """Lines of ``strategy_source(frame.strategy)`` to highlight: (just ran, also finished).

    During multiply-add steps the loop's innermost ``total += ...`` line ran; when
    that step completes a cell, ``scores[i][j] = total`` is the second line. At
    coarser loop granularities each step ends on the store line. Matmul and
    batched highlight their matmul line.
    """
    if frame is None or frame.index < 0:
        return None, None
    if frame.strategy == "matmul":
        return _code_line("matmul", " @ "), None
    if frame.strategy == "batched":
        return _code_line("batched", "np.matmul"), None
    if frame.strategy == "tiled":
        return _code_line("tiled", "acc += p @"), None
    store = _code_line("loop", "scores[i][j] = total")
    if frame.granularity == "multiply-add":
        complete = frame.step is not None and frame.step.cell_complete
        return _code_line("loop", "total +="), store if complete else None
    return store, None


def frame_locals(frame: Frame | None) -> list[tuple[str, str]]:
    """The loop variables at this frame, like a debugger's locals: [(name, value), ...]."""
    if frame is None or frame.index < 0:
        return []
    step = frame.step
    if frame.strategy == "loop" and step is not None:
        return [
            ("b", str(step.batch)),
            ("h", str(step.head)),
            ("i", str(step.i)),
            ("j", str(step.j)),
            ("d", str(step.d)),
            ("Q[i][d]", format_number(step.q_value)),
            ("K[j][d]", format_number(step.k_value)),
            ("total", format_number(step.partial_sum)),
        ]
    b, h, t_q, t_k = frame.filled.shape
    if frame.strategy == "matmul":
        return [
            ("b", str(frame.batch)),
            ("h", str(frame.head)),
            ("scores[b, h]", f"{t_q}×{t_k} filled"),
        ]
    return [("scores", f"({b}, {h}, {t_q}, {t_k}) filled")]


def summary_text(query_shape: tuple[int, ...], key_shape: tuple[int, ...]) -> str:
    """How each strategy divides the same work, e.g.
    ``loop: 18 multiply-adds in 9 body visits · matmul: 1 call per head · batched: 1 call``."""
    counts = call_counts(query_shape, key_shape)
    calls = query_shape[0] * query_shape[1]
    matmul = "1 call per head" + (f" ({calls:,} calls)" if calls != 1 else "")
    return f"loop: {counts['loop']} · matmul: {matmul} · batched: 1 call"


def timing_text(results: dict[str, TimingResult]) -> str:
    """``measured: loop 9.1 µs · matmul 1.2 µs · batched 2 µs`` (``≈`` marks an estimate)."""
    parts = [
        f"{name} {'≈' if r.estimated else ''}{format_seconds(r.median)}"
        for name, r in results.items()
    ]
    return "measured per call: " + " · ".join(parts)
