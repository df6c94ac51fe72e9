"""Sample traces and the code that makes them (see sample_traces/README.md)."""
