"""Test doubles that ship with the library: a loopback OpenAI-compatible server (`testserver`)
and emulations of providers' quirks (`emulate`). `mbb estimate` uses them for its dry run;
the test suite for everything LLM.
"""
