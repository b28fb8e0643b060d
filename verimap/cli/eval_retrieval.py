"""`verimap eval retrieval`: the search tool's retrieval metrics on MultiHopRAG."""

from __future__ import annotations

import json

import click

REFERENCE = (
    "MultiHop-RAG paper (Tang & Yang 2024), best setting voyage-02 + bge-reranker-large: "
    "MRR@10 0.5860, Hits@10 0.7467, Hits@4 0.6625; text-embedding-ada-002 without reranker: "
    "MRR@10 0.4203, MAP@10 0.3431, Hits@10 0.6381, Hits@4 0.5040 (full corpus, 2255 queries)."
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
    """Hits@4, Hits@10, MAP@10 and MRR@10 of the search tool against MultiHopRAG's evidence."""
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
    m = evaluate_retrieval(index, queries[:limit] if limit else queries)
    if as_json:
        click.echo(json.dumps({**m.model_dump(), "data": str(src.root), "fixture": src.is_sample}))
        return
    where = "the committed FIXTURE (not the real dataset)" if src.is_sample else str(src.root)
    click.echo(f"MultiHopRAG retrieval on {where}: {len(corpus)} articles, {len(index.chunks)} chunks, "
               f"{m.queries} non-null queries; BM25 + all-MiniLM-L6-v2, reciprocal-rank fusion")  # fmt: skip
    click.echo("| Hits@4 | Hits@10 | MAP@10 | MRR@10 |\n|---|---|---|---|")
    click.echo(
        f"| {m.hits_at_4:.4f} | {m.hits_at_10:.4f} | {m.map_at_10:.4f} | {m.mrr_at_10:.4f} |"
    )
    click.echo(f"Reference: {REFERENCE}")
    if index.built:
        click.echo("(index built and cached)", err=True)
