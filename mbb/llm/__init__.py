"""The LLM layer: endpoint configs, an audited retrying client, a request cache, structured actions.

Every call goes through `mbb.llm.client.LlmClient.call`, which consults the cache, retries
transient faults and records one `LlmCall` event (tokens, latency, attempts, cost), so the token
audit is complete. Submodules are imported explicitly (`mbb.llm.config` is imported by
`mbb.params` and must stay light: it does not import `openai`).
"""
