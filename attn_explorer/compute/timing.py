"""Cost model and timing of the score strategies.

Timing is a plain function with a progress callback and a stop check, so the GUI
can run it in a worker thread and cancel it, and the benchmark can run it as is.
"""

from __future__ import annotations

import math
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attn_explorer.compute.strategies import STRATEGY_FUNCTIONS, scores_loop
from attn_explorer.compute.tiled import DEFAULT_BLOCK, attention_tiled
from attn_explorer.compute.validation import check_pair, to_4d


class Cancelled(Exception):
    """Raised by long work when its stop check says stop."""


def shape_of(
    query_shape: Sequence[int], key_shape: Sequence[int]
) -> tuple[int, int, int, int, int]:
    """(B, H, T_q, T_k, d) from a query and a key shape of 2 to 4 dimensions."""
    q = (1,) * (4 - len(query_shape)) + tuple(query_shape)
    return (q[0], q[1], q[2], int(key_shape[-2]), q[3])


def macs(query_shape: Sequence[int], key_shape: Sequence[int]) -> int:
    """Multiply-adds of Q Kᵀ: B·H·T_q·T_k·d — the same for every strategy."""
    b, h, t_q, t_k, d = shape_of(query_shape, key_shape)
    return b * h * t_q * t_k * d


def flops(query_shape: Sequence[int], key_shape: Sequence[int]) -> int:
    """Floating-point operations of Q Kᵀ (a multiply-add counts as two)."""
    return 2 * macs(query_shape, key_shape)


def call_counts(query_shape: Sequence[int], key_shape: Sequence[int]) -> dict[str, str]:
    """How each strategy divides the same work, in words."""
    b, h, t_q, t_k, d = shape_of(query_shape, key_shape)
    visits = b * h * t_q * t_k
    return {
        "loop": f"{visits * d:,} multiply-adds in {visits:,} body visits",
        "matmul": f"{b * h:,} matmul call{'s' if b * h != 1 else ''} (1 per head)",
        "batched": "1 batched matmul call",
        "tiled": (
            f"{math.ceil(t_q / DEFAULT_BLOCK) * math.ceil(t_k / DEFAULT_BLOCK):,} tiles of "
            f"{DEFAULT_BLOCK}×{DEFAULT_BLOCK}, each with its softmax and @ V: the whole "
            "attention, never the T×T grid"
        ),
    }


def timed_function(name: str, dim: int) -> Callable[[np.ndarray, np.ndarray], object]:
    """What timing runs for strategy ``name`` on (B, H, T, d) query and key.

    The score strategies compute Q Kᵀ. The tiled strategy exists to never hold that grid,
    so its scores alone mean nothing: it runs the whole attention (scores, softmax and
    the output, with V = K), which does more work than the others are timed for.
    """
    if name != "tiled":
        return STRATEGY_FUNCTIONS[name]
    factor = 1.0 / math.sqrt(dim)
    return lambda q4, k4: attention_tiled(q4, k4, k4, factor, block=DEFAULT_BLOCK)


def peak_bytes(func: Callable[[], object]) -> int:
    """Bytes allocated at the peak of one call of ``func`` beyond what was held before it
    (numpy reports its arrays to tracemalloc): what a strategy holds while it runs."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        func()
        return max(0, tracemalloc.get_traced_memory()[1] - before)
    finally:
        if not was_tracing:
            tracemalloc.stop()


#: The loop strategy's memory is measured only when one call is predicted this quick
#: (tracemalloc slows each Python float it allocates).
LOOP_MEMORY_SECONDS = 0.05


_loop_seconds_per_mac: float | None = None


def loop_seconds_per_mac() -> float:
    """Calibrate the loop strategy's cost per multiply-add on a short run (cached)."""
    global _loop_seconds_per_mac
    if _loop_seconds_per_mac is None:
        # Any values time the same; numpy.random would cost the start-up ~10-20 ms to import.
        q = np.linspace(-1.0, 1.0, 24 * 16).reshape(1, 1, 24, 16)
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            scores_loop(q, q)
            best = min(best, time.perf_counter() - start)
        _loop_seconds_per_mac = best / (24 * 24 * 16)
    return _loop_seconds_per_mac


def estimate_loop_seconds(query_shape: Sequence[int], key_shape: Sequence[int]) -> float:
    """Predicted seconds for the loop strategy on these shapes (before running it)."""
    b, h, t_q, t_k, d = shape_of(query_shape, key_shape)
    per_mac = loop_seconds_per_mac()
    # body visits cost about as much as two multiply-adds on top of the MACs
    return per_mac * (b * h * t_q * t_k * (d + 2))


@dataclass(frozen=True)
class LoopBudget:
    """How long the pure-Python loop strategy may run, in predicted seconds, for each use.

    One object for every place that decides whether to run the loop, so the
    window, the command line and the timing panel agree (see the README's limits).
    """

    #: A result the user sees or exports: a slower loop is computed by ``batched`` instead
    #: (the same numbers; the panel says so).
    result: float = 3.0
    #: The background check that every strategy gives the same scores.
    agreement: float = 1.0
    #: Run on the GUI thread, within one frame of the edit.
    interactive: float = 0.02
    #: Timing a strategy: a slower loop is estimated instead of run (per call).
    timing: float = 1.0
    #: Each token count of the scaling sweep.
    sweep: float = 0.5
    #: The stepper's per-strategy timing summary.
    summary: float = 0.25

    def strategy_for(
        self, strategy: str, query_shape: Sequence[int], key_shape: Sequence[int]
    ) -> str:
        """The strategy that really computes a result: the loop only within :attr:`result`."""
        if strategy == "loop" and estimate_loop_seconds(query_shape, key_shape) > self.result:
            return "batched"
        return strategy


LOOP_BUDGET = LoopBudget()


@dataclass(frozen=True)
class TimingResult:
    """Seconds per call of one strategy on one shape."""

    strategy: str
    median: float
    minimum: float
    maximum: float
    repeats: int
    flops: int
    estimated: bool = False
    #: Peak bytes one call allocates (see :func:`peak_bytes`); NaN when not measured.
    peak_bytes: float = float("nan")

    @property
    def gflops(self) -> float:
        """Achieved GFLOP/s at the median time."""
        return self.flops / self.median / 1e9 if self.median > 0 else float("inf")


def time_strategies(
    query: object,
    key: object,
    strategies: Sequence[str] = ("loop", "matmul", "batched", "tiled"),
    *,
    repeats: int = 5,
    warmup: int = 1,
    loop_budget: float = LOOP_BUDGET.timing,
    min_seconds: float = 0.05,
    memory: bool = True,
    progress: Callable[[float, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, TimingResult]:
    """Time each strategy: ``warmup`` unmeasured calls, then ``repeats`` measured ones.

    A loop predicted to take longer than ``loop_budget`` seconds per call is not
    run: its result is the estimate, marked ``estimated=True``. Fast calls are
    repeated until ``min_seconds`` elapse so the median is not timer noise.
    ``progress(fraction, message)`` is called between calls; ``should_stop()``
    returning True raises :class:`Cancelled`. ``memory`` measures each strategy's
    peak bytes in one more, untimed call (:attr:`TimingResult.peak_bytes`).
    """
    unknown = [name for name in strategies if name not in STRATEGY_FUNCTIONS]
    if unknown:
        raise ValueError(
            f"strategies: unknown strategy {unknown[0]!r}; choose from "
            f"{', '.join(STRATEGY_FUNCTIONS)}."
        )
    for name, count, low in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < low:
            raise ValueError(f"{name}: expected a whole number ≥ {low}, got {count!r}.")
    # loop_budget may be inf (always run the loop); min_seconds may not (it would never stop)
    for name, seconds, most in (
        ("min_seconds", min_seconds, 3600.0),
        ("loop_budget", loop_budget, float("inf")),
    ):
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float | np.integer | np.floating)
            or not 0 <= seconds <= most  # also False for NaN
        ):
            raise ValueError(f"{name}: expected seconds from 0 to {most:g}, got {seconds!r}.")
    q, k = check_pair(query, key)
    q4, k4 = to_4d(q), to_4d(k)
    total_flops = flops(q.shape, k.shape)
    results: dict[str, TimingResult] = {}
    steps = len(strategies) * (warmup + repeats)
    done = 0

    def tick(message: str) -> None:
        nonlocal done
        done += 1
        if should_stop is not None and should_stop():
            raise Cancelled("timing cancelled")
        if progress is not None:
            progress(done / steps, message)

    for name in strategies:
        func = timed_function(name, q4.shape[-1])
        if name == "loop":
            eta = estimate_loop_seconds(q.shape, k.shape)
            if eta > loop_budget:
                results[name] = TimingResult(name, eta, eta, eta, 0, total_flops, estimated=True)
                done += warmup + repeats
                continue
        for _ in range(warmup):
            func(q4, k4)
            tick(f"{name}: warm-up")
        samples = []
        for _ in range(repeats):
            calls = 0
            start = time.perf_counter()
            while True:
                func(q4, k4)
                calls += 1
                elapsed = time.perf_counter() - start
                if elapsed >= min_seconds or name == "loop":
                    break
                if should_stop is not None and should_stop():
                    raise Cancelled("timing cancelled")
            samples.append(elapsed / calls)
            tick(f"{name}: run {len(samples)} of {repeats}")
        held = float("nan")
        if memory and (
            name != "loop" or estimate_loop_seconds(q.shape, k.shape) <= LOOP_MEMORY_SECONDS
        ):
            held = float(peak_bytes(lambda: func(q4, k4)))  # noqa: B023 (run at once)
        results[name] = TimingResult(
            name,
            statistics.median(samples),
            min(samples),
            max(samples),
            repeats,
            total_flops,
            peak_bytes=held,
        )
    return results


#: The token counts of the scaling sweep.
SWEEP_TOKENS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)


def sweep_tokens(
    heads: int,
    dim: int,
    tokens: Sequence[int] = SWEEP_TOKENS,
    *,
    loop_budget: float = LOOP_BUDGET.sweep,
    progress: Callable[[float, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, list[Any]]:
    """Time every strategy on random float32 inputs at each T of ``tokens`` (H, d fixed).

    Returns ``{"tokens": [...], "loop": [...], "matmul": [...], "batched": [...],
    "tiled": [...], "loop_estimated": [...]}`` with median seconds (a loop over
    ``loop_budget`` is estimated), and ``"<strategy>_bytes"`` lists of peak bytes held
    (NaN where not measured).
    """
    rng = np.random.default_rng(0)
    out: dict[str, list[Any]] = {"tokens": [], "loop_estimated": []}
    out.update({name: [] for name in STRATEGY_FUNCTIONS})
    out.update({f"{name}_bytes": [] for name in STRATEGY_FUNCTIONS})
    for n, t in enumerate(tokens):
        if should_stop is not None and should_stop():
            raise Cancelled("sweep cancelled")
        q = rng.standard_normal((1, heads, t, dim)).astype(np.float32)
        k = rng.standard_normal((1, heads, t, dim)).astype(np.float32)
        res = time_strategies(
            q,
            k,
            tuple(STRATEGY_FUNCTIONS),
            repeats=3,
            warmup=1,
            loop_budget=loop_budget,
            min_seconds=0.01,
            should_stop=should_stop,
        )
        out["tokens"].append(t)
        for name in STRATEGY_FUNCTIONS:
            out[name].append(res[name].median)
            out[f"{name}_bytes"].append(res[name].peak_bytes)
        out["loop_estimated"].append(res["loop"].estimated)
        if progress is not None:
            progress((n + 1) / len(tokens), f"T = {t}")
    return out
