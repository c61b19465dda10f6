"""``{{fromRequest:<pattern>}}`` placeholders and the JavaScript regex translation.

See docs/placeholders.md.

Every expected value in the translation tables was checked against Node.js
(``[...text.matchAll(new RegExp(pattern, "g"))]``, last match, group 1 or the whole
match), the engine the reference runs on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import pytest

from pytest_dsh_replay._errors import PlaceholderError, ScriptError
from pytest_dsh_replay._replay.jsregex import JsPatternError, translate_js_pattern
from pytest_dsh_replay._replay.placeholders import (
    MARKER,
    PATTERN_TIMEOUT_S,
    find_last_match,
    request_corpus,
    resolve_placeholders,
    resolve_text,
)

# --- the corpus ---------------------------------------------------------------------------


def test_corpus_is_string_leaves_depth_first_joined_with_newlines() -> None:
    messages = [
        {"role": "user", "content": "first"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "second"},
                {"type": "tool-call", "id": "c1", "arguments": '{"a":1}', "n": 3, "ok": True},
            ],
            "meta": None,
        },
        "bare",
        7,
    ]
    assert request_corpus(messages) == "\n".join(
        ["user", "first", "assistant", "text", "second", "tool-call", "c1", '{"a":1}', "bare"]
    )


def test_corpus_never_includes_keys_and_is_empty_without_messages() -> None:
    assert request_corpus([{"secret-key": 1}]) == ""
    assert request_corpus(None) == ""
    assert request_corpus("just text") == "just text"
    assert request_corpus(({"a": ("x", "y")},)) == "x\ny"


# --- resolving strings --------------------------------------------------------------------

CORPUS = "goal-aaa1 then goal-bbb2\nid-beef id-cafe"


def test_a_string_without_marker_is_returned_as_is() -> None:
    text = "no placeholder {{here}}"
    assert resolve_text(text, CORPUS) is text


def test_last_match_wins_and_group_one_is_preferred() -> None:
    assert resolve_text("{{fromRequest:goal-[0-9a-f]+}}", CORPUS) == "goal-bbb2"
    assert resolve_text("{{fromRequest:goal-([0-9a-f]+)}}", CORPUS) == "bbb2"
    assert resolve_text("x={{fromRequest:goal-[0-9a-f]+}}!", CORPUS) == "x=goal-bbb2!"


def test_an_empty_group_one_gives_empty_and_an_unset_group_one_the_whole_match() -> None:
    assert resolve_text("[{{fromRequest:then()}}]", CORPUS) == "[]"
    assert resolve_text("[{{fromRequest:(zzz)?then}}]", CORPUS) == "[then]"


def test_the_terminator_is_the_last_two_braces_of_a_run() -> None:
    assert resolve_text("{{fromRequest:id-[0-9a-f]{4}}}", CORPUS) == "id-cafe"
    # Outside a run, the first "}}" closes the placeholder.
    assert resolve_text("{{fromRequest:then}} and }}", CORPUS) == "then and }}"


def test_several_placeholders_and_replacements_are_not_searched_again() -> None:
    corpus = "value {{fromRequest:x}}"
    text = "{{fromRequest:value \\S+}}|{{fromRequest:val(ue)}}"
    assert resolve_text(text, corpus) == "value {{fromRequest:x}}|ue"


def test_an_empty_pattern_substitutes_empty() -> None:
    assert resolve_text("<{{fromRequest:}}>", CORPUS) == "<>"


def test_the_corpus_function_is_called_only_for_a_marker() -> None:
    calls: list[int] = []

    def corpus() -> str:
        calls.append(1)
        return CORPUS

    assert resolve_text("plain", corpus) == "plain"
    assert calls == []
    assert resolve_text("{{fromRequest:then}}", corpus) == "then"
    assert calls == [1]


def test_unterminated_placeholder() -> None:
    with pytest.raises(PlaceholderError) as info:
        resolve_text('id "{{fromRequest:goal-\\d+}', CORPUS)
    assert str(info.value) == (
        'fromRequest placeholder is unterminated in "id \\"{{fromRequest:goal-\\\\d+}": '
        'expected "}}" after "{{fromRequest:"'
    )
    assert isinstance(info.value, ScriptError)


def test_no_match() -> None:
    with pytest.raises(
        PlaceholderError, match=r'fromRequest pattern "run-\\\\d\+" matched nothing'
    ):
        resolve_text("{{fromRequest:run-\\d+}}", CORPUS)


def test_invalid_pattern() -> None:
    with pytest.raises(PlaceholderError) as info:
        resolve_text("{{fromRequest:goal-(}}", CORPUS)
    assert str(info.value).startswith('fromRequest has an invalid pattern "goal-(": ')
    assert "unterminated group" in str(info.value)


def test_catastrophic_backtracking_times_out_with_a_clear_error() -> None:
    assert PATTERN_TIMEOUT_S == 1.0
    with pytest.raises(PlaceholderError, match="took longer than 0.05 s"):
        find_last_match("(a|a)+$", "a" * 40 + "!", timeout=0.05)


# --- resolving values ----------------------------------------------------------------------


def test_every_string_value_is_resolved_and_keys_never_are() -> None:
    entry = {
        "kind": "throw",
        "chunks": [{"type": "text-delta", "index": 0, "text": "{{fromRequest:goal-\\w+}}"}],
        "message": "failed {{fromRequest:id-(\\w+)}}",
        "code": "E_{{fromRequest:then}}",
        "{{fromRequest:key}}": [1, None, True, "{{fromRequest:then}}"],
    }
    messages = [{"role": "user", "content": CORPUS}]
    resolved = resolve_placeholders(entry, messages)
    assert resolved == {
        "kind": "throw",
        "chunks": [{"type": "text-delta", "index": 0, "text": "goal-bbb2"}],
        "message": "failed cafe",
        "code": "E_then",
        "{{fromRequest:key}}": [1, None, True, "then"],
    }
    assert entry["message"] == "failed {{fromRequest:id-(\\w+)}}"  # the input is not changed


class ExplodingMessages(Sequence[Any]):
    """Messages that fail when read: proves the corpus is built only when needed."""

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        raise AssertionError("the corpus was built")

    def __len__(self) -> int:
        raise AssertionError("the corpus was built")

    def __iter__(self) -> Iterator[Any]:
        raise AssertionError("the corpus was built")


def test_the_corpus_is_built_lazily() -> None:
    value = {"chunks": [{"type": "finish", "reason": {"kind": "stop"}}]}
    assert resolve_placeholders(value, ExplodingMessages()) == value


def test_marker_constant() -> None:
    assert MARKER == "{{fromRequest:"


# --- JavaScript -> Python translation: each difference ------------------------------------

# (pattern, text, the JavaScript result: last match's group 1 or whole match, None = no match)
JS_SEMANTICS = [
    # named groups: (?<n>...) and \k<n>, including a reference before the group
    pytest.param(r"(?<id>goal-\d+)", "goal-1 goal-22", "goal-22", id="named-group"),
    pytest.param(r"(?<n>\w)\k<n>", "ab xx cc", "c", id="named-backreference"),
    pytest.param(r"\k<n>x(?<n>y)", "xy", "y", id="forward-named-reference"),
    # "." does not match the four line terminators (Python's does, except "\n")
    pytest.param("a.c", "a\nc", None, id="dot-newline"),
    pytest.param("a.c", "a\rc", None, id="dot-carriage-return"),
    pytest.param("a.c", "a\u2028c", None, id="dot-line-separator"),
    pytest.param("a.c", "a\u2029c", None, id="dot-paragraph-separator"),
    pytest.param("a.c", "a\u0085c abc", "abc", id="dot-nel-is-no-terminator"),
    # \d, \w, \b, \B are ASCII-only
    pytest.param(r"\d+", "\u0661\u0662 7", "7", id="digit-ascii"),
    pytest.param(r"\w+", "\u00e9t\u00e9", "t", id="word-ascii"),
    pytest.param(r"\bid\b", "\u00e9id\u00e9", "id", id="boundary-ascii"),
    pytest.param(r"x\B", "x\u00e9", None, id="non-boundary-ascii"),
    # \s is JavaScript's white space: U+FEFF yes, U+001C and U+0085 no
    pytest.param(r"\s", "\ufeff", "\ufeff", id="space-bom"),
    pytest.param(r"\s", "\x1c", None, id="space-not-file-separator"),
    pytest.param(r"\S+", "a\x85b", "a\x85b", id="non-space-nel"),
    # $ matches only at the very end, never before a final "\n"
    pytest.param("end$", "end\n", None, id="dollar-before-final-newline"),
    pytest.param("end$", "the end", "end", id="dollar-at-end"),
    # [^] is any character, [] is nothing, and "]" right after "[" closes the class
    pytest.param("a[^]b", "a\nb", "a\nb", id="negated-empty-class"),
    pytest.param("a[]b", "ab", None, id="empty-class"),
    pytest.param("[]a]", "]a", None, id="bracket-closes-class"),
    # a back reference to a group that did not take part matches ""
    pytest.param(r"(a)?(?:\1)b", "b", "b", id="unset-backreference"),
    # Annex B leniency
    pytest.param(r"\q\-\/", "q-/", "q-/", id="identity-escapes"),
    pytest.param(r"\cJ", "\n", "\n", id="control-escape"),
    pytest.param("a{,2}", "a{,2}", "a{,2}", id="brace-comma-is-literal"),
    pytest.param("x{", "x{", "x{", id="lone-brace-is-literal"),
    pytest.param(r"\0", "\0", "\0", id="nul-escape"),
    pytest.param(r"\101", "A", "A", id="legacy-octal"),
    pytest.param(r"[\d-z]+", "5-z", "5-z", id="class-escape-range-is-literal-dash"),
    pytest.param(r"[\b]", "\b", "\b", id="backspace-in-class"),
    # global matching: after an empty match JavaScript moves one character on
    pytest.param("(?=a)|a", "a", "", id="global-after-empty-match"),
]


@pytest.mark.parametrize(("pattern", "text", "expected"), JS_SEMANTICS)
def test_javascript_semantics(pattern: str, text: str, expected: str | None) -> None:
    assert find_last_match(pattern, text) == expected


JS_SYNTAX_ERRORS = [
    pytest.param("(?P<x>a)", "invalid group", id="python-named-group"),
    pytest.param("(?i)a", "invalid group", id="inline-flags"),
    pytest.param("(?>a)", "invalid group", id="atomic-group"),
    pytest.param("a*+", "nothing to repeat", id="possessive"),
    pytest.param("a**", "nothing to repeat", id="stacked-quantifier"),
    pytest.param("(?<=a)+", "nothing to repeat", id="quantified-lookbehind"),
    pytest.param("(a", "unterminated group", id="unterminated-group"),
    pytest.param("a)", "unmatched ')'", id="unmatched-paren"),
    pytest.param("[a", "unterminated character class", id="unterminated-class"),
    pytest.param("[z-a]", "range out of order", id="range-order"),
    pytest.param("a{2,1}", "numbers out of order", id="quantifier-order"),
    pytest.param("a\\", "\\ at end of pattern", id="trailing-backslash"),
    pytest.param("(?<n>a)(?<n>b)", "duplicate capture group name", id="duplicate-name"),
    pytest.param("(?<1x>a)", "invalid capture group name", id="bad-name"),
    pytest.param(r"(?<n>a)\k<m>", "invalid named capture referenced", id="unknown-name"),
]


@pytest.mark.parametrize(("pattern", "reason"), JS_SYNTAX_ERRORS)
def test_javascript_syntax_errors(pattern: str, reason: str) -> None:
    with pytest.raises(JsPatternError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        translate_js_pattern(pattern)
    with pytest.raises(PlaceholderError, match="invalid pattern"):
        find_last_match(pattern, "a")


def test_lookaheads_may_take_a_quantifier_as_in_annex_b() -> None:
    assert find_last_match("(?=a)*a", "a") == "a"


def test_backreference_inside_its_own_group_matches_empty() -> None:
    assert find_last_match(r"(a\1)", "aa") == "a"


def test_k_is_a_plain_letter_without_named_groups() -> None:
    assert find_last_match(r"\k<a>", "k<a>") == "k<a>"


def test_lookbehind_sees_text_before_a_restart() -> None:
    # After the empty match at 0 the search restarts at 1; "(?<=a)" still sees the "a".
    assert find_last_match("(?=a)|(?<=a)b", "ab") == "b"


def test_the_error_names_the_position() -> None:
    with pytest.raises(JsPatternError) as info:
        translate_js_pattern("ab)")
    assert info.value.position == 2
    assert info.value.pattern == "ab)"
