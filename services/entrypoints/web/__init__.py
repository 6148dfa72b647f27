"""`agentledger ui`: the web view (Starlette on uvicorn, server-sent events, no
front-end build step)."""
