"""The LLM layer: endpoint configs, a provider under wrappers, a request cache, structured actions.

Every call goes through `mbb.llm.client.LlmClient.call`: the OpenAI-compatible provider
(`mbb.llm.provider`) under the wrappers of `mbb.llm.wrappers`, which consult the cache, apply
spend caps, retry transient faults, limit concurrency and record one `LlmCall` event (tokens,
latency, attempts, cost), so the token audit is complete. Submodules are imported explicitly
(`mbb.llm.config` is imported by `mbb.params` and must stay light: it does not import `openai`).
"""
