"""The catalog of checks a plan names with arguments: each check's verdicts, its arguments
checked with the plan, and its place in the staged planner's grammar."""

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from verimap.base.check_names import CATALOG, DOMAIN_CHECKS, PLAN_CHECKS
from verimap.base.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from verimap.base.plan import CheckVF, Node, PlanError, plan_json_schema
from verimap.base.run_context import RunContext
from verimap.base.verification import CheckTools, Submission
from verimap.checks.evidence import passages, same_source, supports
from verimap.checks.registry import describe, plan_check
from verimap.core.agent import flatten_tool_messages
from verimap.core.verifier import source_index
from verimap.evals.retrieval import Chunk, Hit, format_hits
from verimap.planning.plan import parse_plan
from verimap.planning.staged_schema import check_schemas, node_schema
from verimap.tools.registry import Tool, ToolRegistry


def hit(rank: int, source: str, date: str, text: str, title: str = "A report") -> Hit:
    chunk = Chunk(
        article=rank,
        text=text,
        title=title,
        author="A. Writer",
        source=source,
        category="technology",
        published_at=f"{date}T09:00:00+00:00",
    )
    return Hit(rank=rank, score=1.0, chunk=chunk)


SEARCH = format_hits(
    [
        hit(
            1,
            "TechCrunch",
            "2023-10-07",
            "Prosecutors said Sam Bankman-Fried committed fraud for personal gain.",
        ),
        hit(
            2,
            "The Verge",
            "2023-10-26",
            "Wang testified that Bankman-Fried told a trader withdrawals were fine.",
        ),
        hit(
            3,
            "Business Today | Latest Stock Market And Economy News India",
            "2023-10-07",
            "Another user said no one can carry out such an attack without intelligence support.",
        ),
    ],
    page=1,
)
TRANSCRIPT = (
    UserMessage(content="Subtask: find the person"),
    AssistantMessage(content="", tool_calls=[ToolCall(id="c1", name="search", arguments="{}")]),
    ToolMessage(tool_call_id="c1", name="search", content=SEARCH),
)


@dataclass
class SearchDouble(Tool):
    """A search tool double that knows which sources the corpus holds."""

    sources: tuple[str, ...] | None = ()

    def holds_source(self, name: str) -> bool | None:
        if self.sources is None:
            return None
        return any(name.lower() in s.lower() for s in self.sources)


def corpus_tools(*sources: str, knows: bool = True) -> CheckTools:
    search = SearchDouble("search", "Search.", {}, lambda: "", sources if knows else None)
    return CheckTools(sources=source_index(ToolRegistry([search])))


def verdict(
    check: str,
    args: dict,
    outputs: dict,
    *,
    inputs=None,
    transcript=TRANSCRIPT,
    tools: CheckTools | None = None,
):
    outs: dict[str, Any] = {k: "string" for k in outputs}
    node = Node(id="n", instruction="x", inputs=["USER_TASK", *(inputs or {})], outputs=outs)
    sub = Submission("t", node, {"USER_TASK": "t", **(inputs or {})}, outputs, transcript)
    found = asyncio.run(
        plan_check(CheckVF(name=f"my_{check}", check=check, args=args)).check(
            sub, tools or CheckTools(), RunContext()
        )
    )
    return found


def outcome(*args, **kw) -> str | None:
    v = verdict(*args, **kw)
    return None if v is None else v.outcome


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Yes", "PASS"),
        ("no.", "PASS"),
        ("NO", "PASS"),
        ("Insufficient information.", "PASS"),
        ("Maybe", "FAIL"),
        ("Yes, because the reports agree", "FAIL"),
    ],
)
def test_yes_no(value, expected):
    assert outcome("yes_no", {"output": "answer"}, {"answer": value}) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Sam Bankman-Fried", "PASS"),
        ("Sportsbooks", "PASS"),
        ("Insufficient information", "PASS"),
        ("The person who was named by both of the reports is most likely him", "FAIL"),
        ("Yes", "FAIL"),
        ("42", "FAIL"),
        ("", "FAIL"),
    ],
)
def test_entity(value, expected):
    assert outcome("entity", {"output": "answer"}, {"answer": value}) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, "PASS"),
        ("1,234", "PASS"),
        (0, "PASS"),
        (10.0, "PASS"),
        (11, "FAIL"),
        (-1, "FAIL"),
        ("about five", "FAIL"),
        (True, "FAIL"),
    ],
)
def test_number_in_range(value, expected):
    args = {"output": "answer", "min": 0, "max": 2000 if value == "1,234" else 10}
    assert outcome("number_in_range", args, {"answer": value}) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2023-10-31", "PASS"),
        ("October 31, 2023", "PASS"),
        ("Oct 7th, 2023", "PASS"),
        ("7 October 2023", "PASS"),
        ("yesterday", "FAIL"),
        ("2023-13-45", "FAIL"),
    ],
)
def test_date(value, expected):
    assert outcome("date", {"output": "when"}, {"when": value}) == expected


def test_an_answer_form_check_fails_when_the_output_is_missing():
    v = verdict("yes_no", {"output": "answer"}, {"other": "Yes"})
    assert v.outcome == "FAIL" and "no output 'answer'" in v.message
    assert v.name == "my_yes_no" and v.type == "check" and v.strength == "weak"


def test_fact_in_source_finds_the_claim_in_a_passage_of_the_named_source():
    args = {"output": "fact", "source": "TechCrunch"}
    claim = "Sam Bankman-Fried committed fraud for personal gain"
    v = verdict("fact_in_source", args, {"fact": claim})
    assert v.outcome == "PASS" and v.strength == "strong"
    # The same words, but only The Verge's passage holds them.
    elsewhere = verdict(
        "fact_in_source", args, {"fact": "Wang testified Bankman-Fried told a trader"}
    )
    assert (
        elsewhere.outcome == "FAIL"
        and "not in any of the 1 passage(s) of 'TechCrunch'" in elsewhere.message
    )
    other_source = verdict(
        "fact_in_source", {"output": "fact", "source": "Fortune"}, {"fact": claim}
    )
    assert (
        other_source.outcome == "FAIL"
        and "no passage of 'Fortune' was retrieved" in other_source.message
    )
    nothing = verdict("fact_in_source", args, {"fact": claim}, transcript=TRANSCRIPT[:1])
    assert nothing.outcome == "FAIL" and "no search result at all" in nothing.message
    # A source whose name holds " | " and a claim that is the report's date.
    long_name = {
        "output": "fact",
        "source": "Business Today | Latest Stock Market And Economy News India",
    }
    assert outcome("fact_in_source", long_name, {"fact": "2023-10-07"}) == "PASS"
    assert outcome("fact_in_source", long_name, {"fact": "2023-10-08"}) == "FAIL"
    assert outcome("fact_in_source", args, {"fact": "Insufficient information."}) is None


def test_where_the_corpus_holds_no_article_of_the_source_abstaining_is_the_right_answer():
    """The run's search tool says whether the corpus holds a source at all: a claim from a
    source it lacks fails, told to abstain; abstaining passes, on that evidence only."""
    tools = corpus_tools("TechCrunch", "The Verge")
    args = {"output": "fact", "source": "Variety"}
    claim = verdict("fact_in_source", args, {"fact": "Micah Abbey"}, tools=tools)
    assert claim.outcome == "FAIL" and "holds no article from 'Variety'" in claim.message
    assert "Insufficient information" in claim.message
    abstained = verdict("fact_in_source", args, {"fact": "Insufficient information"}, tools=tools)
    assert abstained.outcome == "PASS" and abstained.strength == "strong"
    held = {"output": "fact", "source": "TechCrunch"}
    assert (
        outcome("fact_in_source", held, {"fact": "Insufficient information"}, tools=tools) is None
    )
    pair = {"first": "a", "first_source": "TechCrunch", "second": "b", "second_source": "Variety"}
    found = {"a": "committed fraud for personal gain", "b": "Insufficient information"}
    assert outcome("facts_from_sources", pair, found, tools=tools) == "PASS"
    assert outcome("facts_from_sources", pair, {**found, "b": "a film"}, tools=tools) == "FAIL"
    # A tool that cannot tell (no index) is no evidence either way.
    unknown = corpus_tools(knows=False)
    assert (
        outcome("fact_in_source", args, {"fact": "Insufficient information"}, tools=unknown) is None
    )
    assert (
        "no passage of 'Variety'"
        in verdict("fact_in_source", args, {"fact": "Micah Abbey"}, tools=unknown).message
    )


def test_facts_from_sources_wants_each_fact_from_its_own_source():
    args = {"first": "a", "first_source": "TechCrunch", "second": "b", "second_source": "The Verge"}
    right = {"a": "committed fraud for personal gain", "b": "told a trader withdrawals were fine"}
    assert outcome("facts_from_sources", args, right) == "PASS"
    swapped = verdict("facts_from_sources", args, {"a": right["b"], "b": right["a"]})
    assert (
        swapped.outcome == "FAIL" and swapped.message.startswith("a:") and "b:" in swapped.message
    )


def test_reports_in_order_reads_dates_from_outputs_and_inputs():
    args = {"earlier": "first.date", "later": "date"}
    assert (
        outcome(
            "reports_in_order", args, {"date": "2023-12-15"}, inputs={"first.date": "2023-10-31"}
        )
        == "PASS"
    )
    late = verdict(
        "reports_in_order", args, {"date": "2023-10-01"}, inputs={"first.date": "2023-10-31"}
    )
    assert late.outcome == "FAIL" and "is after" in late.message
    assert (
        outcome("reports_in_order", args, {"date": "soon"}, inputs={"first.date": "2023-10-31"})
        == "FAIL"
    )


def test_the_passages_of_a_search_are_read_back_from_the_transcript():
    found = passages(TRANSCRIPT)
    assert [p.source for p in found] == [
        "TechCrunch",
        "The Verge",
        "Business Today | Latest Stock Market And Economy News India",
    ]
    assert found[0].date.startswith("2023-10-07")
    # The text protocol's observations count; the task's own turn does not.
    observed = (UserMessage(content=SEARCH), UserMessage(content=f"Observation: {SEARCH}"))
    assert len(passages(observed)) == 3
    # The executor's final structured call sees tool results flattened into user turns.
    assert passages(flatten_tool_messages(list(TRANSCRIPT))) == found
    assert same_source("Verge", "The Verge") and not same_source("Fortune", "The Verge")
    assert not supports("Sam Altman", found[0]) and supports("Bankman-Fried", found[0])


def test_a_plan_names_a_catalog_check_with_its_arguments_or_is_refused():
    def plan(args: dict, check: str = "fact_in_source") -> dict:
        return {
            "nodes": [
                {
                    "id": "n",
                    "instruction": "x",
                    "inputs": ["USER_TASK"],
                    "outputs": {"fact": "string"},
                    "verification": [{"name": "c", "type": "check", "check": check, "args": args}],
                }
            ]
        }

    ok = parse_plan(plan({"output": "fact", "source": "TechCrunch"}))
    assert ok.nodes[0].verification[0].args == {"output": "fact", "source": "TechCrunch"}
    with pytest.raises(PlanError, match="missing argument 'source'"):
        parse_plan(plan({"output": "fact"}))
    with pytest.raises(PlanError, match="unknown argument 'page'"):
        parse_plan(plan({"output": "fact", "source": "TechCrunch", "page": 2}))
    with pytest.raises(PlanError, match="names 'claim', which is not an output"):
        parse_plan(plan({"output": "claim", "source": "TechCrunch"}))
    with pytest.raises(PlanError, match=r"'min' \(5\) is above 'max' \(1\)"):
        parse_plan(plan({"output": "fact", "min": 5, "max": 1}, "number_in_range"))
    with pytest.raises(PlanError, match="takes no arguments"):
        parse_plan(plan({"x": 1}, "arithmetic"))


@pytest.mark.parametrize("domain", sorted(DOMAIN_CHECKS))
def test_the_grammar_enumerates_the_domains_checks_with_their_arguments(domain):
    schemas = check_schemas(domain, ["fact", "answer"], ["a.date"])
    names = list(dict.fromkeys(s["properties"]["check"]["const"] for s in schemas))
    assert names == list(DOMAIN_CHECKS[domain])
    for s in schemas:
        spec = CATALOG.get(s["properties"]["check"]["const"])
        if spec is None:
            assert "args" not in s["properties"]
            continue
        args = s["properties"]["args"]
        assert set(args["required"]) == set(spec.args) == set(args["properties"])
        outputs = [a for a, k in spec.args.items() if k == "output"]
        for a, kind in spec.args.items():
            arg = args["properties"][a]
            assert {
                "output": arg.get("enum") == ["fact", "answer"]
                if len(outputs) == 1
                else arg.get("const") in ("fact", "answer"),
                "value": arg.get("enum") == ["fact", "answer", "a.date"],
                "number": arg.get("type") == "number",
                "source": arg.get("type") == "string",
            }[kind], (a, arg)
        if len(outputs) > 1:
            assert len({args["properties"][a]["const"] for a in outputs}) == len(outputs)
    node = node_schema(domain, ["fact"], ["a.date"])
    assert node["properties"]["checks"]["items"]["anyOf"] == check_schemas(
        domain, ["fact"], ["a.date"]
    )
    assert node["properties"]["inputs"]["items"] == {"enum": ["USER_TASK", "a.date"]}


def test_a_check_over_two_outputs_is_offered_only_for_two_distinct_outputs():
    def comparisons(outputs: list[str]) -> list[tuple[str, str]]:
        return [
            (
                s["properties"]["args"]["properties"]["first"]["const"],
                s["properties"]["args"]["properties"]["second"]["const"],
            )
            for s in check_schemas("qa", outputs, [])
            if s["properties"]["check"]["const"] == "facts_from_sources"
        ]

    assert comparisons(["fact"]) == []
    assert comparisons(["a", "b", "c"]) == [("a", "b"), ("a", "c"), ("b", "c")]


def test_every_check_a_plan_may_name_is_in_the_plan_schema_and_described():
    enum = plan_json_schema()["$defs"]["CheckVF"]["properties"]["check"]["enum"]
    assert enum == list(PLAN_CHECKS) and set(CATALOG) <= set(enum)
    assert set(describe()) == set(PLAN_CHECKS)
    qa = set(DOMAIN_CHECKS["qa"])
    assert {
        "yes_no",
        "entity",
        "number_in_range",
        "date",
        "fact_in_source",
        "facts_from_sources",
        "reports_in_order",
    } <= qa


def test_the_two_sides_of_a_comparison_are_two_outputs():
    with pytest.raises(ValueError, match="name the same output 'fact'"):
        CheckVF(
            name="c",
            check="facts_from_sources",
            args={"first": "fact", "first_source": "A", "second": "fact", "second_source": "B"},
        )
