"""Monolingual copies of the bilingual notebooks, for students who prefer one language.

Prose cells of the other language are dropped; 繁體 is converted from 简体 with OpenCC (s2twp), then
made Taiwan usage by zh_hant.json (overrides, each with the context that decides its sense: the words OpenCC
leaves mainland, its known wrong conversions, 「」 quotation marks), the glossary's Traditional terms
overriding both. A 繁體 view holds no 简体: the Chinese of code cells' comments and string literals is
converted (never their code), so are cells written in both languages (predictions, answers), the cells
nbgrader tracks and every stored output. A tracked cell's 繁體 text is recognised by the grader as the
released cell (course/plugins/autograde.py, ViewedAsReleased), so a graded notebook viewed in 繁體 grades
exactly as the bilingual one.
The message catalogue's 繁體 forms (messages.json's `zh-hant`) come from the same conversion (`make messages`).
"""
import io
import json
import re
import shutil
import tokenize
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import nbformat
from nbformat.v4 import new_markdown_cell
from nbgrader.utils import compute_checksum

from autograder.messages import catalogue

from .glossary import terms

LANGUAGES = {"en": "lang-en", "zh": "lang-zh", "zh-hant": "lang-zh"}
NOTE, NOTE_TAG = "view_traditional_messages", "view-note"  # the first cell of a 繁體 view
TEXT_OUTPUTS = {"text/plain", "text/markdown", "text/html", "text/latex"}
# Private-use characters: OpenCC leaves them alone, and no course text contains them.
OPEN, CLOSE = "\ue000", "\ue001"


@cache
def _converter():
    import opencc

    return opencc.OpenCC("s2twp")


@dataclass(frozen=True)
class Override:
    """One entry of zh_hant.json: `mainland` (the word as OpenCC leaves it) becomes `taiwan` wherever
    `context` (a regular expression that matches `mainland` itself, with the words around it that decide
    the sense) finds it."""
    mainland: str
    taiwan: str
    context: re.Pattern


@cache
def overrides() -> list[Override]:
    """zh_hant.json's overrides (Taiwan words, OpenCC's known errors, quotation marks), longest first."""
    data = json.loads(resources.files(__package__).joinpath("zh_hant.json").read_text("utf-8"))
    entries = [entry for group in ("taiwan", "fixes", "quotes") for entry in data[group]]
    found = [Override(e["mainland"], e["taiwan"], re.compile(e.get("context", re.escape(e["mainland"]))))
             for e in entries]
    return sorted(found, key=lambda override: len(override.mainland), reverse=True)


def _taiwan_usage(text: str, protected: list[tuple[int, int]]) -> str:
    """Every override applied to `text`, except inside the `protected` spans (the glossary's terms)."""
    for override in overrides():
        for match in reversed(list(override.context.finditer(text))):  # from the end: earlier offsets stay valid
            start, end = match.span()
            if any(start < until and since < end for since, until in protected):
                continue
            text = text[:start] + override.taiwan + text[end:]
            shift = len(override.taiwan) - (end - start)
            protected = [(since + shift, until + shift) if since >= end else (since, until) for since, until in protected]
    return text


def to_traditional(text: str) -> str:
    """简体 → 繁體 (Taiwan usage): OpenCC's s2twp, then zh_hant.json's overrides, with the glossary's
    terms as the glossary spells them (protected from both)."""
    return _taiwan_usage(*opencc_with_terms(text))


def opencc_with_terms(text: str) -> tuple[str, list[tuple[int, int]]]:
    """`text` converted by OpenCC's s2twp with the glossary's terms in their 繁體 form, and the spans of those
    terms: what the overrides see (their contexts may read a term, never change it)."""
    glossary = sorted(terms(), key=lambda t: len(t["zh"]), reverse=True)  # longest first: 叶子张量 before 张量
    for index, term in enumerate(glossary):
        text = text.replace(term["zh"], f"{OPEN}{index}{CLOSE}")
    pieces, protected = [], []
    for number, piece in enumerate(re.split(f"{OPEN}(\\d+){CLOSE}", _converter().convert(text))):
        if number % 2:
            piece = glossary[int(piece)]["zh-hant"]
            at = sum(map(len, pieces))
            protected.append((at, at + len(piece)))
        pieces.append(piece)
    return "".join(pieces), protected


SVG_TEXT = re.compile(r"(?<=>)[^<>]+(?=<)")  # the character data between two tags
CHINESE = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef“”‘’]")


def code_to_traditional(source: str) -> str:
    """The Chinese of a code cell's comments and string literals in 繁體; the code itself unchanged. A cell
    Python cannot tokenize (IPython syntax such as `!pip`) is left as it is."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    pieces, done = [], 0  # the source cut at each converted token, joined once (a cell of 64,000 of them took a minute)
    for token in tokens:
        if token.type in (tokenize.COMMENT, tokenize.STRING) and CHINESE.search(token.string):
            start, end = (starts[row - 1] + column for row, column in (token.start, token.end))
            pieces += [source[done:start], to_traditional(source[start:end])]
            done = end
    return "".join(pieces) + source[done:]


def monolingual(notebook, lang: str):
    """A copy of `notebook` with only `lang`'s prose; in 繁體, every cell kept is in 繁體 (`cell_to_traditional`)."""
    keep = LANGUAGES[lang]
    view = nbformat.from_dict(notebook)  # a deep copy
    cells = []
    for cell in view.cells:
        tagged = {t for t in cell.metadata.get("tags", []) if t in ("lang-en", "lang-zh")}
        # code, untagged cells and cells in both languages (answers, predictions) are kept with the prose of `lang`
        if not tagged or len(tagged) > 1 or tagged == {keep}:
            if lang == "zh-hant":
                cell_to_traditional(cell)
            cells.append(cell)
    if lang == "zh-hant":  # the messages a check prints are 简体 unless the student asks for 繁體
        cells.insert(0, new_markdown_cell(catalogue()[NOTE]["zh-hant"], metadata={"tags": [NOTE_TAG]}))
    view.cells = cells
    view.metadata["language"] = lang
    return view


def source_to_traditional(cell_type: str, source: str) -> str:
    """A cell's text in 繁體: a code cell's comments and string literals, any other cell's whole text."""
    return code_to_traditional(source) if cell_type == "code" else to_traditional(source)


def cell_to_traditional(cell) -> None:
    """`cell` in 繁體: its text and its stored outputs. A tracked cell still as released gets the checksum of its
    new text, so that `nbgrader validate` finds it as released (a cell the student changed keeps the released
    checksum: an answer stays an answer); the grader puts the 简体 text back before it compares anything
    (course/plugins/autograde.py, ViewedAsReleased), so a 繁體 view grades as the bilingual notebook does."""
    tracked = cell.metadata.get("nbgrader", {})
    as_released = "checksum" in tracked and tracked["checksum"] == compute_checksum(cell)
    cell.source = source_to_traditional(cell.cell_type, cell.source)
    for output in cell.get("outputs", []):
        output_to_traditional(output)
    if as_released:
        tracked["checksum"] = compute_checksum(cell)


def output_to_traditional(output) -> None:
    """The text of a stored output in 繁體 (stream, text data, error); images and other data as they are."""
    if output.output_type == "stream":
        output.text = to_traditional(output.text)
    elif output.output_type in ("execute_result", "display_data"):
        for mime in TEXT_OUTPUTS & output.data.keys():
            output.data[mime] = to_traditional(output.data[mime])
    elif output.output_type == "error":
        output.evalue = to_traditional(output.evalue)
        output.traceback = [to_traditional(line) for line in output.traceback]


def for_students(notebook):
    """A copy of a lesson as students get it: the code cells that answer a predict-then-run prompt (from the
    prompt to the explanation after them) keep no stored output, so the answer is not printed under the
    question. (The instructor's copy keeps every output: nbval compares it with a fresh run.)"""
    copy = nbformat.from_dict(notebook)
    for cell in answers_to_prompts(copy):
        cell.outputs, cell.execution_count = [], None
    return copy


def answers_to_prompts(notebook) -> list:
    """The code cells between each predict-then-run prompt and the explanation that follows them."""
    found, after_prompt = [], False
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        if "predict" in tags or "prediction" in tags:
            after_prompt = True
        elif cell.cell_type == "markdown":
            after_prompt = False
        elif after_prompt:
            found.append(cell)
    return found


def traditional_messages(catalogue: dict) -> dict:
    """The message catalogue with each entry's `zh-hant`: its `zh` in 繁體 (Taiwan usage)."""
    return {key: {**entry, "zh-hant": to_traditional(entry["zh"])} for key, entry in catalogue.items()}


def write_views(paths, lang: str, out: Path) -> list[Path]:
    """Monolingual copies for students (lessons as `for_students` gives them), in `out/lang/`."""
    written = []
    for path in map(Path, paths):
        target = out / lang / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(monolingual(for_students(nbformat.read(path, as_version=4)), lang), target)
        written.append(target)
        figures = path.parent / "figures"
        if figures.is_dir():  # the lessons show `figures/*.svg` by relative path: keep them beside the copy
            shutil.copytree(figures, target.parent / "figures", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("*.py", "__pycache__"))
            if lang == "zh-hant":  # their labels are English and 简体
                for svg in (target.parent / "figures").glob("*.svg"):
                    svg.write_text(svg_to_traditional(svg.read_text("utf-8")), "utf-8")
    return written


def svg_to_traditional(svg: str) -> str:
    """An SVG's Chinese text in 繁體 (the figures keep their labels as text: notebooks/figures/draw.py)."""
    return SVG_TEXT.sub(lambda m: to_traditional(m.group()) if CHINESE.search(m.group()) else m.group(), svg)


if __name__ == "__main__":  # `make messages`: messages.json's zh-hant forms, again after any edit of a zh
    from autograder.messages import CATALOGUE, catalogue

    CATALOGUE.write_text(json.dumps(traditional_messages(catalogue()), indent=2, ensure_ascii=False) + "\n", "utf-8")
