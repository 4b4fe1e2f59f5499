import re
import string

import pytest

from autograder.messages import Bilingual, catalogue, message, text

pytestmark = pytest.mark.unit  # `make test-fast`

CJK = re.compile(r"[\u4e00-\u9fff]")
KEYS = sorted(catalogue())


@pytest.mark.parametrize("key", KEYS)
def test_every_message_has_english_and_chinese(key):
    entry = catalogue()[key]
    assert set(entry) == {"en", "zh"}, f"{key}: languages {sorted(entry)}"
    assert entry["en"].strip() and not CJK.search(entry["en"]), f"{key}: English text missing or not English"
    assert CJK.search(entry["zh"]), f"{key}: Chinese text missing or untranslated"


@pytest.mark.parametrize("key", KEYS)
def test_both_languages_use_the_same_fields(key):
    fields = {lang: {f for _, f, _, _ in string.Formatter().parse(t) if f} for lang, t in catalogue()[key].items()}
    assert fields["en"] == fields["zh"], key


def test_message_is_english_line_then_chinese_line():
    shown = message("wrong_device", what="f(x)", expected="meta", found="cpu")
    english, chinese = shown.split("\n")
    assert english.startswith("f(x): expected device meta, found cpu.")
    assert chinese.startswith("f(x)：期望设备为 meta，实际为 cpu。")


def test_bilingual_fields_fill_each_language_with_its_own_text():
    hint = text("dtype_hint_keep")
    shown = text("wrong_dtype", what="w", expected="float32", found="float16", hint=hint)
    assert shown.en.endswith(hint.en) and shown.zh.endswith(hint.zh)
    assert isinstance(shown, Bilingual)
