import numpy as np
import pytest

from verimap.evals import data as d
from verimap.evals.retrieval import (
    Chunk,
    CorpusIndex,
    Filters,
    Hit,
    chunk_articles,
    evaluate_retrieval,
    focus,
)
from verimap.testing import HashingEmbedderDouble


@pytest.fixture
def corpus(samples):
    return d.load_multihoprag(d.resolve("multihoprag", samples))


@pytest.fixture
def index(corpus, tmp_path):
    return CorpusIndex.build(corpus[1], embedder=HashingEmbedderDouble(), cache_dir=tmp_path)


def test_chunks_follow_sentences_and_keep_metadata(corpus):
    arts = corpus[1]
    chunks = chunk_articles(arts, max_words=12)
    assert len(chunks) > len(arts)
    for c in chunks:
        assert c.text.endswith((".", "!", "?"))
        assert c.text in arts[c.article].body
        assert c.source == arts[c.article].source
    # every sentence of every article is inside exactly one chunk
    joined = {i: " ".join(c.text for c in chunks if c.article == i) for i in range(len(arts))}
    assert all(joined[i] == " ".join(a.body.split()) for i, a in enumerate(arts))


def test_search_ranks_the_matching_article_first(index):
    hits = index.search("Kestrel shipments delayed motor controllers", k=3)
    assert hits[0].chunk.title == "Kestrel arm delayed to summer"
    assert [h.rank for h in hits] == [1, 2, 3]


def test_pages_do_not_overlap_and_run_out(index):
    seen = []
    page = 1
    while hits := index.search("bank", k=3, page=page):
        seen += [h.chunk.text for h in hits]
        page += 1
    assert len(seen) == len(set(seen)) == len(index.chunks)


@pytest.mark.parametrize(
    ("filters", "check"),
    [
        (Filters(source="ledger"), lambda c: c.source == "The Ledger"),
        (Filters(author="dana"), lambda c: c.author == "Dana Fields"),
        (Filters(category="SPORTS"), lambda c: c.category == "sports"),
        (Filters(title="greenleaf"), lambda c: "Greenleaf" in c.title),
        (Filters(content="kilograms"), lambda c: "kilograms" in c.text),
        (
            Filters(date_from="2023-11-01", date_to="2023-12-31"),
            lambda c: "2023-11" <= c.published_at[:7] <= "2023-12",
        ),
    ],
)
def test_filters(index, filters, check):
    hits = index.search("news report", k=50, filters=filters)
    assert hits and all(check(h.chunk) for h in hits)
    everything = [c for c in index.chunks if check(c)]
    assert len(hits) == len(everything)


def test_index_is_cached_on_disk(corpus, tmp_path):
    first = CorpusIndex.build(corpus[1], embedder=HashingEmbedderDouble(), cache_dir=tmp_path)
    second = CorpusIndex.build(corpus[1], embedder=HashingEmbedderDouble(), cache_dir=tmp_path)
    assert first.built and not second.built
    assert np.array_equal(first.embeddings, second.embeddings)
    assert [c.text for c in first.chunks] == [c.text for c in second.chunks]
    changed = [a.model_copy(update={"body": a.body + " Extra."}) for a in corpus[1]]
    assert CorpusIndex.build(changed, embedder=HashingEmbedderDouble(), cache_dir=tmp_path).built


class FixedRankingIndexDouble:
    """Test double: returns the given chunk texts in order, whatever the query."""

    def __init__(self, texts):
        self.texts = texts

    def search_many(self, queries, k=10):
        return [
            [
                Hit(rank=i + 1, score=0.0, chunk=Chunk(article=0, text=t, title="t"))
                for i, t in enumerate(self.texts[:k])
            ]
            for _ in queries
        ]


def _q(facts, qtype="inference_query"):
    return d.MultiHopQuery(
        query="q",
        answer="a",
        question_type=qtype,
        evidence_list=[d.Evidence(fact=f) for f in facts],
    )


def test_metrics_by_hand():
    idx = FixedRankingIndexDouble(["noise", "x  fact one\nhere", "noise", "noise", "fact two"])
    m = evaluate_retrieval(
        idx, [_q(["fact one here", "fact two"]), _q(["absent"]), _q([], "null_query")]
    )
    assert m.queries == 2
    assert m.hits_at_4 == pytest.approx(0.5) and m.hits_at_10 == pytest.approx(0.5)
    assert m.mrr_at_10 == pytest.approx((1 / 2) / 2)
    # upstream's MAP@10: each hit adds the facts it finds first over its rank
    assert m.map_at_10 == pytest.approx(((1 / 2 + 1 / 5) / 2) / 2)


def test_map_counts_facts_as_upstream_lists_them():
    """A fact listed twice counts twice in the divisor and once when found; a chunk holding two
    new facts adds both over its rank."""
    idx = FixedRankingIndexDouble(["noise", "alpha and beta", "gamma"])
    m = evaluate_retrieval(idx, [_q(["alpha", "beta", "alpha", "gamma"])])
    assert m.map_at_10 == pytest.approx((2 / 2 + 1 / 3) / 4)


def test_metrics_per_question_type_and_null_queries_left_out():
    idx = FixedRankingIndexDouble(["fact a", "noise", "noise", "noise", "fact b"])
    m = evaluate_retrieval(
        idx,
        [
            _q(["fact a"], "inference_query"),
            _q(["fact b"], "comparison_query"),
            _q(["fact b"], "comparison_query"),
            _q([], "null_query"),
            _q([], "null_query"),
        ],
    )
    assert m.queries == 3 and m.excluded == {"null_query": 2}
    assert set(m.by_type) == {"inference_query", "comparison_query"}
    inf, comp = m.by_type["inference_query"], m.by_type["comparison_query"]
    assert (inf.queries, inf.hits_at_4, inf.mrr_at_10) == (1, 1.0, 1.0)
    assert (comp.queries, comp.hits_at_4, comp.hits_at_10) == (2, 0.0, 1.0)
    assert comp.mrr_at_10 == pytest.approx(1 / 5)
    assert m.hits_at_4 == pytest.approx(1 / 3) and m.mrr_at_10 == pytest.approx((1 + 2 / 5) / 3)


def test_focus_keeps_the_sentences_nearest_the_query_in_order():
    text = (
        "The match opened slowly. Rain fell in the first half. Kestrel scored twice for the "
        "Hawks late on. Fans went home happy. The coach praised Kestrel after the game."
    )
    out = focus(text, "How many goals did Kestrel score?", max_words=15)
    assert (
        out
        == "… Kestrel scored twice for the Hawks late on. … The coach praised Kestrel after the game."
    )
    assert focus(text, "anything", max_words=200) == text
    one = focus("word " * 50 + "end.", "word", max_words=10)
    assert one.endswith("…") and len(one.split()) <= 12


def test_search_many_matches_search(index):
    queries = ["Kestrel shipments delayed", "bank"]
    many = index.search_many(queries, k=3)
    assert [[h.chunk_id for h in hs] for hs in many] == [
        [h.chunk_id for h in index.search(q, k=3)] for q in queries
    ]
    assert all(index.chunks[h.chunk_id] == h.chunk for hs in many for h in hs)


def test_index_reports_its_cost(corpus, tmp_path):
    built = CorpusIndex.build(corpus[1], embedder=HashingEmbedderDouble(), cache_dir=tmp_path)
    loaded = CorpusIndex.build(corpus[1], embedder=HashingEmbedderDouble(), cache_dir=tmp_path)
    assert built.path == loaded.path and built.path.parent == tmp_path
    assert built.seconds > 0 and loaded.seconds > 0
    assert built.disk_bytes() == loaded.disk_bytes() > 0


def test_fixture_retrieval_with_the_real_minilm(corpus, tmp_path, minilm):
    idx = CorpusIndex.build(corpus[1], embedder=minilm, cache_dir=tmp_path)
    emb = idx.embeddings
    assert emb.shape == (len(idx.chunks), 384)
    assert np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-3)
    m = evaluate_retrieval(idx, corpus[0])
    assert m.queries == 5 and m.hits_at_10 == 1.0 and m.mrr_at_10 >= 0.5
