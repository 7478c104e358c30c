"""Pure-numpy multi-head attention, three ways. Never imports Qt.

Public API (documented in the README):

- ``STRATEGIES``, ``STAGES``
- ``attention_scores(query, key, strategy)`` and ``attention(...) -> AttentionResult``
- ``softmax_rows(x, factor=, keep=, out=)``: the blocked, threaded masked softmax
- ``Workspace``: work arrays ``attention(..., workspace=)`` reuses while nobody holds them
- ``multi_head_attention(x, w_query, w_key, w_value, heads, ...)``
- ``loop_trace(query, key) -> LoopTrace`` of ``LoopStep`` records
- ``macs``, ``flops``, ``estimate_loop_seconds``, ``time_strategies``, ``LOOP_BUDGET``
- ``LIMITS``, ``MAX_ABS_VALUE``, ``MAX_PASTE_CELLS``: the sizes and magnitudes accepted
"""

from attn_explorer.compute.pipeline import (
    STRATEGIES,
    AttentionResult,
    attention,
    attention_scores,
    causal_keep,
    stage_source,
)
from attn_explorer.compute.projection import (
    MultiHeadResult,
    merge_heads,
    multi_head_attention,
    split_heads,
)
from attn_explorer.compute.softmax import softmax_rows
from attn_explorer.compute.strategies import strategy_source
from attn_explorer.compute.timing import (
    LOOP_BUDGET,
    Cancelled,
    LoopBudget,
    TimingResult,
    call_counts,
    estimate_loop_seconds,
    flops,
    macs,
    time_strategies,
)
from attn_explorer.compute.trace import GRANULARITIES, LoopStep, LoopTrace, loop_trace
from attn_explorer.compute.validation import (
    LIMITS,
    MAX_ABS_VALUE,
    MAX_PASTE_CELLS,
    STAGES,
    Limits,
)
from attn_explorer.compute.workspace import Workspace

__all__ = [
    "GRANULARITIES",
    "LIMITS",
    "LOOP_BUDGET",
    "MAX_ABS_VALUE",
    "MAX_PASTE_CELLS",
    "STAGES",
    "STRATEGIES",
    "AttentionResult",
    "Cancelled",
    "Limits",
    "LoopBudget",
    "LoopStep",
    "LoopTrace",
    "MultiHeadResult",
    "TimingResult",
    "Workspace",
    "attention",
    "attention_scores",
    "call_counts",
    "causal_keep",
    "estimate_loop_seconds",
    "flops",
    "loop_trace",
    "macs",
    "merge_heads",
    "multi_head_attention",
    "softmax_rows",
    "split_heads",
    "stage_source",
    "strategy_source",
    "time_strategies",
]
