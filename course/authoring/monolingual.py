"""Monolingual copies of the bilingual notebooks, for students who prefer one language.

Prose cells of the other language are dropped; 繁體 is converted from 简体 with OpenCC (s2twp), then
made Taiwan usage by zh_hant.json (the words OpenCC leaves mainland, its known wrong conversions, 「」
quotation marks), the glossary's Traditional terms overriding both. In 繁體 the Chinese of code cells'
comments and string literals is converted too (never their code), and so is the Chinese of cells written in
both languages (a prediction cell), but only in cells nbgrader does not track: answer cells, nbgrader's cells
and their metadata pass through untouched, so a graded notebook viewed in one language is still gradable.
The message catalogue's 繁體 forms (messages.json's `zh-hant`) come from the same conversion (`make messages`).
"""
import io
import json
import re
import shutil
import tokenize
from functools import cache
from importlib import resources
from pathlib import Path

import nbformat

from .glossary import terms

LANGUAGES = {"en": "lang-en", "zh": "lang-zh", "zh-hant": "lang-zh"}
# Private-use characters: OpenCC leaves them alone, and no course text contains them.
OPEN, CLOSE = "\ue000", "\ue001"


@cache
def _converter():
    import opencc

    return opencc.OpenCC("s2twp")


@cache
def _taiwan() -> list[tuple[str, str]]:
    """zh_hant.json's replacements (Taiwan words, OpenCC's known errors, quotation marks), longest first."""
    data = json.loads(resources.files(__package__).joinpath("zh_hant.json").read_text("utf-8"))
    pairs = {**data["taiwan"], **data["fixes"], **data["quotes"]}
    return sorted(pairs.items(), key=lambda pair: len(pair[0]), reverse=True)


def to_traditional(text: str) -> str:
    """简体 → 繁體 (Taiwan usage): OpenCC's s2twp, then zh_hant.json's Taiwan words and fixes, with the
    glossary's terms as the glossary spells them (protected from both)."""
    glossary = sorted(terms(), key=lambda t: len(t["zh"]), reverse=True)  # longest first: 叶子张量 before 张量
    for index, term in enumerate(glossary):
        text = text.replace(term["zh"], f"{OPEN}{index}{CLOSE}")
    text = _converter().convert(text)
    for mainland, taiwan in _taiwan():
        text = text.replace(mainland, taiwan)
    for index, term in enumerate(glossary):
        text = text.replace(f"{OPEN}{index}{CLOSE}", term["zh-hant"])
    return text


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
    # from the last token to the first, so that earlier offsets stay valid as lengths change
    for token in reversed(tokens):
        if token.type in (tokenize.COMMENT, tokenize.STRING) and CHINESE.search(token.string):
            start, end = (starts[row - 1] + column for row, column in (token.start, token.end))
            source = source[:start] + to_traditional(source[start:end]) + source[end:]
    return source


def monolingual(notebook, lang: str):
    """A copy of `notebook` with only `lang`'s prose."""
    keep = LANGUAGES[lang]
    view = nbformat.from_dict(notebook)  # a deep copy
    cells = []
    for cell in view.cells:
        tagged = {t for t in cell.metadata.get("tags", []) if t in ("lang-en", "lang-zh")}
        if not tagged or len(tagged) > 1:
            # code, untagged cells, cells in both languages (answers, predictions) are kept; in 繁體 the
            # Chinese of those nbgrader does not track is converted (tracked cells keep their checksums)
            if lang == "zh-hant" and "nbgrader" not in cell.metadata:
                convert = code_to_traditional if cell.cell_type == "code" else to_traditional
                cell.source = convert(cell.source)
            cells.append(cell)
        elif tagged == {keep}:
            if lang == "zh-hant":
                cell.source = to_traditional(cell.source)
            cells.append(cell)
    view.cells = cells
    view.metadata["language"] = lang
    return view


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
    return written


if __name__ == "__main__":  # `make messages`: messages.json's zh-hant forms, again after any edit of a zh
    from autograder.messages import CATALOGUE, catalogue

    CATALOGUE.write_text(json.dumps(traditional_messages(catalogue()), indent=2, ensure_ascii=False) + "\n", "utf-8")
