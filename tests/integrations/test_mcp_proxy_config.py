"""The proxy's TOML declarations: the names the issue fixes, one-line errors, key derivation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan.tracer import ConfigurationError
from toolspan.tracer.integrations.mcp_proxy import ProxyConfig, load_config, parse_config

ISSUE_EXAMPLE = """\
timeout_s = 30              # per upstream call
trust_annotations = false
[tools.get_order]
side_effect = "read"
[tools.refund_order]
side_effect = "write"
idempotent = false
check_with = "get_refund_status"
resource_key = "order_id"   # an argument name
[tools.get_refund_status]
side_effect = "read"
"""


def test_the_names_the_issue_fixes(tmp_path):
    path = tmp_path / "proxy.toml"
    path.write_text(ISSUE_EXAMPLE)
    config = load_config(path)
    assert (config.timeout_s, config.trust_annotations) == (30.0, False)
    refund = config.declarations().get("refund_order")
    assert (refund.side_effect, refund.idempotent) == ("write", False)
    assert refund.resource_key is not None and refund.resource_key({"order_id": "A-1"}) == "A-1"
    assert config.check_with("refund_order") == "get_refund_status"
    assert config.declarations().get("get_order").side_effect == "none"
    # Undeclared: a write that is never repeated.
    assert config.declarations().get("send_email").side_effect == "write"
    assert not config.declarations().get("send_email").idempotent
    assert load_config(None) == ProxyConfig()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("timeout_s = 0\n", "timeout_s must be a positive number, not 0"),
        ("timout_s = 3\n", "unknown key timout_s (known: "),
        ("sse_replay_events = 0\n", "sse_replay_events must be a whole number of at least 1"),
        ('[tools.a]\nside_effect = "reed"\n', 'tools.a.side_effect must be "read" or "write"'),
        (
            '[tools.a]\nside_effect = "read"\nidempotent = true\n',
            "tools.a.idempotent is for writes",
        ),
        (
            '[tools.a]\nside_effect = "write"\nkey_arguments = ["x"]\n',
            "tools.a.key_arguments derive a key: only with idempotent = true",
        ),
        ('[tools.a]\nside_effect = "write"\nidempotent = "yes"\n', "tools.a.idempotent must be"),
        ('[tools.a]\nside_effect = "write"\ncheck_with = "b"\n', "tools.a.check_with: 'b' must"),
        ("[tools.a]\nside_effect = \n", "not valid TOML"),
        ("[retry_budget]\nratoi = 1\n", "unknown key retry_budget.ratoi"),
        ("loop_threshold = -1\n", "loop_threshold must be a whole number (0: off)"),
    ],
)
def test_a_mistake_is_one_line_naming_the_file_and_the_key(tmp_path, text, message):
    path = tmp_path / "proxy.toml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as raised:
        load_config(path)
    line = str(raised.value)
    assert "\n" not in line and line.startswith(f"{path}: ") and message in line


# JSON numbers within 64 bits: a larger one makes no key (below), by design.
values = st.one_of(st.integers(-(2**63), 2**64 - 1), st.text(max_size=5), st.booleans(), st.none())


@given(
    keyed=st.dictionaries(st.sampled_from(["order_id", "amount"]), values, min_size=2),
    other=st.dictionaries(st.sampled_from(["reason", "note"]), values),
    changed=st.dictionaries(st.sampled_from(["reason", "note"]), values),
    conversation=st.sampled_from(["c1", "c2"]),
)
def test_a_key_depends_on_the_named_arguments_and_the_conversation_only(
    keyed, other, changed, conversation
):
    config = parse_config(
        {
            "tools": {
                "refund_order": {
                    "side_effect": "write",
                    "idempotent": True,
                    "key_arguments": ["order_id", "amount"],
                }
            }
        }
    )
    declarations = config.declarations()

    def key(arguments, request):
        return declarations.key("refund_order", arguments, request)

    first = key({**keyed, **other}, conversation)
    assert first is not None
    assert key({**keyed, **changed}, conversation) == first  # other arguments do not count
    assert key({**keyed, "order_id": [keyed["order_id"]]}, conversation) != first
    assert key({**keyed, **other}, "c3") != first  # another conversation, another action


def test_arguments_the_key_cannot_encode_give_no_key_so_the_write_runs_once():
    config = parse_config({"tools": {"refund_order": {"side_effect": "write", "idempotent": True}}})
    assert config.declarations().key("refund_order", {"amount": 2**70}, "c1") is None


@pytest.mark.parametrize("dash", [[], ["--"]])
def test_the_server_command_needs_no_double_dash(dash):
    # Client config files (the MCP inspector's) must be able to leave `--` out;
    # the server's own options stay the server's.
    import argparse

    from toolspan.tracer.integrations.mcp_proxy._cli import _settings, register, server_command

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(
        ["mcp", "proxy", "--trace-file", "t.jsonl", *dash, "npx", "-y", "server", "--port", "1"]
    )
    settings = _settings(args, server_command(args))
    assert settings["command"] == ["npx", "-y", "server", "--port", "1"]
    assert settings["trace_file"] == "t.jsonl"
