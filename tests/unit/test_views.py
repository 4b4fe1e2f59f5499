"""`course view`: monolingual copies that keep code, answers and nbgrader metadata untouched."""
import io
import json
import re
import subprocess
import tokenize

import nbformat
import pytest
from zhon import cedict

from course import classroom
from course.authoring.glossary import terms
from course.authoring.monolingual import (answers_to_prompts, code_to_traditional, for_students, monolingual,
                                          opencc_with_terms, to_traditional)
from support.notebooks import student_notebooks
from support.paths import BIN


ROOT = classroom.ROOT
LESSON = ROOT / "notebooks" / "03_module_to.ipynb"
RELEASE = classroom.notebook_path(ROOT, "release", "a1_tensor_to")
CJK = re.compile(r"[\u4e00-\u9fff]")
NOTEBOOKS = student_notebooks(ROOT)  # the twelve lessons and the four release notebooks
ZH_HANT = json.loads((ROOT / "course" / "authoring" / "zh_hant.json").read_text("utf-8"))
OVERRIDES = [entry for group in ("taiwan", "fixes", "quotes") for entry in ZH_HANT[group]]
# characters only 简体 writes (CC-CEDICT): 这, 处, 编, … but not 台, 干, 里, 只, which 繁體 writes too
SIMPLIFIED_ONLY = frozenset(cedict.simplified) - frozenset(cedict.traditional)


def prose(notebook, tag):
    """Prose cells of one language (cells the student writes, answers and predictions, carry both language
    tags and are not prose)."""
    return [c for c in notebook.cells if {tag} == {t for t in c.metadata.get("tags", []) if t.startswith("lang-")}]


def code(source):
    """A cell's code without its comments and string literals (what a 繁體 view may convert)."""
    skipped = (tokenize.COMMENT, tokenize.STRING)
    return [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in skipped]


def untouched(notebook):
    """Everything a view must leave alone, in order, of the code cells and answer cells: a code cell's code, and
    the nbgrader metadata but the checksum (which follows the cell's text)."""
    return [(c.cell_type, code(c.source) if c.cell_type == "code" else None,
             {k: v for k, v in c.metadata.get("nbgrader", {}).items() if k != "checksum"})
            for c in notebook.cells if c.cell_type == "code" or c.metadata.get("nbgrader", {}).get("solution")]


@pytest.mark.parametrize("path", [LESSON, RELEASE], ids=["lesson", "release"])
@pytest.mark.parametrize("lang, kept, dropped", [("en", "lang-en", "lang-zh"), ("zh", "lang-zh", "lang-en"),
                                                 ("zh-hant", "lang-zh", "lang-en")])
def test_a_view_keeps_one_language_and_all_code(path, lang, kept, dropped):
    original = nbformat.read(path, as_version=4)
    view = monolingual(original, lang)
    assert not prose(view, dropped)
    assert len(prose(view, kept)) == len(prose(original, kept)) > 0
    assert untouched(view) == untouched(original)
    nbformat.validate(view)


def test_english_and_simplified_views_keep_the_text_as_written():
    original = nbformat.read(LESSON, as_version=4)
    for lang, tag in [("en", "lang-en"), ("zh", "lang-zh")]:
        assert [c.source for c in prose(monolingual(original, lang), tag)] == [c.source for c in prose(original, tag)]


def test_traditional_view_is_converted_and_follows_the_glossary():
    view = monolingual(nbformat.read(LESSON, as_version=4), "zh-hant")
    text = "\n".join(c.source for c in prose(view, "lang-zh"))
    assert "參數" in text and to_traditional("参数") == "參數"  # OpenCC alone would write 引數 for 参数
    for mainland in ["單元格", "當前", "“", "全域性", "行動數據"]:  # Taiwan usage (zh_hant.json), not OpenCC's
        assert mainland not in text, mainland
    assert "緩衝區" in text and "裝置" in text
    for term in terms():
        if term["zh"] != term["zh-hant"]:
            assert term["zh"] not in text, f"simplified {term['zh']} left in the Traditional view"


def test_traditional_conversion_overrides_opencc_with_glossary_terms():
    assert to_traditional("参数和叶子张量") == "參數和葉子張量"
    assert to_traditional("默认的内存") == "預設的記憶體"  # OpenCC's own conversion still applies elsewhere


@pytest.mark.parametrize("simplified, taiwan", [
    ("在单元格里运行", "在儲存格裡執行"),            # Taiwan's word for a cell, and 裡 (inside), not 里 (a mile)
    ("移动数据和改变精度都要花时间", "移動資料和改變精度都要花時間"),  # not 行動數據, "mobile data"
    ("16 位激活值", "16 位元激勵值"),               # not 啟用值, "an enabled value"; bits are 位元
    ("全局设置", "全域設定"),
    ("“已跳过”", "「已跳過」"),
    ("函数返回一个列表", "函式傳回一個串列"),
    ("当前设备", "目前裝置"),
    ("针对当前构建所支持的", "針對目前的建置所支援的"),
    ("抛出异常", "拋出例外"),
    ("数据并行", "資料平行"),
    ("做归一化，并为评估保存", "做正規化，並為評估儲存"),
    ("实参和轮次", "引數和訓練週期"),                # the glossary's Taiwan forms
    ("不在 CPU 的列表里", "不在 CPU 的清單裡"),        # autocast's op lists are 清單; a Python list is 串列
    ("不报错，却读到错误的数据", "不拋出錯誤，卻讀到錯誤的資料"),  # raises nothing (出錯 would contradict the sentence)
    ("在子进程中运行", "在子行程中執行"),            # not 子程序, a subroutine
    ("布尔掩码", "布林遮罩"),
    ("有些库会", "有些函式庫會"),
    ("同一个类，是它的子类，可以单独捕获", "同一個類別，是它的子類別，可以單獨捕捉"),
    ("未归一化的特征", "未正規化的特徵"),
    ("一个标志", "一個旗標"),
    ("流水线并行", "管線平行"),
    ("一个数据先用完的 rank", "一個資料先用完的 rank"),
    ("CPU 版构建中", "CPU 建置版本中"),
    ("在每台机器上", "在每台機器上"),
    ("你自己的随机数生成器", "你自己的亂數產生器"),
    ("由两个进程构造批次", "由兩個行程建構批次"),
    ("每块 GPU 和两块 CUDA GPU", "每張 GPU 和兩張 CUDA GPU"),
])
def test_traditional_conversion_follows_taiwan_usage(simplified, taiwan):
    assert to_traditional(simplified) == taiwan


def test_traditional_code_cells_convert_comments_and_strings_only():
    source = 'x = 1  # 数据 / data\nprint(f"参数 {x}", "设备")\ndef f():\n    """返回\n    数据"""\n'
    converted = code_to_traditional(source)
    assert converted == 'x = 1  # 資料 / data\nprint(f"參數 {x}", "裝置")\ndef f():\n    """傳回\n    資料"""\n'
    assert code(converted) == code(source)
    assert code_to_traditional('s = """数据') == 's = """数据'  # a cell Python cannot tokenize: as it is


def test_traditional_view_converts_the_cells_nbgrader_tracks_and_their_checksums_follow():
    from nbgrader.utils import compute_checksum

    original = nbformat.read(RELEASE, as_version=4)
    view = monolingual(original, "zh-hant")
    tracked = [c for c in view.cells if "nbgrader" in c.metadata]
    before = {c.metadata.nbgrader.grade_id: c.source for c in original.cells if "nbgrader" in c.metadata}
    changed = [c for c in tracked if c.source != before[c.metadata.nbgrader.grade_id]]
    assert {c.cell_type for c in changed} == {"code", "markdown"}  # stubs, tests, written answers
    assert "# YOUR CODE HERE / 在此處撰寫程式碼" in "\n".join(c.source for c in changed)
    assert all(c.metadata.nbgrader.checksum == compute_checksum(c) for c in tracked if "checksum" in c.metadata.nbgrader)


def test_traditional_view_opens_with_how_to_get_traditional_messages():
    from autograder.messages import catalogue

    original = nbformat.read(LESSON, as_version=4)
    first = monolingual(original, "zh-hant").cells[0]
    assert first.source == catalogue()["view_traditional_messages"]["zh-hant"] and "COURSE_CHINESE=zh-hant" in first.source
    assert "nbgrader" not in first.metadata  # an ordinary cell: nothing to grade
    assert not any("view-note" in c.metadata.get("tags", []) for lang in ("en", "zh") for c in monolingual(original, lang).cells)


def test_traditional_view_converts_stored_outputs():
    original = nbformat.read(ROOT / "notebooks" / "07_transfers_performance.ipynb", as_version=4)
    simplified = "".join(o.get("text", "") for c in original.cells for o in c.get("outputs", []))
    assert SIMPLIFIED_ONLY & set(simplified)  # the lesson prints 简体 (计时所用的机器, …)
    view = monolingual(original, "zh-hant")
    shown = "".join(o.get("text", "") for c in view.cells for o in c.get("outputs", []))
    assert CJK.search(shown) and not SIMPLIFIED_ONLY & set(shown)


def seen_in_traditional(path) -> list[tuple[str, str]]:
    """(where, text) for everything a 繁體 reader sees of a notebook: every cell's text and stored output, as the
    student's copy (for_students) viewed in 繁體."""
    view = monolingual(for_students(nbformat.read(path, as_version=4)), "zh-hant")
    seen = []
    for index, cell in enumerate(view.cells):
        seen.append((f"cell {index}", cell.source))
        for output in cell.get("outputs", []):
            texts = [output.get("text", ""), output.get("evalue", ""), *output.get("traceback", []),
                     *[v for k, v in output.get("data", {}).items() if k.startswith("text/")]]
            seen += [(f"cell {index}, output", text) for text in texts]
    return seen


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_a_traditional_reader_never_meets_simplified(path):
    found = sorted({f"{where}: {char} in …{text[max(0, text.index(char) - 8):text.index(char) + 8]}…"
                    for where, text in seen_in_traditional(path) for char in SIMPLIFIED_ONLY & set(text)})
    assert not found, f"{path.name}: 简体 in its 繁體 view: {found[:20]}"


def test_the_traditional_messages_hold_no_simplified():
    from autograder.messages import catalogue

    found = {key: sorted(SIMPLIFIED_ONLY & set(entry["zh-hant"])) for key, entry in catalogue().items()}
    assert not {key: chars for key, chars in found.items() if chars}


def test_traditional_view_converts_prediction_cells():
    view = monolingual(nbformat.read(LESSON, as_version=4), "zh-hant")
    predictions = [c.source for c in view.cells if "prediction" in c.metadata.get("tags", [])]
    assert predictions and all("我的預測" in source and "My prediction" in source for source in predictions)


def converted_text(view) -> str:
    """What a 繁體 view converted: the text of every cell."""
    return "\n".join(c.source for c in view.cells)


def context(entry) -> re.Pattern:
    return re.compile(entry.get("context", re.escape(entry["mainland"])))


def acts(entry, simplified: str) -> bool:
    """Whether the override finds its word in `simplified` as the overrides see it: converted by OpenCC, the
    glossary's terms protected."""
    text, protected = opencc_with_terms(simplified)
    return any(not any(m.start() < end and start < m.end() for start, end in protected)
               for m in context(entry).finditer(text))


@pytest.mark.parametrize("entry", OVERRIDES, ids=lambda e: f"{e['mainland']}→{e['taiwan']}")
def test_each_override_acts_where_it_must_and_nowhere_else(entry):
    """Every override of zh_hant.json carries sentences where it must act and sentences where it must not
    (another sense of the word, a word that merely contains it); each converts to the 繁體 written beside it."""
    assert entry["apply"] and entry["keep"] and entry["why"], "an override needs both kinds of sentence and a why"
    assert all(m.group() == entry["mainland"] for s in [*entry["apply"], *entry["keep"]]
               for m in context(entry).finditer(opencc_with_terms(s)[0])), "the context must match the word itself"
    for simplified, taiwan in entry["apply"].items():
        assert acts(entry, simplified), f"{simplified}: the override does not act here"
        assert to_traditional(simplified) == taiwan
    for simplified, taiwan in entry["keep"].items():
        assert not acts(entry, simplified), f"{simplified}: the override must not act here"
        assert to_traditional(simplified) == taiwan


@pytest.mark.parametrize("simplified, wrong", [
    ("又在一个异常的步骤减半", "例外"),                   # abnormal, not an exception (issue 46, W1)
    ("autocast 只对它列表中的运算转换输入", "串列"),      # autocast's op lists, not a Python list (W2)
    ("PyTorch 构建时所针对的加速器", "建立"),             # PyTorch's build, not creating something (W3)
])
def test_the_overrides_never_again_turn_a_right_word_wrong(simplified, wrong):
    assert wrong not in to_traditional(simplified)


# The second native reader's findings on the 繁體 view (issue 46, item 4): 简体 as the course writes it, and
# the mainland word that reader still met in its 繁體 form.
SECOND_READER = [
    ("一种较新的写法，按后端分别设置", "按"), ("并按设备分组", "按"), ("修复方法，按推荐顺序：", "按"),
    ("# YOUR CODE HERE / 在此处编写代码", "編寫"), ("{what}：期望得到 {expected}，实际为 {found}", "期望"),
    ("当且仅当 `device` 是 CUDA 设备时", "當且僅當"), ("要么新建一个优化器，要么移动状态", "要麼"),
    ("行程的 CUDA 上下文就坏了", "上下文"), ("请遍历整个批次", "遍歷"), ("第 9 课搭建了一个混合精度训练步骤", "搭建"),
    ("词表大小", "詞表"), ("而不必再向驱动程序申请。", "申請"), ("所以要重启 Jupyter 内核", "重啟"),
    ("例如索引越界", "越界"), ("CPU 核数的一半", "核數"), ("使用练习给出的名称和签名", "簽名"),
    ("恢复默认值", "恢復"), ("用完之后恢复原样", "恢復"), ("只有在很长的训练日志里", "日誌"),
    ("为权重生成的 16 位副本", "生成"), ("请保持每一行 `def` 和文档字符串不变", "文件字串"),
]


@pytest.mark.parametrize("simplified, mainland", SECOND_READER)
def test_the_second_readers_mainland_words_are_gone(simplified, mainland):
    assert mainland not in to_traditional(simplified)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_traditional_view_has_no_known_wrong_conversion_or_mainland_word(path):
    text = converted_text(monolingual(nbformat.read(path, as_version=4), "zh-hant"))
    assert CJK.search(text)
    left = sorted({f"{entry['mainland']} ({entry['why']})" for entry in OVERRIDES if context(entry).search(text)})
    assert not left, f"{path.name}: mainland words left in its 繁體 view: {left}"
    simplified = {term["zh"] for term in terms() if term["zh"] != term["zh-hant"]}
    assert not [word for word in simplified if word in text], f"{path.name}: 简体 terms left in the 繁體 view"


@pytest.mark.parametrize("term", terms(), ids=lambda t: t["zh"])
def test_every_glossary_term_converts_to_its_traditional_form(term):
    assert to_traditional(f"这个{term['zh']}。") == f"這個{term['zh-hant']}。"


def test_course_view_writes_copies(tmp_path):
    course = BIN / "course"
    done = subprocess.run([str(course), "view", "--lang", "zh-hant", "--out", str(tmp_path), str(LESSON)],
                          capture_output=True, text=True, check=True)
    written = tmp_path / "zh-hant" / LESSON.name
    assert done.stdout.strip() == str(written)
    assert nbformat.read(written, as_version=4).metadata["language"] == "zh-hant"
    shown = re.findall(r"\]\((figures/[^)]+\.svg)\)", written.read_text("utf-8"))
    assert shown, "lesson 3 shows figures / 第 3 课展示图"
    assert all((written.parent / figure).is_file() for figure in shown), "the copy's figures are beside it"
    for figure in shown:  # their labels in 繁體, the rest of the drawing as drawn
        svg, drawn = (written.parent / figure).read_text("utf-8"), (LESSON.parent / figure).read_text("utf-8")
        assert CJK.search(svg) and not SIMPLIFIED_ONLY & set(svg), figure
        assert re.sub(r">[^<]*<", "><", svg) == re.sub(r">[^<]*<", "><", drawn), figure
    view = nbformat.read(written, as_version=4)
    assert answers_to_prompts(view) and not any(cell.outputs for cell in answers_to_prompts(view)), (
        "no answer printed under a prompt / 提问下方不显示答案")
