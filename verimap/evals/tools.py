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
import threading
from typing import TYPE_CHECKING

from verimap.errors import VerimapError
from verimap.sandbox.base import Sandbox
from verimap.tools import Tool, ToolRegistry, calculator_tool, python_tool, render_result

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
            Tool("write_file", "Create or overwrite a file in the workspace.",
                 _schema({"path": path, "content": {"type": "string"}}, ["path", "content"]),
                 guarded(ws.write)),
            Tool("edit_file", "Replace one exact occurrence of `old` with `new` in a file.",
                 _schema({"path": path, "old": {"type": "string"}, "new": {"type": "string"}},
                         ["path", "old", "new"]),
                 guarded(ws.edit)),
            Tool("delete_file", "Delete a file from the workspace.", _schema({"path": path}, ["path"]),
                 guarded(ws.delete)),
            Tool("read_file", "Show a file's content.", _schema({"path": path}, ["path"]),
                 guarded(ws.read)),
            Tool("list_files", "List the workspace's files.", _schema({}, []),
                 guarded(ws.listing)),
            Tool("run_script", "Run a Python file of the workspace in the sandbox (the other files beside it).",
                 _schema({"path": path, "args": args}, ["path"]), guarded(ws.run_script)),
            Tool("run_pytest", "Run pytest over the workspace in the sandbox.",
                 _schema({"args": args}, []), guarded(ws.run_pytest)),
        ]
    )  # fmt: skip


def programming_tools(sandbox: Sandbox) -> ToolRegistry:
    reg = workspace_tools(sandbox)
    reg.register(python_tool(sandbox))
    return reg


# ---- QA ------------------------------------------------------------------------------------


def search_tool(index: CorpusIndex | None, *, page_size: int = 4) -> Tool:
    """Search over the corpus; the embedder is not thread-safe, so queries take turns on it.
    Without an index the tool only describes itself (a planner's prompt lists it)."""
    from verimap.evals.retrieval import Filters, format_hits

    lock = threading.Lock()

    def _search(query: str, page: int, filters: Filters) -> str:
        if index is None:
            raise RuntimeError("this search tool has no corpus index: it only describes itself")
        with lock:
            hits = index.search(query, k=page_size, page=page, filters=filters)
        return format_hits(hits, page)

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
        f = Filters(title=title, author=author, category=category, source=source,
                    content=content, date_from=date_from, date_to=date_to)  # fmt: skip
        return await asyncio.to_thread(_search, query, page, f)

    s = {"type": "string"}
    return Tool(
        name="search",
        description=(
            f"Search the news corpus ({page_size} results a page). Optional filters (case-insensitive "
            "substrings): title, author, category, source, content; dates as YYYY-MM-DD: date_from, date_to."
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
    )


def qa_tools(index: CorpusIndex | None) -> ToolRegistry:
    return ToolRegistry([search_tool(index)])
