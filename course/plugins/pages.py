"""What a submission may put on the pages built from it: the formgrader's view of it, which the instructor
opens logged in, and its feedback page (README, "Threat model").

nbconvert's own sanitiser (SanitizeHTML) keeps scripts out of HTML outputs and markdown cells' raw HTML, but
the pages hold more of the submission than that, which it does not check:
- outputs' metadata: nbconvert's templates write an image's `width` and `height` unquoted
  (`width={{ width | escape_html }}`), so `"100 style=position:fixed;..."` adds attributes; `filenames`
  becomes an image's address and `isolated` a frame;
- markdown: the templates render markdown cells (and `text/markdown` outputs) to HTML after sanitising,
  so Markdown's own images and links come out as written: remote images, `javascript:` and `data:` links;
- classes: the page's own style sheet positions elements by class (Bootstrap's `navbar-fixed-top`, `modal`).

SanitizeSubmission (HTMLExporter's preprocessor in nbgrader_config.py, so both pages) is nbconvert's
SanitizeHTML plus outputs' metadata reduced to numbers for sizes, a flag and a quoted text; `page_style`
marks every link in a cell as the student's, with its address. `markdown2html` (HTMLExporter's filter
of that name) is nbconvert's, followed by a sanitiser for what Markdown makes: no inline style but a table
cell's alignment, no class but code highlighting's, images only from the notebook itself (data: URLs, as
attachments are), links only to web, mail and the page's own anchors. The pages' Content-Security-Policy
(course/plugins/formgrade.py, templates/course_feedback) is the second wall: no <base>, forms sent nowhere
else, images only from the page.
"""
import html
import re

import bleach
from bleach.css_sanitizer import CSSSanitizer
from jinja2 import pass_context
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.preprocessors.sanitize import SanitizeHTML

from . import PagePreprocessor

# Every link that the submission's cells show, marked as the student's, with where it really goes.
LINK_MARK_CSS = """
.cell .rendered_html a[href]:not(.anchor-link)::after {
  content: " \\2197  " attr(href) " (student's link / 学生提供的链接)";
  font-size: 85%; color: #a94442; word-break: break-all;
}
"""
# what nbconvert's image templates read from an output's metadata (per mimetype, or for the whole output)
SIZES, FLAGS, TEXTS = ("width", "height"), ("unconfined",), ("alt",)
MARKDOWN_TAGS = {"a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em", "h1", "h2",
                 "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span", "strong",
                 "sub", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul"}
# the classes Markdown's renderer gives: heading anchors, and code highlighting (Pygments' short token names)
RENDERER_CLASS = re.compile(r"anchor-link|highlight|hl-[\w-]+|[a-z]{1,3}\d?")
IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*", re.IGNORECASE)
NUMBER = re.compile(r"\d{1,5}(\.\d{1,3})?")


def _markdown_attribute(tag, name, value) -> bool:
    if name == "class":
        return all(RENDERER_CLASS.fullmatch(word) for word in value.split())
    if tag == "a":
        return name in ("href", "title")
    if tag == "img":
        return (name == "src" and bool(IMAGE_DATA.fullmatch(value))) or name in ("alt", "title") or (
            name in SIZES and bool(NUMBER.fullmatch(value)))
    if tag in ("th", "td"):
        return name in ("style", "align")  # Markdown tables align their cells, nothing more (CSS below)
    return name == "id" and tag in ("h1", "h2", "h3", "h4", "h5", "h6")  # the anchors' targets


# The page's own elements are found by their ids: nbgrader's formgrader binds each test cell's grade to the first
# element whose id is its grade id, and a heading of the student's that Markdown named `test_pick_device` (placed in
# the written answer, above the tests) bound every test's grade to the written answer's, whose "Full credit" then
# gave an unanswered notebook full marks (the twenty-second session's attacker). So the ids of the student's headings,
# and the links to them, are the page's own names prefixed, as GitHub does: no id of theirs is one of the page's.
STUDENTS_IDS = "user-content-"


class _OwnIds(bleach.html5lib_shim.Filter):
    """Prefixes each id (a heading's) and each link to an anchor on the page with STUDENTS_IDS."""

    def __iter__(self):
        for token in super().__iter__():
            attributes = token.get("data") if token["type"] in ("StartTag", "EmptyTag") else None
            if attributes and (None, "id") in attributes:
                attributes[None, "id"] = STUDENTS_IDS + attributes[None, "id"]
            if attributes and attributes.get((None, "href"), "").startswith("#"):
                attributes[None, "href"] = "#" + STUDENTS_IDS + attributes[None, "href"][1:]
            yield token


_MARKDOWN_CLEANER = bleach.Cleaner(tags=MARKDOWN_TAGS, attributes=_markdown_attribute,
                                   protocols={"http", "https", "mailto"}, strip=False, filters=[_OwnIds],
                                   css_sanitizer=CSSSanitizer(allowed_css_properties=["text-align"]))


def clean_markdown_html(html: str) -> str:
    """What Markdown made of a submission's text, with only what the pages allow a submission."""
    return _MARKDOWN_CLEANER.clean(html)


@pass_context
def markdown2html(context, source):
    """HTMLExporter's markdown2html filter, with its defaults (the cell's attachments included), then
    clean_markdown_html. nbgrader_config.py registers it under nbconvert's name for HTMLExporter, so both
    pages use it wherever their templates render Markdown."""
    cell = context.get("cell", {})
    renderer = IPythonRenderer(escape=False, attachments=cell.get("attachments", {}),
                               path=context.get("resources", {}).get("metadata", {}).get("path", ""))
    return clean_markdown_html(MarkdownWithMath(renderer=renderer).render(source))


def page_style(_resources=None) -> str:
    """The style both pages add for what a submission shows (a Jinja filter: nbgrader_config.py registers it
    for HTMLExporter; the course's templates put it in <head>, where nbgrader's feedback pipeline, which
    rewrites resources' inlined CSS, cannot drop it)."""
    return LINK_MARK_CSS


# Tags in one piece of a submission's HTML (a markdown cell, an output) that a page parses, at most: the HTML parser
# under the sanitiser takes time quadratic in how deeply its elements nest, and one markdown cell of 270 KB ("<b><i>"
# 40,000 times) held generate_feedback for 151 s, and the Jupyter server, whose formgrader renders a submission in its
# event loop, for 134 s (the twenty-second session's attacker). Past them, the piece is shown as its text.
MOST_TAGS = 2_000
MOST_TAGS_PER_PAGE = 20_000  # and in all the pieces of one page together (many cells of 1,999 each)
TAG = re.compile(r"<[A-Za-z/!?]")
AS_TEXT_NOTES = {"raw": "a raw cell, shown as its text / 原始单元格，按原文显示",
                 "tags": f"more HTML tags than a page shows, shown as text / HTML 标签多于页面所能显示的，按原文显示"}


def tags_in(text: str, most: int) -> int:
    """The number of tags in `text`, counted up to `most + 1`."""
    return sum(1 for _ in zip(TAG.finditer(text), range(most + 1)))


def shown_as_text(text: str, why: str) -> str:
    """Markdown that shows `text` as it is, with a note saying why: no tag of it is parsed, no link of it made."""
    return f"*({AS_TEXT_NOTES[why]})*\n\n<pre>{html.escape(text)}</pre>\n"


class SanitizeSubmission(PagePreprocessor, SanitizeHTML):
    """nbconvert's SanitizeHTML, with outputs' metadata checked and the submission's links marked. A raw cell is shown
    as its text, since the templates write it into the page outside every cell, where the mark of a student's link
    does not reach (a raw cell's "sign in again" link showed unmarked under the feedback's score table); so is a piece
    of HTML with more tags than MOST_TAGS."""

    tags_left = MOST_TAGS_PER_PAGE  # of the page being made

    def preprocess(self, nb, resources):
        self.tags_left = MOST_TAGS_PER_PAGE
        return super().preprocess(nb, resources)

    def parsed(self, text: str) -> bool:
        """Whether a page may parse `text` as HTML: no more tags than MOST_TAGS, nor than the page has left."""
        most = min(MOST_TAGS, self.tags_left)
        found = tags_in(text, most)
        if found > most:
            return False
        self.tags_left -= found
        return True

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "raw" or (cell.cell_type == "markdown" and not self.parsed(cell.source)):
            cell.source = shown_as_text(cell.source, "raw" if cell.cell_type == "raw" else "tags")
            cell.cell_type = "markdown"
            cell.metadata.pop("raw_mimetype", None)
            cell.metadata.pop("format", None)
            return cell, resources  # escaped already: nothing for the sanitiser's parser
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                if "metadata" in output:
                    output.metadata = checked_metadata(output.metadata)
                data = output.get("data", {})
                for mimetype in ("text/html", "text/markdown"):
                    if isinstance(data.get(mimetype), str) and not self.parsed(data[mimetype]):
                        data["text/plain"] = data.pop(mimetype)
        return super().preprocess_cell(cell, resources, index)


def checked_metadata(metadata: dict) -> dict:
    """What the templates may read from an output's metadata: sizes that are numbers, a flag, a text
    (quoted by the template); per mimetype and for the whole output. Anything else is dropped."""
    kept = _checked_fields(metadata)
    for mimetype, fields in metadata.items():
        if "/" in mimetype and isinstance(fields, dict):
            kept[mimetype] = _checked_fields(fields)
    return kept


def _checked_fields(fields: dict) -> dict:
    kept = {}
    for name in SIZES:
        value = fields.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 100_000:
            kept[name] = value
        elif isinstance(value, str) and NUMBER.fullmatch(value):
            kept[name] = value
    kept.update({name: fields[name] for name in FLAGS if isinstance(fields.get(name), bool)})
    kept.update({name: fields[name] for name in TEXTS if isinstance(fields.get(name), str)})
    return kept
