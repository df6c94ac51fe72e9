"""Settings shared by the whole suite."""

from hypothesis import settings

# Property tests check invariants, not speed: a per-example deadline only turns a
# busy 2-core CI machine into a flaky failure (DuckDB-backed examples can take
# 300 ms when other tests run beside them). Speed is measured in bench/.
settings.register_profile("toolspan", deadline=None)
settings.load_profile("toolspan")
