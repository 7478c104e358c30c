"""What an exported heatmap figure shows, as data: panels of values, titles, labels, ranges.

Qt-free. :func:`build_figure` collects one head or a montage of heads of one
stage, ranged exactly as the window shows them; :mod:`attn_explorer.render.figure`
lays a :class:`Figure` out and paints it as PNG or SVG.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attn_explorer.state.colormaps import head_ranges, heads_extremes
from attn_explorer.state.labels import STAGE_NAMES
from attn_explorer.state.storage.export import Exported, column_labels, stage_array
from attn_explorer.state.types import head_label


@dataclass(frozen=True)
class Panel:
    """One heatmap: its title, its (rows, columns) values and its colour range."""

    title: str
    values: np.ndarray
    low: float
    high: float


@dataclass(frozen=True)
class Figure:
    """Everything a heatmap figure shows; built by :func:`build_figure`, painted by render_*."""

    title: str
    stage: str
    colormap: str
    row_labels: list[str]
    col_labels: list[str]
    x_label: str
    panels: list[Panel]
    shared_scale: bool
    columns: int
    #: Token names beside and under every panel, with the axis names (off for a montage of
    #: many small panels, where the rows and columns of panels have titles instead).
    token_labels: bool = True
    #: Titles of the rows and the columns of panels (a layers × heads montage), or none.
    row_titles: tuple[str, ...] = ()
    column_titles: tuple[str, ...] = ()
    #: A second line under the title (a model montage's tokens).
    subtitle: str = ""

    @property
    def masked(self) -> bool:
        return any(not np.isfinite(p.values).all() for p in self.panels)


def build_figure(exported: Exported, stage: str, heads: Sequence[int]) -> Figure:
    """The figure of ``heads`` of the selected batch at ``stage``, ranged as on screen,
    titled with the document's name."""
    session = exported.session
    options = session.options
    batch = options.batch_index
    data = stage_array(exported, stage)[batch]  # (H, T, T) or output (H, T, d_v)
    cmap = options.colormap_for(stage)
    # Over every head, not just those exported: the window's ranges.
    ranges = head_ranges(heads_extremes(data), stage, cmap, options.shared_scale)
    panels = []
    source = exported.document.source  # a taken model head names its layer and KV head
    for head in heads:
        values = np.asarray(data[head], dtype=np.float64)
        panels.append(Panel(head_label(head, source), values, *ranges[head]))
    b = session.shape[0]
    name = exported.document.name
    title = f"{name} · {STAGE_NAMES[stage]}" + (f" · batch {batch + 1}" if b > 1 else "")
    return Figure(
        title=title,
        stage=stage,
        colormap=cmap,
        row_labels=session.tokens,
        col_labels=column_labels(session, stage),
        x_label="value dimension" if stage == "output" else "key j",
        panels=panels,
        shared_scale=options.shared_scale or len(panels) == 1,
        columns=max(1, math.ceil(math.sqrt(len(panels)))),
        subtitle=source.describe() if source is not None else "",
    )


# -- the explorer's grid of heads --------------------------------------------------------


def best_columns(
    count: int,
    width: float,
    height: float,
    t_q: int,
    t_k: int,
    bar_px: float,
    per_column_px: float = 0,
    *,
    min_column_px: float = 0,
    title_px: float = 0,
) -> int:
    """How many columns lay out ``count`` heads of T_q × T_k cells in a ``width`` × ``height``
    view with the biggest cells (a wide, short dock gets a row; a tall one a column).
    ``bar_px`` is taken once (a shared colour bar), ``per_column_px`` per column (a bar per
    head).

    Columns narrower than ``min_column_px`` (where a title no longer fits) are not
    considered, unless nothing else fits; each row loses ``title_px`` to its titles.
    (The pixel sizes are the widgets'; they are passed in.)
    """
    if count <= 1:
        return 1
    best, best_size = 1, -1.0
    for columns in range(1, count + 1):
        rows = math.ceil(count / columns)
        if columns > 1 and rows == math.ceil(count / (columns - 1)):
            continue  # one more column and no fewer rows: only narrower cells
        column_px = (width - bar_px) / columns - per_column_px
        if column_px < min_column_px and columns > 1:
            break
        size = min(column_px / t_k, (height / rows - title_px) / t_q)
        if size > best_size:
            best, best_size = columns, size
    return best
