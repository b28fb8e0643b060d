import pytest
from pydantic import BaseModel

from verimap.base.messages import AssistantMessage
from verimap.llm.structured import StructuredOutputError, extract_json, request_structured
from verimap.testing import ScriptedModel


class Answer(BaseModel):
    value: int
    unit: str


@pytest.mark.parametrize(
    "text",
    [
        '{"value": 3, "unit": "kg"}',
        'Sure! ```json\n{"value": 3, "unit": "kg"}\n```',
        'The answer is {"value": 3, "unit": "kg"} as computed.',
        '{"value": 3, "unit": "k\ng"}',  # raw newline in a string (llama.cpp grammar allows it)
    ],
)
def test_extract_json_variants(text):
    assert extract_json(text)["value"] == 3


def test_extract_json_rejects_prose():
    with pytest.raises(ValueError):
        extract_json("no object here")


async def test_repairs_with_validation_error_then_succeeds():
    m = ScriptedModel(['{"value": "three"}', '{"value": 3, "unit": "kg"}'])
    value, responses = await request_structured(m, [{"role": "user", "content": "q"}], Answer)
    assert value == Answer(value=3, unit="kg")
    assert len(responses) == 2
    repair_prompt = m.requests[1].messages[-1].content
    assert "unit" in repair_prompt and "value" in repair_prompt
    assert m.requests[0].response_schema == Answer.model_json_schema()
    assert m.requests[1].messages[-2] == AssistantMessage(content='{"value": "three"}')


async def test_dict_schema_and_exhaustion():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    m = ScriptedModel(["nope", '{"b": 1}', '{"a": "x"}'])
    with pytest.raises(StructuredOutputError) as ei:
        await request_structured(m, [{"role": "user", "content": "q"}], schema, max_repairs=2)
    assert len(ei.value.responses) == 3
    assert ei.value.last_value == {"a": "x"}
    assert "is not of type 'integer'" in str(ei.value)
