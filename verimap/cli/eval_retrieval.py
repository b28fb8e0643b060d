"""`verimap eval retrieval`: the search tool's retrieval metrics on MultiHopRAG."""

from __future__ import annotations

import json
import resource
import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from verimap.evals.retrieval import RetrievalMetrics

REFERENCE = (
    "MultiHop-RAG paper (Tang & Yang 2024), best setting voyage-02 + bge-reranker-large: "
    "MRR@10 0.5860, Hits@10 0.7467, Hits@4 0.6625; text-embedding-ada-002 without reranker: "
    "MRR@10 0.4203, MAP@10 0.3431, Hits@10 0.6381, Hits@4 0.5040 (full corpus, 2255 queries)."
)
TYPES_NOTE = (
    "Null queries have no evidence in the corpus, so they are left out, as upstream's "
    "retrieval_evaluate.py leaves them out; the paper reports no per-type retrieval figures."
)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def _row(name: str, m: RetrievalMetrics) -> str:
    return (
        f"| {name} | {m.queries} | {m.hits_at_4:.4f} | {m.hits_at_10:.4f} | {m.map_at_10:.4f} "
        f"| {m.mrr_at_10:.4f} |"
    )


@click.command("retrieval")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None)
@click.option(
    "--limit", "-n", type=click.IntRange(min=1), default=None, help="First N queries only."
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Index cache [$VERIMAP_CACHE].",
)
@click.option("--chunk-words", type=click.IntRange(min=10), default=120, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
def retrieval(
    data_dir: str | None, limit: int | None, cache_dir: str | None, chunk_words: int, as_json: bool
) -> None:
    """Hits@4, Hits@10, MAP@10 and MRR@10 of the search tool against MultiHopRAG's evidence,
    overall and per question type, and what the index cost to build (or load): seconds, disk,
    and this process's peak memory."""
    from verimap.evals import data as d
    from verimap.evals.retrieval import CorpusIndex, RetrievalUnavailable, evaluate_retrieval

    try:
        src = d.resolve("multihoprag", data_dir)
        queries, corpus = d.load_multihoprag(src)
    except d.DataError as e:
        raise click.ClickException(str(e)) from None
    try:
        index = CorpusIndex.build(corpus, cache_dir=cache_dir, max_words=chunk_words)
    except RetrievalUnavailable as e:
        raise click.ClickException(str(e)) from None
    index_rss = peak_rss_mb()
    m = evaluate_retrieval(index, queries[:limit] if limit else queries)
    cost = {
        "index_built": index.built,
        "index_seconds": round(index.seconds, 2),
        "index_dir": str(index.path) if index.path else None,
        "index_disk_bytes": index.disk_bytes(),
        "peak_rss_mb_after_index": round(index_rss, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    if as_json:
        click.echo(
            json.dumps(
                {
                    **m.model_dump(),
                    **cost,
                    "chunks": len(index.chunks),
                    "data": str(src.root),
                    "fixture": src.is_sample,
                }
            )
        )
        return
    where = "the committed FIXTURE (not the real dataset)" if src.is_sample else str(src.root)
    left_out = ", ".join(f"{n} {t}" for t, n in m.excluded.items()) or "none"
    click.echo(
        f"MultiHopRAG retrieval on {where}: {len(corpus)} articles, {len(index.chunks)} chunks, "
        f"{m.queries} queries with evidence (left out: {left_out}); BM25 + all-MiniLM-L6-v2, "
        "reciprocal-rank fusion"
    )
    click.echo("| Queries | n | Hits@4 | Hits@10 | MAP@10 | MRR@10 |\n|---|---|---|---|---|---|")
    click.echo(_row("all", m))
    for t, tm in m.by_type.items():
        click.echo(_row(t.removesuffix("_query"), tm))
    click.echo(TYPES_NOTE)
    click.echo(f"Reference: {REFERENCE}")
    how = "built and cached" if index.built else "loaded from the cache"
    click.echo(
        f"Index {how} in {index.seconds:.1f} s at {index.path} ({index.disk_bytes() / 1e6:.1f} MB "
        f"on disk); peak RSS {index_rss:.0f} MB after the index, {peak_rss_mb():.0f} MB at the end",
        err=True,
    )
