"""The agents: scripted personas (`personas`, one registry entry each, with the parameterised
convention advocate), the modeled solver (`modeled`), the oracle solver (`oracle`), the LLM
negotiator built from components (`negotiator`), the LLM solver's tool loop (`llm_solver`), the
text they read (`prompts`) and the backend registry that builds them for a run (`backends`).
"""
