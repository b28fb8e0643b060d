"""Model backends: the OpenAI-compatible client, the call cache, providers, retries, limits and
structured output. The interface they implement (`Model`, typed messages, each request's
purpose) is on the ground floor, in `verimap.base`.

Backends are imported from their own modules so that importing `verimap.llm` never
pulls in an HTTP client.
"""
