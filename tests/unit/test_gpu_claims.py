"""The script of the lessons' CUDA-only claims (tests/gpu_claims.py) runs what it can and fails loudly."""
import ast
import re
import subprocess
import sys

import nbformat
import pytest
import torch

from autograder.messages import catalogue
from autograder.practice import on_a_gpu
from course.classroom import ROOT
from support.lessons import english_headings
from support.messages import shows


sys.path.insert(0, str(ROOT / "tests"))
import gpu_claims  # noqa: E402


def run_script(**env) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, str(ROOT / "tests" / "gpu_claims.py")], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **env})


def test_every_cuda_only_lesson_cell_says_what_it_shows_on_a_gpu_and_has_a_claim():
    """A cell that runs only where CUDA is prints, elsewhere, a sentence of the catalogue in both languages
    (no CI vocabulary), and the script checks that cell on a GPU against that sentence."""
    cells = gpu_claims.gpu_only_cells()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "code" and re.search(r"^if torch\.cuda\.is_available\(\)", cell.source, re.M):
                assert gpu_claims.ON_A_GPU.search(cell.source), f"{path.stem} cell {index}: else: on_a_gpu(KEY)"
            printed = "".join(o.get("text", "") for o in cell.get("outputs", []))
            assert not re.search(r"gpu_claims|GPU job|GPU 任务|skipped on this machine", printed), (
                f"{path.stem} cell {index} speaks CI to students")
    assert set(cells) == set(gpu_claims.SHOWN), "each cell's lines are listed, and only theirs"
    for key, (path, index, gpus) in cells.items():
        assert {"en", "zh"} <= set(catalogue()[key]), key
        [linked] = [c for c in gpu_claims.CLAIMS if c.shown == key]
        assert linked.needs == ("2 cuda" if gpus >= 2 else "cuda"), key


def _checks(statements) -> bool:
    """Whether these statements hold an `assert` or a `raise AssertionError(...)`."""
    nodes = [node for statement in statements for node in ast.walk(statement)]
    return any(isinstance(node, ast.Assert) or isinstance(node, ast.Raise) and node.exc is not None
               and "AssertionError" in ast.unparse(node.exc) for node in nodes)


@pytest.mark.parametrize("key", sorted(gpu_claims.SHOWN))
def test_a_cuda_only_cell_asserts_what_it_prints_inside_its_gpu_branch(key):
    """On a GPU the lesson itself fails when the claim drifts (nbval on a GPU runner, or a student's GPU),
    not only the script that reads its output afterwards."""
    path, index, _ = gpu_claims.gpu_only_cells()[key]
    tree = ast.parse(nbformat.read(path, as_version=4).cells[index].source)
    [gpu_branch] = [node for node in tree.body if isinstance(node, ast.If) and "torch.cuda.is_available()" in ast.unparse(node.test)]
    assert _checks(gpu_branch.body), f"{path.stem} cell {index}: the GPU branch prints without asserting"
    assert not _checks(gpu_branch.orelse), f"{path.stem} cell {index}: the branch without a GPU only says what it shows"


@pytest.mark.parametrize("key", sorted(gpu_claims.SHOWN))
def test_each_line_a_claim_requires_is_in_its_cells_sentence(key):
    """What the script requires a cell to print on a GPU is what the cell tells students it prints."""
    sentence = catalogue()[key]["en"]
    for expected in gpu_claims.SHOWN[key]:
        if isinstance(expected, str):
            assert re.search(expected, sentence), f"{key}: the sentence does not say {expected!r}"
    for call in (gpu_claims.SYNCHRONISING + gpu_claims.NOT_SYNCHRONISING if key == "gpu_shows_hidden_syncs" else []):
        assert f"`{call}`" in sentence, call


def test_the_claims_read_what_the_lessons_print():
    """The parsers behind the numeric claims, on the lines the cells print."""
    timings = "cuda: pageable: 9.00 ms\ncuda: pinned: 5.00 ms\ncuda: blocking: 10.00 ms\ncuda: non_blocking: 5.50 ms\n"
    [faster_pinned, overlapped] = gpu_claims.SHOWN["gpu_shows_transfer_timings"]
    assert faster_pinned(timings) and overlapped(timings)
    assert not overlapped(timings.replace("non_blocking: 5.50", "non_blocking: 9.50"))
    [launch] = gpu_claims.SHOWN["gpu_shows_launch_blocking"]
    assert launch("without CUDA_LAUNCH_BLOCKING: raised at line 6\nwith CUDA_LAUNCH_BLOCKING=1:  raised at line 4\n")
    assert not launch("without CUDA_LAUNCH_BLOCKING: raised at line 4\nwith CUDA_LAUNCH_BLOCKING=1:  raised at line 4\n")
    syncs = gpu_claims.SHOWN["gpu_shows_hidden_syncs"][0]
    printed = "".join(f"{call:38} synchronises: True\n" for call in gpu_claims.SYNCHRONISING)
    printed += "".join(f"{call:38} synchronises: False\n" for call in gpu_claims.NOT_SYNCHRONISING)
    drifted = printed.replace(f"{'t * 2':38} synchronises: False", f"{'t * 2':38} synchronises: True")
    assert syncs(printed) and drifted != printed and not syncs(drifted)


def test_a_cuda_only_cell_prints_its_sentence_without_cuda(capsys):
    on_a_gpu("gpu_shows_ddp_two_gpus", gpus=2)
    printed = capsys.readouterr().out
    assert shows(printed, "gpu_only_two") and shows(printed, "gpu_shows_ddp_two_gpus")


def headings_of_lesson(number: int) -> list[str]:
    (path,) = (ROOT / "notebooks").glob(f"{number:02d}_*.ipynb")
    return english_headings(path)


def test_every_claim_names_its_lesson_section_and_what_it_needs():
    """A claim's label, "8 · Which 16-bit type; 9 · TF32", names sections of those lessons (a lesson's own
    CUDA-only cell: "10 · cell 58", that cell), so that renumbering the lessons cannot leave it behind."""
    assert len(gpu_claims.CLAIMS) >= 10
    for item in gpu_claims.CLAIMS:
        assert item.says and item.needs in ("cuda", "2 cuda", "cuda-build")
        number = None
        for part in item.lesson.split("; "):
            found = re.fullmatch(r"(?:(\d+) · )?(.+)", part)
            number = int(found[1]) if found[1] else number
            assert number is not None, item.lesson
            if re.fullmatch(r"cell \d+", found[2]):
                continue
            words = found[2].strip("…")
            assert any(words in heading for heading in headings_of_lesson(number)), f"lesson {number} has no section {part!r}"


def test_the_script_checks_what_this_machine_can_and_passes():
    done = run_script(COURSE_REQUIRE_CUDA="")
    assert done.returncode == 0, done.stdout
    runnable = [c for c in gpu_claims.CLAIMS if c.runnable()]
    assert f"{len(runnable)} passed, 0 failed, {len(gpu_claims.CLAIMS) - len(runnable)} not checked" in done.stdout
    if torch.version.cuda is not None:  # the CUDA-build runner checks the build-only claims
        assert runnable


@pytest.mark.parametrize("gpus", [1, 2])
def test_requiring_more_gpus_than_there_are_fails(gpus):
    if torch.cuda.is_available() and torch.cuda.device_count() >= gpus:
        pytest.skip(f"{gpus} CUDA GPU(s) here: the requirement is met")
    done = run_script(COURSE_REQUIRE_CUDA=str(gpus))
    assert done.returncode == 1 and "no claim was checked" in done.stdout


def test_a_contradiction_fails_the_script(monkeypatch, capsys):
    wrong = gpu_claims.Claim("0 · test", "a claim that does not hold", "cuda-build", lambda: (False, "seen"))
    crashing = gpu_claims.Claim("0 · test", "a claim whose check crashes", "cuda-build", lambda: 1 / 0)
    monkeypatch.setattr(gpu_claims, "CLAIMS", [wrong, crashing])
    monkeypatch.setattr(gpu_claims.Claim, "runnable", lambda self: True)
    monkeypatch.delenv("COURSE_REQUIRE_CUDA", raising=False)
    assert gpu_claims.main() == 1
    shown = capsys.readouterr().out
    assert shown.count("CONTRADICTION") == 2 and "ZeroDivisionError" in shown and "0 passed, 2 failed" in shown


@pytest.mark.parametrize("printed, holds", [
    ("True True False True", True),     # the first copy waited (its pinned allocation synchronised), a later one did not
    ("False True False True", True),    # neither waited
    ("True True True True", False),     # a later copy waited too: the lesson's race would not exist
    ("False False False True", False),  # wrong values even after synchronising
    ("", False),                        # the probe crashed
])
def test_the_early_read_claim_judges_a_later_copy_of_a_fresh_process(monkeypatch, printed, holds):
    """The GPU showed that a process's first device→host non-blocking copy may already be complete when
    it returns: the claim checks, in a fresh process, the first copy and a later one, and holds when the
    later one races (whatever the first did) and both are right after synchronising."""
    ran = []

    def probe(command, **kwargs):
        ran.append(command)
        return subprocess.CompletedProcess(command, 0, stdout=printed, stderr="")

    monkeypatch.setattr(gpu_claims.subprocess, "run", probe)
    assert gpu_claims.early_read_race()[0] is holds
    [(python, flag, code)] = ran
    assert python == sys.executable and flag == "-c" and code == gpu_claims.EARLY_READ
    compile(code, "early read", "exec")


def test_lesson_8_says_a_first_copy_may_already_wait_in_both_languages():
    (path,) = (ROOT / "notebooks").glob("08_*.ipynb")
    cells = nbformat.read(path, as_version=4).cells
    [index] = [i for i, cell in enumerate(cells) if "first device→host non-blocking copy of a process may" in cell.source]
    assert "lang-en" in cells[index].metadata["tags"] and "lang-zh" in cells[index + 1].metadata["tags"]
    assert "第一次设备→主机的非阻塞复制可能本来就会等待" in cells[index + 1].source
    assert "may already wait" in gpu_claims.CLAIMS[[c.check for c in gpu_claims.CLAIMS].index(gpu_claims.early_read_race)].says
