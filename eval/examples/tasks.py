"""Benchmarks written in Python, for `verimap eval -b eval/examples/tasks.py@FUNCTION`
(docs/eval.md#your-own-benchmark)."""

from verimap.evals.custom import TaskSet


def arithmetic():
    """Five word problems, scored by the final number of the answer."""
    problems = {
        "eggs": ("A box holds 12 eggs. How many eggs are in 7 boxes?", 84),
        "change": ("Ana pays 20 dollars for 3 pens at 4 dollars each. What is her change?", 8),
        "pages": (
            "A book has 240 pages. Tom reads 30 pages a day. In how many days does he finish?",
            8,
        ),
        "laps": ("A track is 400 m long. How many metres are 9 laps?", 3600),
        "share": ("Three friends share 45 marbles equally. How many does each get?", 15),
    }
    tasks = [{"id": k, "input": q, "target": a} for k, (q, a) in problems.items()]
    return TaskSet(tasks=tasks, scorer="numeric")


def palindromes():
    """A scorer of your own: any function of the task and the answer's text."""

    def first_words_agree(task, answer):
        words = answer.lower().replace(".", " ").split()
        return task.gold.lower() in words[:3]

    words = ["level", "verimap", "racecar", "planner", "noon"]
    tasks = [
        {
            "id": w,
            "input": f"Is '{w}' a palindrome? Answer Yes or No.",
            "target": "Yes" if w == w[::-1] else "No",
        }
        for w in words
    ]
    return tasks, first_words_agree
