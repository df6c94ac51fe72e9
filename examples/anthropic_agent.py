"""The example agent in the Anthropic Messages tool-call shape.

    python -m examples.anthropic_agent [--out out/anthropic_agent.jsonl]

Spans go to an OTLP/JSON lines file and, when OTEL_EXPORTER_OTLP_ENDPOINT is
set, to your collector as well. Then: ``toolspan analyze out/``.
"""

from __future__ import annotations

import sys

from .runner import main

if __name__ == "__main__":
    sys.exit(main("anthropic", sys.argv[1:]))
