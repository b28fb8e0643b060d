"""MultiHopRAG's question types: the official verdict read back, the order of types, pairing."""

from verimap.evals.question_types import official_correct, ordered, paired_by_type, title
from verimap.evals.scoring import score_multihoprag


def test_the_official_verdict_is_read_back_from_the_score():
    right = {"score_detail": score_multihoprag("Sam Altman", "Sam Bankman-Fried").detail}
    wrong = {"score_detail": score_multihoprag("Yes.", "Yes").detail}
    assert official_correct(right) is True and official_correct(wrong) is False
    assert official_correct({"score_detail": ""}) is None and official_correct({}) is None


def test_types_go_in_the_papers_order_then_others():
    found = ["null_query", "custom", "temporal_query", "inference_query", "null_query"]
    assert ordered(found) == ["inference_query", "temporal_query", "null_query", "custom"]
    assert title("comparison_query") == "comparison" and title("custom") == "custom"


def test_pairs_split_by_type():
    def r(qt, ok):
        return {"meta": {"question_type": qt}, "correct": ok}

    pairs = [
        (r("null_query", True), r("null_query", False)),
        (r("null_query", False), r("null_query", True)),
        (r("inference_query", True), r("inference_query", True)),
        ({"correct": True}, {"correct": False}),
    ]
    rows = paired_by_type(pairs)
    assert [(x.question_type, x.tasks, x.right_a, x.right_b, x.wins, x.losses) for x in rows] == [
        ("inference_query", 1, 1, 1, 0, 0),
        ("null_query", 2, 1, 1, 1, 1),
    ]
    assert rows[0].p_value == 1.0
