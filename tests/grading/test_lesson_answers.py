"""Every lesson exercise's check, fed answers students really write: the model solution and the right answers
of tests/answers/<lesson>.toml must print "Correct", each wrong answer its diagnostic in both languages.

One kernel per lesson: it runs the lesson's code cells in order and, right after an exercise's check cell, each
answer to that exercise followed by the check again (the model solution last, so later cells see a working
answer). A wrong answer left defined by the one before it cannot hide a failure: every answer defines every name
its exercise cell defines. An answer with `gpus = N` is judged only where N CUDA GPUs exist: a mistake that only
such a machine shows (a dropped device index) passes elsewhere.
"""
import functools
import tomllib
from pathlib import Path

import nbformat
import pytest
import torch
from nbclient import NotebookClient
from support.lessons import exercises, printed, solution_code
from support.messages import fingerprint


ROOT = Path(__file__).resolve().parents[2]
LESSONS = {path.stem: path for path in sorted((ROOT / "notebooks").glob("*.ipynb"))}
ANSWERS = ROOT / "tests" / "answers"


def corpus(stem: str) -> list[dict]:
    path = ANSWERS / f"{stem}.toml"
    return tomllib.loads(path.read_text("utf-8"))["answer"] if path.exists() else []


def cases():
    for stem, path in LESSONS.items():
        lesson = nbformat.read(path, as_version=4)
        for _, names, _, solution in exercises(lesson):
            exercise = sorted(names)[0]
            yield pytest.param(stem, f"{exercise}_model_solution", id=f"{stem}-{exercise}_model_solution")
        for answer in corpus(stem):
            yield pytest.param(stem, answer["id"], id=f"{stem}-{answer['id']}")


@functools.cache
def answered(stem: str) -> dict[str, tuple[dict, str]]:
    """answer id → (the answer, what the check printed after it), from one run of the lesson."""
    path = LESSONS[stem]
    lesson = nbformat.read(path, as_version=4)
    by_exercise = {}
    for answer in corpus(stem):
        by_exercise.setdefault(answer["exercise"], []).append(answer)
    cells, probes = [], {}
    checks = {id(check): (names, solution) for _, names, check, solution in exercises(lesson)}
    for cell in lesson.cells:
        if cell.cell_type != "code":
            continue
        cells.append(nbformat.v4.new_code_cell(cell.source))
        if id(cell) not in checks:
            continue
        names, solution = checks[id(cell)]
        exercise = sorted(names)[0]
        known = {exercise, *names}
        solution_answer = {"id": f"{exercise}_model_solution", "exercise": exercise, "correct": True,
                           "code": solution_code(solution[0])}
        for answer in [*(a for n in sorted(known) for a in by_exercise.pop(n, [])), solution_answer]:
            probe = nbformat.v4.new_code_cell(answer["code"].strip() + "\n\n" + cell.source)
            cells.append(probe)
            probes[answer["id"]] = (answer, probe)
    assert not by_exercise, f"tests/answers/{stem}.toml answers exercises the lesson does not have: {sorted(by_exercise)}"
    run = nbformat.v4.new_notebook(cells=cells, metadata=lesson.metadata)
    NotebookClient(run, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return {key: (answer, printed(probe) or str(probe.outputs)) for key, (answer, probe) in probes.items()}


def test_every_answer_file_names_a_lesson_and_ids_are_unique():
    for path in ANSWERS.glob("*.toml"):
        assert path.stem in LESSONS, f"{path.name} names no lesson"
        ids = [answer["id"] for answer in corpus(path.stem)]
        assert len(ids) == len(set(ids)), f"{path.name}: an id is used twice"


@pytest.mark.parametrize("stem, answer_id", list(cases()))
def test_the_check_judges_the_answer(stem, answer_id):
    needed = next((a.get("gpus", 0) for a in corpus(stem) if a["id"] == answer_id), 0)
    if needed > torch.cuda.device_count():
        pytest.skip(f"{answer_id} shows its mistake only with {needed} CUDA GPUs")
    answer, shown = answered(stem)[answer_id]
    if answer["correct"]:
        assert fingerprint("practice_correct").en in shown, shown
        return
    assert fingerprint("practice_not_yet").en in shown, f"a wrong answer passed ({answer.get('note', '')}):\n{shown}"
    mark = fingerprint(answer["diagnostic"])
    assert mark.en in shown and mark.zh in shown, f"expected message {answer['diagnostic']!r}:\n{shown}"
