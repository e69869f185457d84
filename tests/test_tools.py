"""The shared tool-call module: parsing every syntax, validation texts, Qwen3 prompt layout, safety."""

from __future__ import annotations

import json
import keyword

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttg_envs.tools import (
    Tool,
    ToolCall,
    format_tool_calls,
    format_tool_responses,
    parse_tool_calls,
    render_tools_prompt,
    tool_index,
    validate_call,
)

TOOLS = tool_index(
    [
        Tool("cd", "Change directory.", {"type": "object", "properties": {"folder": {"type": "string"}}, "required": ["folder"]}),
        Tool(
            "tail",
            "Last lines.",
            {"type": "object", "properties": {"file_name": {"type": "string"}, "lines": {"type": "integer"}}, "required": ["file_name"]},
        ),
        Tool(
            "book",
            "Book a cabin.",
            {
                "$defs": {"Pax": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
                "type": "object",
                "properties": {
                    "cabin": {"type": "string", "enum": ["economy", "business"]},
                    "pax": {"type": "array", "items": {"$ref": "#/$defs/Pax"}},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                },
                "required": ["cabin"],
            },
        ),
    ]
)


@pytest.mark.parametrize(
    "text, calls, style",
    [
        ('<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>', [("cd", {"folder": "a"})], "hermes"),
        (
            'ok <tool_call>{"name": "cd", "arguments": {"folder": "a"}}</tool_call>\n<tool_call>{"name": "tail", "arguments": '
            '"{\\"file_name\\": \\"x\\"}"}</tool_call>',
            [("cd", {"folder": "a"}), ("tail", {"file_name": "x"})],
            "hermes",
        ),
        ('<tool_call>{"name": "cd", "arguments": {"folder": "a"}}', [("cd", {"folder": "a"})], "hermes"),
        ('<tool_call>[cd("a"), tail(file_name="b")]</tool_call>', [("cd", {"folder": "a"}), ("tail", {"file_name": "b"})], "hermes"),
        ('{"name": "cd", "parameters": {"folder": "a"}}', [("cd", {"folder": "a"})], "json"),
        ('```json\n[{"name": "cd", "arguments": {"folder": "a"}}]\n```', [("cd", {"folder": "a"})], "json"),
        ('[cd(folder="a"), tail("f", lines=-3)]', [("cd", {"folder": "a"}), ("tail", {"file_name": "f", "lines": -3})], "python"),
        ("math.factorial(n=5)", [("math.factorial", {"n": 5})], "python"),
        (
            '[book(cabin="economy", pax=[{"name": "A"}], note=None, x=true)]',
            [("book", {"cabin": "economy", "pax": [{"name": "A"}], "note": None, "x": True})],
            "python",
        ),
        ('<think>maybe <tool_call>{"name": "cd"}</tool_call></think>I am done.', [], "text"),
        ("[]", [], "json"),
        ("Sure (I think) that works.", [], "text"),
        ('{"answer": 42}', [], "text"),
    ],
)
def test_parse_reads_every_syntax(text, calls, style):
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.error is None
    assert [(c.name, c.arguments) for c in parsed.calls] == calls
    assert parsed.style == style


def test_reasoning_and_markup_are_split_from_the_message():
    parsed = parse_tool_calls('<think>plan</think>Moving now.\n<tool_call>{"name": "cd", "arguments": {"folder": "a"}}</tool_call>')
    assert parsed.message == "Moving now."
    assert parsed.content.startswith("<think>plan</think>Moving now.") and "<tool_call>" not in parsed.content


@pytest.mark.parametrize(
    "text, why",
    [
        ('<tool_call>{"name": "cd", "arguments": {"folder": </tool_call>', "block 1 is not valid JSON"),
        ('<tool_call>{"name": "cd"', "not closed with </tool_call>"),
        ("<tool_call>  </tool_call>", "block 1 is empty"),
        ('{"name": "cd", "arguments": [1]}', "must be a JSON object"),
        ('{"name": "cd", "arguments": {', "not valid JSON"),
        ("</tool_call>", "without a matching <tool_call>"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'no "name" string'),
        ("[cd(folder=x)]", "name 'x' is not a literal value"),
        ("[cd(folder=1+2)]", "is not a literal value"),
        ("[cd(folder=open('/etc/passwd'))]", "nested call"),
        ("[__import__('os').system('echo hacked')]", "is not a function name"),
        ("[cd(**{'folder': 'a'})]", "unpacking"),
        ("[cd('a', 'b')]", "takes at most 1 arguments"),
        ("[nope('a')]", "positional arguments need a known tool"),
        ("[cd(folder='a'", "not valid Python call syntax"),
    ],
)
def test_malformed_calls_name_the_problem(text, why):
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.calls == () and parsed.error and why in parsed.error, parsed.error


def test_python_syntax_is_never_evaluated(tmp_path):
    marker = tmp_path / "ran"
    text = f"[cd(folder=__import__('pathlib').Path({str(marker)!r}).touch())]"
    assert parse_tool_calls(text, TOOLS).error
    assert not marker.exists()


@pytest.mark.parametrize(
    "call, why",
    [
        (ToolCall("rm", {}), "Unknown tool 'rm'. Available tools: cd, tail, book."),
        (ToolCall("cd", {}), "missing required argument 'folder'"),
        (ToolCall("cd", {"folder": "a", "force": True}), "unexpected argument 'force' (parameters: folder)"),
        (ToolCall("tail", {"file_name": "f", "lines": "20"}), "'lines' must be an integer, got string '20'"),
        (ToolCall("tail", {"file_name": "f", "lines": True}), "'lines' must be an integer, got boolean True"),
        (ToolCall("book", {"cabin": "first"}), "'cabin' must be one of ['economy', 'business'], got 'first'"),
        (ToolCall("book", {"cabin": "economy", "pax": [{}]}), "'pax'[0] is missing 'name'"),
        (ToolCall("book", {"cabin": "economy", "note": 3}), "matches none of the allowed forms"),
    ],
)
def test_validation_names_the_problem(call, why):
    error = validate_call(call, TOOLS)
    assert error and why in error, error


def test_validation_accepts_good_calls_and_can_skip_types():
    assert validate_call(ToolCall("book", {"cabin": "business", "pax": [{"name": "A"}], "note": None}), TOOLS) is None
    assert validate_call(ToolCall("tail", {"file_name": "f", "lines": 3}), TOOLS) is None
    assert validate_call(ToolCall("tail", {"file_name": "f", "lines": "3"}), TOOLS, check_types=False) is None
    assert "unexpected argument" in validate_call(ToolCall("tail", {"file_name": "f", "n": 3}), TOOLS, check_types=False)


def test_tools_prompt_is_qwen3_layout():
    tool = TOOLS["cd"]
    text = render_tools_prompt([tool], "Be brief.")
    assert text == (
        "Be brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + json.dumps(tool.openai())
        + "\n</tools>\n\nFor each function call, return a json object with function name "
        'and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
        "<args-json-object>}\n</tool_call>"
    )
    assert tool.openai() == {
        "type": "function",
        "function": {"name": "cd", "description": "Change directory.", "parameters": dict(tool.parameters)},
    }
    assert Tool.from_openai(tool.openai()) == tool
    assert format_tool_responses(["a", "b"]) == "<tool_response>\na\n</tool_response>\n<tool_response>\nb\n</tool_response>"


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_calls = st.lists(
    st.builds(
        ToolCall,
        st.from_regex(r"[a-z_][a-z0-9_]{0,10}(\.[a-z_]{1,5})?", fullmatch=True),
        st.dictionaries(
            st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(lambda k: not keyword.iskeyword(k)), _json_values, max_size=4
        ),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=150, deadline=None)
@given(_calls, st.sampled_from(["hermes", "json", "python"]))
def test_formatted_calls_parse_back(calls, style):
    if style != "python":
        calls = [c for c in calls if "." not in c.name] or [ToolCall("f", {})]
    elif any(keyword.iskeyword(part) for c in calls for part in c.name.split(".")):  # e.g. "_.or": no Python name
        with pytest.raises(ValueError, match="cannot be written in Python call syntax"):
            format_tool_calls(calls, style)
        return
    parsed = parse_tool_calls(format_tool_calls(calls, style))
    assert parsed.error is None
    assert [(c.name, c.arguments) for c in parsed.calls] == [(c.name, c.arguments) for c in calls]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.sampled_from(["<tool_call>", "</tool_call>", "[f(", "{", "```", "<think>"]),
        st.builds(lambda s: f"<tool_call>{s}</tool_call>", st.text(max_size=60)),
        st.builds(lambda s: f"[cd({s})]", st.text(max_size=60)),
    )
)
def test_parser_never_raises(text):
    parsed = parse_tool_calls(text, TOOLS)
    assert not (parsed.error and parsed.calls)
    for call in parsed.calls:
        validate_call(call, TOOLS)


def test_python_style_refuses_keyword_argument_names():
    with pytest.raises(ValueError, match="cannot be written in Python call syntax"):
        format_tool_calls([ToolCall("q", {"from": "1"})], "python")


def test_deep_nesting_is_an_error_not_a_crash():
    assert parse_tool_calls("[f(x=" + "[" * 5000 + "]" * 5000 + ")]", TOOLS).error
    assert parse_tool_calls('{"name": "f", "arguments": ' + '{"a": ' * 5000 + "1" + "}" * 5001, TOOLS).error
