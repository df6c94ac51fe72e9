"""Runnable examples: an agent loop instrumented with toolspan (see README.md)."""
