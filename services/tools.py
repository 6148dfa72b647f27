"""The tool API for tool authors: `@tool` on a plain function registers it.

    from services.tools import ToolContext, ToolFailure, tool

This module only re-exports; the registry lives in `services.adapters.tools`."""

from services.adapters.tools.context import Lookup, ToolCancelled, ToolContext, ToolFailure
from services.adapters.tools.registry import tool

__all__ = ["Lookup", "ToolCancelled", "ToolContext", "ToolFailure", "tool"]
