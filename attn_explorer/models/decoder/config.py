"""What a GGUF may leave out or set to 0, read as llama.cpp reads it: the sliding window, the
soft-caps and the RoPE scaling of a decoder's file.

llama.cpp's converter (``convert_hf_to_gguf.py`` and its ``conversion/`` classes) writes 0 for
"none" in some keys and leaves others out, and llama.cpp's loader (``src/models/<family>.cpp``)
then takes a default per family. :func:`window_and_caps` and :func:`rope_scaling` follow it,
so a file the converter wrote runs here as it runs in llama.cpp:

- ``attention.sliding_window``: 0 is no window (Phi-3's converter writes 0 when the model has
  none; Gemma 3's loader enables its window only when ``n_swa > 0``). Absent from a Gemma 2
  file (the first converters wrote none), llama.cpp's 4 096 (``families.Family.default_window``).
- ``attn_logit_softcapping`` / ``final_logit_softcapping``: 0 is no cap; absent from a Gemma 2
  file, 50 and 30 (``llama-hparams.h``). Gemma 3 caps its final logits when the file says so.
- ``rope.scaling.type`` / ``rope.scaling.factor`` (older files: ``rope.scale_linear``): linear
  scaling divides the global layers' frequencies by the factor (Gemma 3 4B and up: 8).

A Hugging Face folder (``llama_cpp_layout`` False) has no llama.cpp defaults: its config says
None when it means none, so an absent key is none there.
"""

from __future__ import annotations

from attn_explorer.models.decoder.families import Family
from attn_explorer.models.formats.gguf_file import GGUFFile
from attn_explorer.models.formats.gguf_metadata import metadata_value

#: Keys a GGUF may lack, then read as llama.cpp's default for the family.
LLAMA_CPP_DEFAULTS = (
    "attention.sliding_window",
    "attn_logit_softcapping",
    "final_logit_softcapping",
)


def window_and_caps(
    file: GGUFFile, arch: str, family: Family, gguf: bool
) -> tuple[int | None, float, float]:
    """(declared sliding window or None, attention soft-cap, final soft-cap; 0.0: none)."""

    def number(key: str) -> float | None:
        value: float | None = metadata_value(file, "{arch}." + key, arch)  # 0 reads as None
        return value

    default = {key: gguf and f"{arch}.{key}" not in file.scalars for key in LLAMA_CPP_DEFAULTS}
    window = number("attention.sliding_window")
    if default["attention.sliding_window"]:
        window = family.default_window or None
    softcap = final_cap = 0.0
    if family.softcap:
        softcap = (
            50.0 if default["attn_logit_softcapping"] else number("attn_logit_softcapping") or 0.0
        )
    if family.final_softcap:
        final_cap = number("final_logit_softcapping") or 0.0
        final_cap = 30.0 if default["final_logit_softcapping"] and family.softcap else final_cap
    return (None if window is None else int(window)), float(softcap), float(final_cap)


def rope_scaling(file: GGUFFile, arch: str) -> tuple[float, tuple[str, ...]]:
    """The linear RoPE scale a file asks for (1.0: none), and what it asks that is not applied.

    llama.cpp's converter writes ``rope.scaling.type`` and ``rope.scaling.factor`` (older ones
    ``rope.scale_linear``) from config.json's rope_type; llama.cpp divides the frequencies of
    the global layers by the factor. YaRN and LongRoPE (Phi-3's ``rope_factors_long`` /
    ``_short`` tensors) change more than the frequencies and are not implemented here: the
    file still opens, and the caveat says its attention is not llama.cpp's.
    """
    kind = metadata_value(file, "{arch}.rope.scaling.type", arch)
    factor = metadata_value(file, "{arch}.rope.scaling.factor", arch)
    if factor is None:
        factor = metadata_value(file, "{arch}.rope.scale_linear", arch)
    caveats = []
    if kind not in ("", "none", "linear"):
        caveats.append(
            f"RoPE scaling {kind!r} (factor {factor or 1:g}) is not applied here: attention "
            "differs from llama.cpp's and transformers'."
        )
    if file.has("rope_factors_long.weight") or file.has("rope_factors_short.weight"):
        caveats.append(
            "LongRoPE factors (rope_factors_long / rope_factors_short) are not applied here: "
            "attention differs from llama.cpp's and transformers'."
        )
    scale = float(factor) if factor and kind in ("", "none", "linear") else 1.0
    return scale, tuple(caveats)
