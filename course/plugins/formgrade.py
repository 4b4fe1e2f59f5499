"""The formgrader's view of a submission, with a Content-Security-Policy as a second wall.

The instructor opens that page logged in: a script in it could change grades through the formgrader's
API, or run code as the instructor. The sanitiser (nbgrader_config.py) removes every script from what
the submission shows; should it miss one, the page's policy still runs none of it. nbgrader renders the
page with nbconvert's HTMLExporter and its `formgrade` template; the course's `course_formgrade`
template (course/plugins/templates) extends it and puts the policy in <head>, after nbgrader's own scripts
(see the template). After that point the page may run no script but nbgrader's own that come later,
each named by its hash: the tooltips and the two click handlers of the navigation bar (showing and
hiding the student's name).
"""
import base64
import hashlib
import os
import re

from .feedback import TEMPLATE_BASEDIRS  # nbgrader's templates and the course's, for both pages

TEMPLATE = "course_formgrade"
NBGRADER_MACROS = os.path.join(TEMPLATE_BASEDIRS[0], "formgrade", "formgrade_macros.html.j2")


def _csp_hash(script: str) -> str:
    return f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"


def nbgrader_script_hashes() -> list[str]:
    """The hashes of the inline scripts and event handlers (`onclick="…"`) of nbgrader's formgrade macros
    that hold no template expression: the same text on every page, so a hash can name it."""
    with open(NBGRADER_MACROS, encoding="utf-8") as macros:
        template = macros.read()
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", template, flags=re.S)
    handlers = re.findall(r'\son[a-z]+="([^"]*)"', template)
    return sorted({_csp_hash(s) for s in scripts + handlers if s.strip() and "{{" not in s and "{%" not in s})


def content_security_policy(_resources=None) -> str:
    """The page's policy (a Jinja filter: nbgrader_config.py registers it for HTMLExporter).

    No script may be loaded or run once the policy is read, but nbgrader's own by hash ('unsafe-hashes'
    extends hashes to handler attributes); styles, images and fonts only from the
    server itself or inline (cells' images are data: URLs); the page's requests go to its own server
    only; no plugin, no frame, no form sent elsewhere, no <base> to redirect its links.
    """
    scripts = " ".join(["'unsafe-hashes'", *nbgrader_script_hashes()])
    return "; ".join([
        "default-src 'none'", f"script-src {scripts}", "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:", "font-src 'self' data:", "connect-src 'self'", "form-action 'self'",
        "base-uri 'none'", "object-src 'none'", "frame-src 'none'"])
