"""The pytest plugin loads from its entry point and its fixtures share one kit."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from toolspan.testing import EffectLedger, FakeClock, FaultKit


def test_the_entry_point_names_the_plugin_module():
    (plugin,) = [e for e in entry_points(group="pytest11") if e.name == "toolspan"]
    assert plugin.value == "toolspan._pytest_plugin"
    assert plugin.load().toolspan_faults is not None


def test_the_fixtures_work_in_this_suite(toolspan_faults, effect_ledger, fake_clock):
    assert isinstance(toolspan_faults, FaultKit)
    assert effect_ledger is toolspan_faults.ledger and isinstance(effect_ledger, EffectLedger)
    assert fake_clock is toolspan_faults.clock and isinstance(fake_clock, FakeClock)


def test_a_users_suite_gets_the_fixtures_and_the_marker_from_the_entry_point(
    pytester: pytest.Pytester,
):
    pytester.makepyfile(
        """
        import httpx
        import pytest
        from toolspan.testing import Fault

        def refunds(kit):
            def handle(request):
                kit.ledger.commit("refund", "R-1")
                return httpx.Response(201, json={})
            return httpx.Client(base_url="https://p.example", transport=kit.httpx_transport(handle))

        @pytest.mark.toolspan_faults(Fault.timeout_after_commit())
        def test_lost_answer(toolspan_faults, effect_ledger, fake_clock):
            client = refunds(toolspan_faults)
            with pytest.raises(httpx.ReadTimeout):
                client.post("/refunds")
            client.post("/refunds")
            assert effect_ledger.count("refund") == 2
            assert fake_clock() == 0

        def test_no_marker_no_faults(toolspan_faults, effect_ledger):
            refunds(toolspan_faults).post("/refunds")
            assert effect_ledger.count() == 1
        """
    )
    # -p no:toolspan would leave the fixtures undefined: they come from the entry point.
    result = pytester.runpytest("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    without = pytester.runpytest("-p", "no:toolspan", "-p", "no:cacheprovider")
    without.assert_outcomes(errors=2)


def test_loading_the_plugin_imports_nothing_of_toolspan():
    # pytest loads it in every run of every project that installs toolspan.
    import subprocess
    import sys

    probe = (
        "import sys, toolspan._pytest_plugin; "
        "print(sorted(m for m in sys.modules if m.startswith(('toolspan.tracer', 'httpx'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # not the tracer (nor OpenTelemetry), nor httpx
