"""Inputs to run a task's solutions on: the examples' arguments, mutations of them, and
values drawn from the signature.

The examples' own arguments come first (they are surely inside what the task describes), then
mutations of them, where code goes wrong (off by one, empty, an element dropped), then values
drawn from the parameters' annotations. Every value stays small and within the sign and range
the examples use: an input outside what the task describes makes two right solutions differ
(one raises, one returns), and that difference would dispute right code. Inputs travel as the
Python source of an argument tuple, so only values whose `repr` reads back are kept.
"""

from __future__ import annotations

import ast
import functools
import itertools
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from verimap.sandbox.worker.examples import find_examples
from verimap.sandbox.worker.snippets import DEF_RE, group_end, parse_code, task_functions

MAX_LIST, MAX_TEXT, MAX_DICT = 6, 8, 4
MAX_SOURCE = 2000  # characters of one input's source: a call shown to a model must stay short
DEFAULT_ALPHABET = "abcdeAB "
_DEF = re.compile(DEF_RE, re.M)


@functools.lru_cache(maxsize=64)
def entry_point(task: str) -> str | None:
    """The function the task asks for: its last top-level def, as the examples' parser reads it."""
    return find_examples(task)[1]


@dataclass(frozen=True)
class Param:
    name: str
    annotation: ast.expr | None
    required: bool


def parameters(task: str, entry: str) -> list[Param] | None:
    """The positional parameters of the task's `def entry(...)`; None when it cannot be read
    or takes *args (no fixed argument list to draw)."""
    task = task.replace("\r\n", "\n")
    info = task_functions(ast, task).get(entry)
    m = _DEF.match(task, info[2]) if info else None
    end = group_end(task, m.end() - 1) if m else -1
    if m is None or end < 0:
        return None
    tree = parse_code(ast, f"def f({task[m.end() : end - 1]}):\n pass", "exec")
    if tree is None or not isinstance(tree.body[0], ast.FunctionDef):
        return None
    args = tree.body[0].args
    if args.vararg is not None:
        return None
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    return [Param(a.arg, a.annotation, i < first_default) for i, a in enumerate(positional)]


def example_args(task: str, entry: str, params: list[Param] | None) -> list[tuple[Any, ...]]:
    """The argument tuples of the task's example calls to `entry`, in the order written, then
    those of other calls written in the task whose result is not a literal (`f("5 apples",
    19) -> 19 - 5 = 14`): their arguments are still inputs the task means."""
    calls = [call for call, _, _ in find_examples(task)[0]]
    calls += [
        task[m.start() : end]
        for m in re.finditer(rf"(?<![\w.]){re.escape(entry)}\s*\(", task)
        if (end := group_end(task, m.end() - 1)) > 0
    ]
    out: list[tuple[Any, ...]] = []
    for call in calls:
        node = parse_code(ast, call)
        for sub in ast.walk(node) if node is not None else ():
            if (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Name)
                and sub.func.id == entry
            ):
                args = call_args(sub, params)
                if args is not None and args not in out:
                    out.append(args)
    return out


def call_args(call: ast.Call, params: list[Param] | None) -> tuple[Any, ...] | None:
    """A call's arguments as one positional tuple, keywords put in their parameter's place."""
    values: list[Any] = []
    try:
        values = [ast.literal_eval(a) for a in call.args]
        named = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if named:
        names = [p.name for p in params or []]
        if None in named or not set(named) <= set(names[len(values) :]):
            return None
        for name in names[len(values) :]:
            if name not in named:
                break
            values.append(named.pop(name))
        if named:  # a keyword after a gap: it has no position of its own
            return None
    required = sum(p.required for p in params or [])
    return tuple(values) if len(values) >= required else None


@dataclass
class Profile:
    """What the examples pass for one parameter: the numbers and characters seen in it, at any
    depth, which bound what is drawn and mutated for it."""

    ints: list[int] = field(default_factory=list)
    floats: list[float] = field(default_factory=list)
    chars: set[str] = field(default_factory=set)
    # The words of texts written as words ('three one five'): drawn as words, not characters.
    words: set[str] = field(default_factory=set)
    values: list[Any] = field(default_factory=list)

    def add(self, value: Any) -> None:
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, int):
            self.ints.append(value)
        elif isinstance(value, float):
            self.floats.append(value)
        elif isinstance(value, str):
            self.chars.update(value)
            if _worded(value):
                self.words.update(value.split())
        elif isinstance(value, list | tuple | set | frozenset):
            for v in value:
                self.add(v)
        elif isinstance(value, dict):
            for k, v in value.items():
                self.add(k)
                self.add(v)

    def bounds(self, kind: type) -> tuple[float, float]:
        """The range for a number of this parameter: the sign the examples use, twice their
        magnitude; with none, 0 to 10 (many tasks mean counts)."""
        seen = [float(v) for v in (self.ints if kind is int else self.floats)]
        if not seen:
            return (0, 10)
        reach = 2 * max(abs(min(seen)), abs(max(seen)), 5 if kind is int else 1)
        return (0 if min(seen) >= 0 else -reach, 0 if max(seen) <= 0 else reach)

    def admits(self, value: Any) -> bool:
        """`fits`, and empty only where an example passes an empty value: an empty string or
        list the task never shows is often outside what it describes, and solutions that differ
        there (HumanEval/6: `[0]` or `[]` for no groups) dispute right code."""
        containers = str | list | tuple | dict | set
        shown = any(isinstance(v, containers) and not v for v in self.values)
        if isinstance(value, containers) and not value and self.values and not shown:
            return False
        return self.fits(value)

    def fits(self, value: Any) -> bool:
        if isinstance(value, bool) or value is None:
            return True
        if isinstance(value, int | float):
            lo, hi = self.bounds(type(value))
            return lo <= value <= hi
        if isinstance(value, str):
            return len(value) <= 2 * max(MAX_TEXT, *(len(v) for v in self._texts()))
        if isinstance(value, list | tuple):
            return all(self.fits(v) for v in value)
        if isinstance(value, dict):
            return all(self.fits(k) and self.fits(v) for k, v in value.items())
        return True

    def _texts(self) -> list[str]:
        return [v for v in self.values if isinstance(v, str)] or [""]

    def alphabet(self) -> str:
        return "".join(sorted(self.chars)) or DEFAULT_ALPHABET


def profiles(examples: list[tuple[Any, ...]], arity: int) -> list[Profile]:
    out = [Profile() for _ in range(arity)]
    for args in examples:
        for p, v in zip(out, args, strict=False):
            p.add(v)
            p.values.append(v)
    return out


def mutations(value: Any, rng: random.Random) -> list[Any]:
    """Values near `value` where code goes wrong: off by one, doubled, zero, an element or a
    character dropped, duplicated or swapped, reversed, empty."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1, value * 2, 0]
    if isinstance(value, float):
        return [round(value + 0.5, 6), round(value - 0.5, 6), value * 2, round(value, 0)]
    if isinstance(value, str) and _worded(value):
        structural = _sequence_mutations(value.split(), rng)[:5]  # words are kept whole
        return [" ".join(words) for words in structural]
    if isinstance(value, str | list | tuple) and value:
        return _sequence_mutations(value, rng)
    if isinstance(value, dict) and value:
        return [dict(itertools.islice(value.items(), len(value) - 1)), {}]
    return []


def _worded(text: str) -> bool:
    return len(text.split()) > 1


def _sequence_mutations(seq: Any, rng: random.Random) -> list[Any]:
    i, j = rng.randrange(len(seq)), rng.randrange(len(seq))
    kind = type(seq)
    k = min(i, len(seq) - 2)
    out = [
        seq[:i] + seq[i + 1 :],  # dropped
        seq[: j + 1] + seq[j : j + 1] + seq[j + 1 :],  # duplicated
        seq[:k] + seq[k + 1 : k + 2] + seq[k : k + 1] + seq[k + 2 :],  # swapped
        seq[::-1],
        kind(),
    ]
    if kind is not str:  # one element changed
        out += [seq[:i] + kind([m]) + seq[i + 1 :] for m in mutations(seq[i], rng)[:2]]
    return out


def mutated(args: tuple[Any, ...], found: list[Profile], rng: random.Random) -> list[tuple]:
    """Argument tuples that change one argument of `args`, within that argument's profile; the
    arguments take turns, so a small limit still changes each."""
    per_arg = [
        [(*args[:i], m, *args[i + 1 :]) for m in mutations(value, rng) if profile.admits(m)]
        for i, (value, profile) in enumerate(zip(args, found, strict=False))
    ]
    return list(_interleave(per_arg))


# A kind of value to draw: ("int", lo, hi) | ("float", lo, hi) | ("str", alphabet) | ("words",
# words) | ("bool",)# | ("none",) | ("list", kind) | ("tuple", kinds) | ("tuples", kind) | ("dict", key, value)
# | ("one_of", kinds).
Kind = tuple[Any, ...]
_NAMES = {"List": "list", "Tuple": "tuple", "Dict": "dict", "Sequence": "list"}


def kind_of(annotation: ast.expr | None, profile: Profile) -> Kind | None:
    """What to draw for a parameter: its annotation read, else what its examples pass."""
    if annotation is None:
        return _kind_of_value(profile.values[0], profile) if profile.values else None
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        parsed = parse_code(ast, annotation.value)
        return kind_of(parsed, profile) if isinstance(parsed, ast.expr) else None
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return ("none",)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _one_of([annotation.left, annotation.right], profile)
    name = _name(annotation.value if isinstance(annotation, ast.Subscript) else annotation)
    name = _NAMES.get(name, name.lower() if name in ("Optional", "Union") else name)
    if not isinstance(annotation, ast.Subscript):
        return _simple(name, profile)
    inner = annotation.slice
    items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
    if name == "list":
        return _wrap("list", kind_of(items[0], profile))
    if name == "tuple":
        if len(items) == 2 and isinstance(items[1], ast.Constant) and items[1].value is ...:
            return _wrap("tuples", kind_of(items[0], profile))
        kinds = [kind_of(i, profile) for i in items]
        return ("tuple", kinds) if all(kinds) else None
    if name == "dict" and len(items) == 2:
        key, value = kind_of(items[0], profile), kind_of(items[1], profile)
        return ("dict", key, value) if key and value and key[0] in _HASHABLE else None
    if name == "optional":
        return _one_of([ast.Constant(None), items[0]], profile)
    if name == "union":
        return _one_of(items, profile)
    return None


_HASHABLE = ("int", "str", "bool", "float")


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def _wrap(tag: str, inner: Kind | None) -> Kind | None:
    return (tag, inner) if inner else None


def _one_of(nodes: Sequence[ast.expr], profile: Profile) -> Kind | None:
    kinds = [kind_of(n, profile) for n in nodes]
    return ("one_of", kinds) if all(kinds) else None


def _simple(name: str, profile: Profile) -> Kind | None:
    if name in ("int", "float"):
        return (name, *profile.bounds(int if name == "int" else float))
    if name == "str":
        return (
            ("words", tuple(sorted(profile.words)))
            if profile.words
            else ("str", profile.alphabet())
        )
    if name == "bool":
        return ("bool",)
    if name in ("list", "tuple", "dict") and profile.values:
        return _kind_of_value(profile.values[0], profile)
    return None


def _kind_of_value(value: Any, profile: Profile) -> Kind | None:
    if isinstance(value, bool):
        return ("bool",)
    if value is None:
        return ("none",)
    if isinstance(value, int | float | str):
        return _simple(type(value).__name__, profile)
    if isinstance(value, list | tuple):
        inner = _kind_of_value(value[0], profile) if value else ("int", *profile.bounds(int))
        return _wrap("list" if isinstance(value, list) else "tuples", inner)
    if isinstance(value, dict) and value:
        key, val = next(iter(value.items()))
        k, v = _kind_of_value(key, profile), _kind_of_value(val, profile)
        return ("dict", k, v) if k and v and k[0] in _HASHABLE else None
    return None


def strategy(kind: Kind) -> Any:
    """The hypothesis strategy for a kind (hypothesis is imported only when it is there)."""
    from hypothesis import strategies as st

    tag = kind[0]
    if tag in ("int", "float"):
        lo, hi = kind[1], kind[2]
        if tag == "int":
            return st.integers(int(lo), int(hi))
        return st.floats(lo, hi, allow_nan=False, allow_infinity=False).map(lambda x: round(x, 3))
    simple = {
        "str": lambda: st.text(kind[1], max_size=MAX_TEXT),
        "bool": st.booleans,
        "none": st.none,
    }
    if tag in simple:
        return simple[tag]()
    if tag == "words":
        return st.lists(st.sampled_from(kind[1]), max_size=MAX_LIST).map(" ".join)
    if tag == "list":
        return st.lists(strategy(kind[1]), max_size=MAX_LIST)
    if tag == "tuples":
        return st.lists(strategy(kind[1]), max_size=MAX_LIST).map(tuple)
    if tag == "tuple":
        return st.tuples(*(strategy(k) for k in kind[1]))
    if tag == "dict":
        return st.dictionaries(strategy(kind[1]), strategy(kind[2]), max_size=MAX_DICT)
    return st.one_of(*(strategy(k) for k in kind[1]))


def draw(kind: Kind, rng: random.Random) -> Any:
    """One value of a kind, without hypothesis."""
    tag = kind[0]
    if tag == "int":
        return rng.randint(int(kind[1]), int(kind[2]))
    if tag == "float":
        return round(rng.uniform(kind[1], kind[2]), 3)
    if tag == "str":
        return "".join(rng.choice(kind[1]) for _ in range(rng.randint(0, MAX_TEXT)))
    if tag == "words":
        return " ".join(rng.choice(kind[1]) for _ in range(rng.randint(0, MAX_LIST)))
    if tag in ("bool", "none"):
        return rng.random() < 0.5 if tag == "bool" else None
    if tag in ("list", "tuples"):
        items = [draw(kind[1], rng) for _ in range(rng.randint(0, MAX_LIST))]
        return items if tag == "list" else tuple(items)
    if tag == "tuple":
        return tuple(draw(k, rng) for k in kind[1])
    if tag == "dict":
        return {draw(kind[1], rng): draw(kind[2], rng) for _ in range(rng.randint(0, MAX_DICT))}
    return draw(rng.choice(kind[1]), rng)


def drawn(kinds: list[Kind], n: int, seed: int) -> list[tuple[Any, ...]]:
    """`n` argument tuples drawn for `kinds`: with hypothesis when it is installed (it starts
    from the simplest values, empty and zero, where code breaks; it is a dev dependency only),
    else with random."""
    try:
        return _drawn_by_hypothesis(kinds, n, seed)
    except Exception:  # not installed, or it will not run here (inside another @given)
        rng = random.Random(seed)
        return [tuple(draw(k, rng) for k in kinds) for _ in range(n)]


def _drawn_by_hypothesis(kinds: list[Kind], n: int, seed: int) -> list[tuple[Any, ...]]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seeded
    from hypothesis import strategies as st

    out: list[tuple[Any, ...]] = []

    @seeded(seed)
    @settings(
        database=None,
        max_examples=n,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.tuples(*(strategy(k) for k in kinds)))
    def collect(args: tuple[Any, ...]) -> None:
        out.append(args)

    collect()
    return out


def literal_source(args: tuple[Any, ...]) -> str | None:
    """`repr(args)` when it reads back as the same value (no nan, no objects), else None."""
    source = repr(args)
    if len(source) > MAX_SOURCE:
        return None
    try:
        back = ast.literal_eval(source)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return source if back == args and repr(back) == source else None


def generate_inputs(task: str, entry: str, *, limit: int = 24, seed: int = 0) -> list[str]:
    """Argument lists (Python source of a tuple) to run solutions on, the same for a seed: the
    examples' own arguments, then mutations of them, then values drawn from the signature,
    with a third of `limit` kept for the drawn ones when the mutations are many."""
    params = parameters(task, entry)
    examples = example_args(task, entry, params)
    arity = len(params) if params is not None else max((len(a) for a in examples), default=0)
    found = profiles(examples, arity)
    rng = random.Random(seed)
    near = list(_interleave([mutated(a, found, rng) for a in examples]))
    wanted = [
        kind_of(p.annotation, f) for p, f in zip(params or [], found, strict=False) if p.required
    ]
    kinds = [k for k in wanted if k is not None]
    far = drawn(kinds, 2 * limit, seed) if params is not None and len(kinds) == len(wanted) else []
    far = [a for a in far if all(f.admits(v) for v, f in zip(a, found, strict=False))]
    chosen: dict[str, None] = {}
    _take(chosen, examples, limit)
    _take(chosen, near, limit - min(len(far), limit // 3))
    _take(chosen, far, limit)
    _take(chosen, near, limit)
    return list(chosen)


def _interleave(groups: list[list[tuple]]) -> Iterable[tuple]:
    """Each example's first mutation, then each one's second, ...: a small limit still
    changes every example."""
    for row in itertools.zip_longest(*groups):
        yield from (args for args in row if args is not None)


def _take(chosen: dict[str, None], candidates: Iterable[tuple[Any, ...]], limit: int) -> None:
    for args in candidates:
        if len(chosen) >= limit:
            return
        source = literal_source(args)
        if source is not None:
            chosen.setdefault(source)


def call_text(entry: str, source: str) -> str:
    """`entry(1, [2])` for the input `(1, [2])`, as a reader would write the call."""
    tree = parse_code(ast, source)
    if not isinstance(tree, ast.Tuple):
        return f"{entry}{source}"
    return f"{entry}({', '.join(ast.unparse(e) for e in tree.elts)})"
