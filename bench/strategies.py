"""Print the strategy benchmark table: ``python bench/strategies.py [--quick] [--json]``.

A thin wrapper around ``attn-explorer bench`` (attn_explorer/cli/bench.py).
"""

import sys

from attn_explorer.cli.bench import run_bench

if __name__ == "__main__":
    sys.exit(run_bench(sys.argv[1:]))
