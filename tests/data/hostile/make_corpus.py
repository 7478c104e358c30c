"""Write the hostile session-file corpus beside this script: ``python make_corpus.py``.

Each file's name says what it is and what must happen to it:

* ``ok-*``     loads, and ``attn-explorer export`` writes it (exit 0);
* ``bad-*``    is refused by ``load_session`` with a SessionFileError (export: exit 2);
* ``costly-*`` loads, but its export is over the command line's memory limit (exit 2).

Special files (a FIFO, a link to /dev/zero, a folder, a sparse file over the size
limit) cannot be committed: the tests create them in a temporary folder. The
generator is deterministic; ``tests/test_hostile_corpus.py`` checks that the
committed files are exactly what it writes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent

Data = dict


def session(
    b: int = 1, h: int = 1, t: int = 3, d: int = 2, fill: Callable[[int], float] | None = None
) -> Data:
    """A valid session dict of the given shape; values from ``fill(index)``."""
    fill = fill or (lambda n: (n % 7) - 3)
    counter = iter(range(10**9))

    def matrix() -> list[list[float]]:
        return [[fill(next(counter)) for _ in range(d)] for _ in range(t)]

    return {
        "format": "attn-explorer-session",
        "version": 1,
        "name": "hostile",
        "shape": {"B": b, "H": h, "T": t, "d": d},
        "tokens": [f"t{i + 1}" for i in range(t)],
        "batches": [
            {"heads": [{"query": matrix(), "key": matrix(), "value": matrix()} for _ in range(h)]}
            for _ in range(b)
        ],
        "options": {"strategy": "batched", "stage": "scores", "scale": True, "causal": False},
    }


def dumps(data: Data) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def edited(path: list, value: object, base: Data | None = None) -> Data:
    """A session with ``data[path...] = value``."""
    data = json.loads(json.dumps(base or session()))
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


def literal(path: list, text: str, base: Data | None = None) -> str:
    """Session text with the JSON literal ``text`` (not valid as a Python value) at ``path``."""
    return dumps(edited(path, "@@LITERAL@@", base)).replace('"@@LITERAL@@"', text)


CELL = ["batches", 0, "heads", 0, "query", 1, 0]
HEAD = ["batches", 0, "heads", 0]


def files() -> Iterator[tuple[str, str | bytes]]:
    """(file name, content) of every corpus file."""
    base = dumps(session())
    # -- ok: must load and export -------------------------------------------------------------
    yield "ok-worked.json", base
    yield "ok-byte-order-mark.json", "\ufeff" + base
    yield "ok-lone-surrogate-token.json", base.replace('"t2"', '"t\\ud800"')
    yield "ok-lone-surrogate-name.json", base.replace('"hostile"', '"\\udfff name"')
    yield (
        "ok-formula-tokens.json",
        dumps(edited(["tokens"], ['=HYPERLINK("http://x","y")', "+1", "@SUM(A1)"])),
    )
    yield "ok-values-at-the-limit.json", dumps(session(fill=lambda n: 1e15 if n % 2 else -1e15))
    yield "ok-name-200-chars.json", dumps(edited(["name"], "n" * 200))
    yield "ok-name-with-slashes-and-dots.json", dumps(edited(["name"], "../../etc/passwd/.."))
    yield "ok-unicode-tokens.json", dumps(edited(["tokens"], ["猫", "🐈\u200d⬛", "\u202eevil"]))
    yield "ok-html-tokens.json", dumps(edited(["tokens"], ["<img src=x>", "<b>b</b>", "&amp;"]))
    yield "ok-loop-small.json", dumps(edited(["options", "strategy"], "loop", session(h=2, t=6)))
    yield "ok-float32.json", dumps(edited(["options"], {"dtype": "float32"}, session(h=2)))
    yield (
        "ok-causal-masked.json",
        dumps(edited(["options"], {"causal": True, "stage": "masked"}, session(t=5))),
    )
    yield "ok-eight-heads.json", dumps(session(h=8, t=16, d=4))
    yield "ok-near-the-export-limit.json", dumps(session(h=12, t=1024, d=1))
    yield "ok-negative-zero.json", base.replace("[-3,", "[-0.0,", 1)
    yield "ok-tiny-numbers.json", dumps(session(fill=lambda n: 5e-324 if n % 2 else 1e-300))
    yield "ok-options-empty.json", dumps(edited(["options"], {}))
    # -- values that would overflow downstream --------------------------------------------------
    yield "bad-value-1e308.json", literal(CELL, "1e308")
    yield "bad-value-minus-1.7e308.json", literal(CELL, "-1.7e308")
    yield "bad-value-1e154-in-q-and-k.json", dumps(session(fill=lambda n: 1e154))
    yield "bad-value-just-over-the-limit.json", literal(CELL, "1000000000000001")
    yield "bad-value-1e400.json", literal(CELL, "1e400")
    yield "bad-value-nan.json", literal(CELL, "NaN")
    yield "bad-value-infinity.json", literal(CELL, "Infinity")
    yield "bad-value-minus-infinity.json", literal(CELL, "-Infinity")
    # -- integers too long to convert --------------------------------------------------------------
    yield "bad-huge-int-version.json", literal(["version"], "1" + "0" * 5000)
    yield "bad-huge-int-cell.json", literal(CELL, "9" * 5000)
    yield "bad-huge-int-negative-cell.json", literal(CELL, "-" + "9" * 4400)
    yield "bad-huge-int-shape.json", literal(["shape", "T"], "3" + "0" * 4300)
    yield "bad-huge-int-seed.json", literal(["options", "seed"], "7" * 10000)
    yield "bad-huge-int-head.json", literal(["options", "head"], "1" * 400)
    # -- not JSON, or not ours ------------------------------------------------------------------
    yield "bad-empty.json", ""
    yield "bad-whitespace.json", " \n\t "
    yield "bad-truncated.json", base[: len(base) // 2]
    yield "bad-null.json", "null"
    yield "bad-list.json", "[]"
    yield "bad-empty-object.json", "{}"
    yield "bad-deep-lists.json", "[" * 10_000 + "]" * 10_000
    yield "bad-deep-objects.json", '{"a":' * 10_000 + "1" + "}" * 10_000
    yield "bad-deep-in-a-cell.json", literal(CELL, "[" * 10_000 + "]" * 10_000)
    yield "bad-wrong-format.json", dumps(edited(["format"], "something-else"))
    yield "bad-newer-version.json", dumps(edited(["version"], 3))
    yield "bad-prompts-in-version-1.json", dumps(edited(["prompts"], {"text": "a"}))
    yield "ok-prompts.json", dumps(edited(["version"], 2) | {"prompts": {"corrupt": "b"}})
    yield "bad-version-text.json", dumps(edited(["version"], "1"))
    yield "bad-version-float.json", dumps(edited(["version"], 1.0))
    # -- encodings --------------------------------------------------------------------------------
    yield "bad-utf16.json", base.encode("utf-16")
    yield "bad-latin1.json", base.replace("hostile", "hôstile").encode("latin-1")
    yield "bad-nul-bytes.json", b"\0" * 4096
    yield "bad-binary.json", bytes(range(256)) * 16
    yield "bad-bom-then-garbage.json", b"\xef\xbb\xbf\xff\xfe garbage"
    yield (
        "bad-lone-surrogate-bytes.json",
        base.replace('"t2"', '"t\\ud800"').encode().replace(b"\\ud800", b"\xed\xa0\x80"),
    )
    # -- duplicate keys ---------------------------------------------------------------------------
    yield "bad-duplicate-name.json", base.replace('"name":"hostile"', '"name":"a","name":"b"')
    yield (
        "bad-duplicate-option.json",
        base.replace('"causal":false', '"causal":false,"causal":true'),
    )
    yield "bad-duplicate-matrix.json", base.replace('"key":', '"query":[],"key":', 1)
    yield "bad-duplicate-shape.json", base.replace('"T":3', '"T":3,"T":3')
    # -- structure --------------------------------------------------------------------------------
    yield "bad-missing-tokens.json", dumps({k: v for k, v in session().items() if k != "tokens"})
    yield "bad-missing-options.json", dumps({k: v for k, v in session().items() if k != "options"})
    yield "bad-unknown-field.json", dumps(edited(["extra"], 1))
    yield "bad-ragged-row.json", dumps(edited(["batches", 0, "heads", 0, "key", 1], [1, 2, 3]))
    yield "bad-rows-missing.json", dumps(edited([*HEAD, "value"], [[0, 0]]))
    yield "bad-text-in-cell.json", dumps(edited(CELL, "1.5"))
    yield "bad-bool-in-cell.json", dumps(edited(CELL, True))
    yield "bad-null-in-cell.json", dumps(edited(CELL, None))
    yield "bad-object-in-cell.json", dumps(edited(CELL, {"x": 1}))
    yield "bad-list-in-cell.json", dumps(edited(CELL, [1]))
    yield "bad-heads-missing.json", dumps(edited(["batches", 0, "heads"], []))
    yield "bad-batches-not-list.json", dumps(edited(["batches"], {"heads": []}))
    # -- shapes -----------------------------------------------------------------------------------
    yield "bad-shape-zero-tokens.json", dumps(edited(["shape", "T"], 0))
    yield "bad-shape-negative.json", dumps(edited(["shape", "d"], -2))
    yield "bad-shape-65-heads.json", dumps(edited(["shape", "H"], 65))
    yield "bad-shape-4097-tokens.json", dumps(edited(["shape", "T"], 4097))
    yield "bad-shape-513-dims.json", dumps(edited(["shape", "d"], 513))
    yield "bad-shape-9-batches.json", dumps(edited(["shape", "B"], 9))
    yield (
        "bad-shape-too-many-values.json",
        dumps(edited(["shape"], {"B": 8, "H": 64, "T": 4096, "d": 64})),
    )
    yield (
        "bad-shape-too-many-scores.json",
        dumps(edited(["shape"], {"B": 8, "H": 64, "T": 4096, "d": 1})),
    )
    yield "bad-shape-bigger-than-the-data.json", dumps(edited(["shape", "T"], 4096))
    # -- names and tokens -------------------------------------------------------------------------
    yield "bad-name-201-chars.json", dumps(edited(["name"], "n" * 201))
    yield "bad-name-100-kb.json", dumps(edited(["name"], "n" * 100_000))
    yield "bad-name-number.json", dumps(edited(["name"], 3))
    yield "bad-token-201-chars.json", dumps(edited(["tokens", 0], "t" * 201))
    yield "bad-token-empty.json", dumps(edited(["tokens", 0], ""))
    yield "bad-token-whitespace.json", dumps(edited(["tokens", 0], " \t"))
    yield "bad-token-number.json", dumps(edited(["tokens", 0], 7))
    yield "bad-tokens-too-few.json", dumps(edited(["tokens"], ["a"]))
    # -- options ----------------------------------------------------------------------------------
    yield "bad-option-strategy.json", dumps(edited(["options", "strategy"], "fast"))
    yield "bad-option-stage.json", dumps(edited(["options", "stage"], "softmax"))
    yield "bad-option-colormap.json", dumps(edited(["options", "score_colormap"], "jet"))
    yield "bad-option-head.json", dumps(edited(["options", "head"], 1))
    yield "bad-option-causal-text.json", dumps(edited(["options", "causal"], "no"))
    yield "bad-option-dtype.json", dumps(edited(["options", "dtype"], "float16"))
    yield "bad-option-step.json", dumps(edited(["options", "step"], -2))
    yield "bad-option-seed-negative.json", dumps(edited(["options", "seed"], -1))
    yield "bad-options-list.json", dumps(edited(["options"], []))
    # -- within every limit, but too costly for the command line's export -----------------------
    # (cost grows with T², the file with T: T = 4096 is cheap to keep)
    yield "costly-h1-t4096-d1.json", dumps(session(h=1, t=4096, d=1, fill=lambda n: n % 10))
    yield "costly-b2-h1-t4096-d1.json", dumps(session(b=2, t=4096, d=1, fill=lambda n: n % 10))
    yield (
        "costly-h2-t4096-float32.json",
        dumps(
            edited(
                ["options", "dtype"], "float32", session(h=2, t=4096, d=1, fill=lambda n: n % 10)
            )
        ),
    )


def write(folder: Path = HERE) -> list[Path]:
    """Write every corpus file into ``folder``; return their paths in order."""
    paths = []
    for name, content in files():
        path = folder / name
        data = content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass")
        path.write_bytes(data)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for old in HERE.glob("*.json"):
        old.unlink()
    written = write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
    print(f"{len(written)} files, {sum(p.stat().st_size for p in written):,} bytes")
