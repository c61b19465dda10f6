"""Token usage and cost as users see them: dsh_replay.usage(), --dsh-usage, dsh_budget."""

from __future__ import annotations

import pytest
from support.scenarios import make_scenario

from pytest_dsh_replay import MemoryBackend, RecordingModel, SessionStore, write_scenario

USAGE = {"inputTokens": 900, "outputTokens": 120, "reasoningTokens": 20, "cacheReadTokens": 100}

TESTS = """
import pytest
from pytest_dsh_replay import UnknownSessionError

def ask(model, session_id, parent=None):
    request = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "q"}]}
    list(model.stream(request, session_id=session_id, parent_session_id=parent))

@pytest.mark.dsh_scenario("priced")
def test_usage(dsh_replay):
    ask(dsh_replay.model, "main")
    ask(dsh_replay.model, "main")
    ask(dsh_replay.model, "kid", parent="main")
    used = dsh_replay.usage()
    assert (used.calls, used.input_tokens, used.output_tokens) == (3, 3000, 360)
    assert (used.reasoning_tokens, used.cached_tokens) == (60, 300)
    assert used.cost_usd == pytest.approx(COST)
    assert dsh_replay.usage("kid").calls == 1
    with pytest.raises(UnknownSessionError, match="no session 'nobody'"):
        dsh_replay.usage("nobody")

def the_three_calls(model):
    for session, parent in (("main", None), ("main", None), ("kid", "main")):
        ask(model, session, parent)

@pytest.mark.dsh_scenario("priced")
@pytest.mark.dsh_budget(max_calls=2, max_output_tokens=1000)
def test_over_budget(dsh_replay):
    the_three_calls(dsh_replay.model)

@pytest.mark.dsh_scenario("priced")
@pytest.mark.dsh_budget(max_calls=3, max_cost_usd=1.0)
def test_within_budget(dsh_replay):
    the_three_calls(dsh_replay.model)

@pytest.mark.dsh_scenario("unpriced")
@pytest.mark.dsh_budget(max_cost_usd=1.0)
def test_unknown_price(dsh_replay):
    list(dsh_replay.model.stream({"messages": [{"role": "user", "content": "q"}]}, session_id="p"))
"""


class _Priced:
    """A live model that answers every call with the same usage chunk."""

    def stream(self, request: object, **kwargs: object) -> object:
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": "ok"}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": "ok"}}
        yield {"type": "usage", "usage": dict(USAGE)}
        yield {"type": "finish", "reason": {"kind": "stop"}}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    store = SessionStore(MemoryBackend())
    model = RecordingModel(_Priced(), store)
    request = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "q"}]}
    for session, parent in (("main", None), ("main", None), ("kid", "main")):
        list(model.stream(request, session_id=session, parent_session_id=parent))
    model.close_open_calls()
    write_scenario(pytester.path / "recordings" / "priced", store.sessions())
    make_scenario(pytester.path / "recordings" / "unpriced", ask="q", primary=["a"])
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    from genai_prices import Usage, calc_price

    one = calc_price(
        Usage(input_tokens=1000, output_tokens=120, cache_read_tokens=100), "gpt-4o-mini"
    ).total_price
    pytester.makepyfile(test_agent=TESTS.replace("COST", repr(float(one) * 3)))
    return pytester


def test_usage_budget_and_the_usage_table(project: pytest.Pytester) -> None:
    result = project.runpytest("--dsh-usage")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_agent.py::test_over_budget: over its dsh_budget: 3 model calls, over "
            "max_calls=2",
            "*-- dsh-replay usage --*",
            "test *calls*input*output*reasoning*cached*cost USD",
            "test_agent.py::test_over_budget *3*3000*360*60*300*0.00*",
            "test_agent.py::test_unknown_price *1*0*0*0*0*?",
            "test_agent.py::test_usage *3*3000*360*60*300*0.00*",
            "test_agent.py::test_within_budget *3*3000*360*60*300*0.00*",
            "total *10*9000*1080*180*900*?",
        ]
    )


def test_an_unknown_price_fails_a_cost_budget_saying_why(project: pytest.Pytester) -> None:
    result = project.runpytest("-k", "unknown_price")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*test_unknown_price: over its dsh_budget: a cost that is not known*"]
    )


def test_the_usage_table_under_xdist(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    # One worker: its rows reach the controller's table (adding them up across workers is
    # test_fixture.py's test_xdist_workers_report_to_the_controller's point).
    result = project.runpytest("--dsh-usage", "-n", "1", "-k", "not unknown_price")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*-- dsh-replay usage --*", "total *9*9000*1080*180*900*0.00*"])
