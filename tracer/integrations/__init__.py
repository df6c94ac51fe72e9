"""toolspan.tracer.integrations — the retry boundary inside the SDKs and frameworks.

One module per stack, each needing its extra and imported only when used:

* :mod:`.openai` — OpenAI Chat Completions and Responses API (``toolspan[openai]``)
* :mod:`.anthropic` — Anthropic Messages (``toolspan[anthropic]``)
* :mod:`.mcp` — MCP client sessions (``toolspan[mcp]``)
* :mod:`.openai_agents` — OpenAI Agents SDK function tools (``toolspan[openai-agents]``)
* :mod:`.pydantic_ai` — Pydantic AI toolsets, as a capability (``toolspan[pydantic-ai]``)
* :mod:`.langchain` — LangChain v1 agent middleware and LangGraph's ``ToolNode``
  (``toolspan[langchain]``)

What they share lives here and needs no extra: :class:`Declaration` and
:class:`Declarations` (what the application states about its tools: which
write, which are idempotent under which key, which have a read-back) and
:func:`model_reply` (a failure as the framework's native error result). See
:mod:`toolspan.tracer.integrations._common`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._common import Declaration, Declarations, ModelReply, model_reply

__all__ = ["Declaration", "Declarations", "ModelReply", "model_reply"]


def __getattr__(name: str) -> object:
    # Lazy, so the core's ToolCall can use ._shapes without an import cycle.
    if name in __all__:
        from . import _common

        return getattr(_common, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
