"""Executor tools per benchmark domain (the paper's §3.1).

Math gets the sandboxed Python tool, the calculator and a sympy computer-algebra
tool; programming gets a workspace of files that lives in memory per task and is
shipped whole into the sandbox for every script or pytest run; QA gets a search
tool over the corpus index. Model-written code only ever runs in the sandbox.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
import re
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verimap.base.errors import VerimapError
from verimap.base.protocols import Sandbox
from verimap.evals.retrieval import Filters, Hit, focus, hit_header
from verimap.methods.votes import normal_text
from verimap.tools.registry import (
    Opening,
    Tool,
    ToolRegistry,
    ToolsExhausted,
    Transcript,
    calculator_tool,
    current_transcript,
    python_tool,
    render_result,
)

if TYPE_CHECKING:
    from verimap.evals.retrieval import CorpusIndex


def _schema(props: dict[str, dict], required: list[str]) -> dict:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


# ---- math ----------------------------------------------------------------------------------

_SYMPY_PROGRAM = r"""
import json
import sympy as sp
a = json.loads(ARGS)
op = a.get("operation", "simplify")
var = sp.Symbol(a["variable"]) if a.get("variable") else None
text = a["expression"]
if "=" in text and op == "solve" and "==" not in text:
    lhs, rhs = text.split("=", 1)
    expr = sp.Eq(sp.sympify(lhs), sp.sympify(rhs))
else:
    expr = sp.sympify(text)
if op == "simplify":
    out = sp.simplify(expr)
elif op == "solve":
    out = sp.solve(expr, var) if var is not None else sp.solve(expr)
elif op == "factor":
    out = sp.factor(expr)
elif op == "expand":
    out = sp.expand(expr)
elif op == "diff":
    out = sp.diff(expr, var) if var is not None else sp.diff(expr)
elif op == "integrate":
    out = sp.integrate(expr, var) if var is not None else sp.integrate(expr)
elif op == "evalf":
    out = sp.N(expr, 15)
else:
    raise SystemExit(f"unknown operation {op!r}")
print(out)
"""

SYMPY_OPERATIONS = ["simplify", "solve", "factor", "expand", "diff", "integrate", "evalf"]


def sympy_tool(sandbox: Sandbox, *, timeout: float = 20.0) -> Tool:
    """Computer algebra with sympy, run inside the sandbox (sympify evaluates its input)."""

    async def cas(expression: str, operation: str = "simplify", variable: str | None = None) -> str:
        if operation not in SYMPY_OPERATIONS:
            return f"error: operation must be one of {', '.join(SYMPY_OPERATIONS)}"
        args = {"expression": expression, "operation": operation, "variable": variable}
        code = f"ARGS = {json.dumps(json.dumps(args))}\n{_SYMPY_PROGRAM}"
        return render_result(await sandbox.run_program(code, timeout=timeout))

    return Tool(
        name="sympy",
        description=(
            "Computer algebra (sympy): simplify, solve (an equation 'lhs = rhs' or an expression "
            "equal to 0), factor, expand, diff, integrate or evalf an expression."
        ),
        parameters=_schema(
            {
                "expression": {"type": "string", "description": "e.g. '2*x + 3 = 11'"},
                "operation": {"type": "string", "enum": SYMPY_OPERATIONS},
                "variable": {"type": "string", "description": "the variable, e.g. 'x'"},
            },
            ["expression"],
        ),
        fn=cas,
    )


def math_tools(sandbox: Sandbox) -> ToolRegistry:
    return ToolRegistry([python_tool(sandbox), calculator_tool(), sympy_tool(sandbox)])


# ---- programming ---------------------------------------------------------------------------


class WorkspaceError(VerimapError, ValueError):
    pass


class Workspace:
    """A task's files, kept in memory and copied into the sandbox for each run.

    Keeping the files here rather than in a long-lived container means every run
    starts from exactly the files the executor sees, and nothing leaks between tasks.
    """

    def __init__(self, sandbox: Sandbox, *, timeout: float = 30.0, max_files: int = 50):
        self.sandbox = sandbox
        self.timeout = timeout
        self.max_files = max_files
        self.files: dict[str, str] = {}

    @staticmethod
    def clean(path: str) -> str:
        p = posixpath.normpath(path.strip())
        if not path.strip() or p.startswith(("/", "..")) or p == "." or "\\" in p:
            raise WorkspaceError(f"bad path {path!r}: use a relative path inside the workspace")
        return p

    def write(self, path: str, content: str) -> str:
        p = self.clean(path)
        if p not in self.files and len(self.files) >= self.max_files:
            raise WorkspaceError(f"workspace holds at most {self.max_files} files")
        self.files[p] = content
        return f"wrote {p} ({len(content)} characters)"

    def edit(self, path: str, old: str, new: str) -> str:
        p = self.clean(path)
        if p not in self.files:
            raise WorkspaceError(f"no file {p!r}; files: {', '.join(sorted(self.files)) or 'none'}")
        n = self.files[p].count(old)
        if n != 1:
            raise WorkspaceError(
                f"the text to replace occurs {n} times in {p}; it must occur exactly once"
            )
        self.files[p] = self.files[p].replace(old, new)
        return f"edited {p}"

    def delete(self, path: str) -> str:
        p = self.clean(path)
        if self.files.pop(p, None) is None:
            raise WorkspaceError(f"no file {p!r}")
        return f"deleted {p}"

    def read(self, path: str) -> str:
        p = self.clean(path)
        if p not in self.files:
            raise WorkspaceError(f"no file {p!r}; files: {', '.join(sorted(self.files)) or 'none'}")
        return self.files[p]

    def listing(self) -> str:
        return (
            "\n".join(f"{p} ({len(t)} chars)" for p, t in sorted(self.files.items())) or "(empty)"
        )

    async def run_script(self, path: str, args: list[str] | None = None) -> str:
        p = self.clean(path)
        self.read(p)
        argv = [p, *(args or [])]
        # A launcher rather than the file's text: the script gets its real name, argv and
        # the workspace on sys.path, whichever sandbox backend runs it.
        code = (
            "import os, runpy, sys\n"
            "sys.path.insert(0, os.getcwd())\n"
            f"sys.argv = {argv!r}\n"
            f"runpy.run_path({p!r}, run_name='__main__')\n"
        )
        res = await self.sandbox.run_program(
            code, files=dict(self.files), argv=argv, timeout=self.timeout
        )
        return render_result(res)

    async def run_pytest(self, args: list[str] | None = None) -> str:
        argv = ["-q", "-p", "no:cacheprovider", *(args or [])]
        code = (
            "import os, sys, pytest\n"
            "sys.path.insert(0, os.getcwd())\n"
            f"rc = int(pytest.main({argv!r}))\n"
            "if rc:\n    raise SystemExit(f'pytest exit status {rc}')\n"
        )
        res = await self.sandbox.run_program(code, files=dict(self.files), timeout=self.timeout)
        return render_result(res)


def workspace_tools(sandbox: Sandbox, workspace: Workspace | None = None) -> ToolRegistry:
    ws = workspace or Workspace(sandbox)

    def guarded(fn):
        async def call(**kw):
            try:
                res = fn(**kw)
                return await res if asyncio.iscoroutine(res) else res
            except WorkspaceError as e:
                return f"error: {e}"

        return call

    path = {"type": "string", "description": "relative path, e.g. 'solution.py'"}
    args = {"type": "array", "items": {"type": "string"}}
    return ToolRegistry(
        [
            Tool(
                "write_file",
                "Create or overwrite a file in the workspace.",
                _schema({"path": path, "content": {"type": "string"}}, ["path", "content"]),
                guarded(ws.write),
            ),
            Tool(
                "edit_file",
                "Replace one exact occurrence of `old` with `new` in a file.",
                _schema(
                    {"path": path, "old": {"type": "string"}, "new": {"type": "string"}},
                    ["path", "old", "new"],
                ),
                guarded(ws.edit),
            ),
            Tool(
                "delete_file",
                "Delete a file from the workspace.",
                _schema({"path": path}, ["path"]),
                guarded(ws.delete),
            ),
            Tool(
                "read_file",
                "Show a file's content.",
                _schema({"path": path}, ["path"]),
                guarded(ws.read),
            ),
            Tool("list_files", "List the workspace's files.", _schema({}, []), guarded(ws.listing)),
            Tool(
                "run_script",
                "Run a Python file of the workspace in the sandbox (the other files beside it).",
                _schema({"path": path, "args": args}, ["path"]),
                guarded(ws.run_script),
            ),
            Tool(
                "run_pytest",
                "Run pytest over the workspace in the sandbox.",
                _schema({"args": args}, []),
                guarded(ws.run_pytest),
            ),
        ]
    )


def programming_tools(sandbox: Sandbox) -> ToolRegistry:
    reg = workspace_tools(sandbox)
    reg.register(python_tool(sandbox))
    return reg


# ---- QA ------------------------------------------------------------------------------------

# What a QA task asks of the agent, after its question.
QA_INSTRUCTION = (
    "Answer from the news corpus, using the search tool. Give a short answer (a name, a phrase, "
    'or Yes/No). If the corpus does not hold the information, answer "Insufficient information."'
)


def question_of(task: str) -> str:
    """The question of a QA task: the task without `QA_INSTRUCTION`, which is nothing to search
    for and names a tool a closed-book model does not have."""
    return task.replace(QA_INSTRUCTION, "").strip()


_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
# How an executor with the search tool is told to go about a task (`ToolRegistry.guidance`).
QA_GUIDANCE = "Look the facts up with the search tool, then answer from its results."


@dataclass(frozen=True)
class SearchLimits:
    """What one agent conversation gets of the search tool. `results`: passages a search
    shows; `words`: of each, the sentences nearest the query up to this many words;
    `searches`: calls, after which the next call ends the agent's tool use (it then answers);
    `chars`: results text in all, which bounds what the searches add to its prompt (a search
    whose results did not all fit is the last one)."""

    results: int = 4
    words: int = 70
    searches: int = 6
    chars: int = 8000


@dataclass
class _Shown:
    """What one conversation has been shown: its searches, the passages with their labels."""

    queries: set[tuple[str, ...]] = field(default_factory=set)
    labels: dict[int, int] = field(default_factory=dict)
    calls: int = 0
    chars: int = 0


class CorpusSearch:
    """The search tool's engine over one corpus index.

    Within one agent conversation (`verimap.tools.registry.current_transcript`) a search repeated with
    the same words (any page) is answered with a short note, not results again; a passage
    already shown is named, not shown again; and `SearchLimits` bound the calls and the text.
    Passages are labelled [1], [2], ... in the order the conversation first saw them. Outside
    any conversation each call stands alone. A filter no article passes (a small model fills
    every optional argument) is ignored and named in the result. The embedder is not
    thread-safe, so queries take turns on it. Without an index the tool only describes itself
    (a planner's prompt lists it).
    """

    def __init__(self, index: CorpusIndex | None, limits: SearchLimits | None = None):
        self.index = index
        self.limits = limits or SearchLimits()
        self._lock = threading.Lock()
        self._shown: weakref.WeakKeyDictionary[Transcript, _Shown] = weakref.WeakKeyDictionary()
        self._sources: dict[str, bool] = {}

    def _hits(self, query: str, k: int, page: int = 1, filters: Filters | None = None) -> list[Hit]:
        if self.index is None:
            raise RuntimeError("this search tool has no corpus index: it only describes itself")
        with self._lock:
            return self.index.search(query, k=k, page=page, filters=filters)

    def _state(self) -> _Shown:
        t = current_transcript()
        if t is None:
            return _Shown()
        return self._shown.setdefault(t, _Shown())

    async def search(self, query: str, page: int = 1, filters: Filters | None = None) -> str:
        """What the agent reads for one search call (see the class docstring)."""
        lim, seen = self.limits, self._state()
        if seen.calls >= lim.searches:
            raise ToolsExhausted(
                f"No searches left: {seen.calls} made. Give your final answer now from the "
                "results above."
            )
        seen.calls += 1
        f = filters or Filters()
        key = (normal_text(query), *(str(v or "") for v in f.model_dump().values()))
        if key in seen.queries:
            return (
                "Already searched for this; its results are above. Search with other "
                "words, or give your final answer."
            )
        seen.queries.add(key)
        f, ignored = self._usable(f)
        note = f"(ignored filters that match no article: {', '.join(ignored)})\n" if ignored else ""
        hits = await asyncio.to_thread(self._hits, query, lim.results, page, f)
        if not hits:
            return note + "No results." + (" Try fewer filters." if f != Filters() else "")
        entries = []
        for h in hits:
            if h.chunk_id in seen.labels:
                entries.append(f"[{seen.labels[h.chunk_id]}] (shown above) {h.chunk.title}")
                continue
            label = seen.labels[h.chunk_id] = len(seen.labels) + 1
            entries.append(
                f"[{label}] {hit_header(h.chunk)}\n{focus(h.chunk.text, query, lim.words)}"
            )
        room = lim.chars - seen.chars
        if room <= 0:
            raise ToolsExhausted(
                "The search results have filled the space for them. Give your final answer now "
                "from the results above."
            )
        text, whole = _fit(entries, room)
        seen.chars = seen.chars + len(text) if whole else lim.chars
        return note + text

    def _usable(self, f: Filters) -> tuple[Filters, list[str]]:
        """`f` without the filters no article passes alone (a small model fills every optional
        argument, with "Yes" or a date in words), and those left out as `name='value'`."""
        chunks = self.index.chunks if self.index is not None else []
        ignored: dict[str, str] = {}
        for name, value in f.model_dump().items():
            if not value:
                continue
            alone = Filters.model_validate({name: value})
            bad_date = name.startswith("date_") and not _ISO_DAY.match(value)
            if bad_date or not any(alone.accepts(c) for c in chunks):
                ignored[name] = value
        kept = f.model_copy(update=dict.fromkeys(ignored))
        return kept, [f"{k}={v!r}" for k, v in ignored.items()]

    def holds_source(self, name: str) -> bool | None:
        """Whether any article is from a source whose name contains `name` (case-insensitive,
        as the `source` filter matches); None without an index (it cannot tell)."""
        if self.index is None:
            return None
        key = name.strip().lower()
        if key not in self._sources:
            only = Filters(source=key)
            self._sources[key] = bool(key) and any(only.accepts(c) for c in self.index.chunks)
        return self._sources[key]

    def passages(self, task: str, k: int) -> str:
        """The `k` passages that best match the task's question, whole and numbered: the
        context a retrieve-then-read baseline gives the model."""
        hits = self._hits(question_of(task), k)
        return "\n\n".join(f"[{h.rank}] {hit_header(h.chunk)}\n{h.chunk.text}" for h in hits)


def _fit(entries: list[str], room: int) -> tuple[str, bool]:
    """The entries that fit in `room` characters, in order (the first one cut when alone it
    does not fit), with a note of how many were left out; and whether all of them fit."""
    out: list[str] = []
    used = 0
    for e in entries:
        if used + len(e) + 2 > room:
            break
        out.append(e)
        used += len(e) + 2
    if not out:
        return entries[0][: max(room - 1, 0)] + "…", False
    left = len(entries) - len(out)
    return "\n\n".join(out) + (f"\n({left} more left out: no room)" if left else ""), not left


@dataclass
class SearchTool(Tool):
    """The `search` tool, with its engine at hand for methods that retrieve without an agent
    (`passages`)."""

    engine: CorpusSearch = field(default_factory=lambda: CorpusSearch(None), repr=False)

    def question(self, task: str) -> str:
        return question_of(task)

    def passages(self, task: str, k: int) -> str:
        return self.engine.passages(task, k)

    def holds_source(self, name: str) -> bool | None:
        return self.engine.holds_source(name)


def search_tool(index: CorpusIndex | None, *, limits: SearchLimits | None = None) -> SearchTool:
    """Search over the corpus (see `CorpusSearch`)."""
    engine = CorpusSearch(index, limits)

    async def search(
        query: str,
        page: int = 1,
        title: str | None = None,
        author: str | None = None,
        category: str | None = None,
        source: str | None = None,
        content: str | None = None,
        date_from: str | None = None,
        date_to: str | None = None,
    ) -> str:
        try:
            page = int(page)
        except (TypeError, ValueError):
            return "error: page must be an integer >= 1"
        if page < 1:
            return "error: page must be an integer >= 1"
        f = Filters(
            title=title,
            author=author,
            category=category,
            source=source,
            content=content,
            date_from=date_from,
            date_to=date_to,
        )
        return await engine.search(query, page, f if f != Filters() else None)

    s = {"type": "string"}
    tool = SearchTool(
        name="search",
        description=(
            f"Search the news corpus ({engine.limits.results} results a search). Optional filters "
            "(case-insensitive substrings): title, author, category, source, content; dates as "
            "YYYY-MM-DD: date_from, date_to."
        ),
        parameters=_schema(
            {
                "query": s,
                "page": {"type": "integer", "minimum": 1},
                "title": s,
                "author": s,
                "category": s,
                "source": s,
                "content": s,
                "date_from": s,
                "date_to": s,
            },
            ["query"],
        ),
        fn=search,
        engine=engine,
    )
    return tool


# The most sources an opening searches one by one; a request naming more gets one search.
OPENING_SOURCES = 3
# A source's name as questions write it: the part before a tagline ("Cnbc | World Business ...",
# "BBC News - Technology", "Live Science: The Most ...").
_SOURCE_TAGLINE = re.compile(r"\s*[|:]\s|\s+-\s")


def source_names(sources: Iterable[str]) -> list[str]:
    """The distinct short names of the corpus's sources (`_SOURCE_TAGLINE`), longest first."""
    names = {_SOURCE_TAGLINE.split(s, maxsplit=1)[0].strip() for s in sources if s.strip()}
    return sorted(names, key=lambda n: (-len(n), n))


def named_sources(text: str, names: Sequence[str]) -> list[str]:
    """The names in `names` that `text` mentions, in the order it first does: as written, or
    in capitals ("CNBC" for "Cnbc"), on word boundaries (so "Fortune" is not "fortunes"), a
    name inside a longer one named ("The Age" in "The Agenda") not counted twice."""
    found: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []
    for name in names:
        pattern = re.compile(rf"(?<!\w)(?:{re.escape(name)}|{re.escape(name.upper())})(?!\w)")
        for m in pattern.finditer(text):
            if not any(a <= m.start() < b for a, b in taken):
                taken.append(m.span())
                found.append((m.start(), name))
                break
    return [n for _, n in sorted(found)]


def search_opening(engine: CorpusSearch) -> Opening:
    """The search tool's opening (`ToolRegistry.opening`): for an instruction that names sources
    of the corpus, a search for the instruction in each of them (up to `OPENING_SOURCES`);
    otherwise a search for the instruction and the question it is given, in each source that
    text names, or over the whole corpus. A small model's own first search is often its
    instruction word for word with every optional filter filled in; this one reads the names."""
    names: list[str] | None = None

    def opening(instruction: str, given: str) -> list[tuple[str, dict[str, Any]]]:
        nonlocal names
        if engine.index is None:
            return []
        if names is None:
            names = source_names({c.source for c in engine.index.chunks})
        query = question_of(instruction)
        named = named_sources(query, names)
        if not named:
            query = question_of(f"{instruction}\n{given}".strip())
            named = named_sources(query, names)
        if not named or len(named) > OPENING_SOURCES:
            return [("search", {"query": query})]
        return [("search", {"query": query, "source": n}) for n in named]

    return opening


def qa_tools(index: CorpusIndex | None, *, limits: SearchLimits | None = None) -> ToolRegistry:
    """The search tool over `index`, with its guidance and its opening search."""
    tool = search_tool(index, limits=limits)
    return ToolRegistry([tool], guidance=QA_GUIDANCE, opening=search_opening(tool.engine))
