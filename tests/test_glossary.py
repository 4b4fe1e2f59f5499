import pytest

from autograder.glossary import missing_terms, terms

REQUIRED = {"device": "设备", "tensor": "张量", "parameter": "参数", "buffer": "缓冲区", "dtype": "数据类型",
            "in-place": "原地", "leaf tensor": "叶子张量", "pinned memory": "锁页内存", "mixed precision": "混合精度",
            "non-blocking": "非阻塞"}


@pytest.mark.parametrize("english, chinese", REQUIRED.items())
def test_the_briefs_terms_are_in_the_glossary(english, chinese):
    assert any(t["zh"] == chinese and not missing_terms(english, chinese) for t in terms())


@pytest.mark.parametrize("term", terms(), ids=lambda t: t["zh"])
def test_every_term_has_all_three_forms(term):
    assert set(term) == {"en", "zh", "zh-hant"} and all(term.values())


def test_an_english_term_requires_its_chinese_word():
    assert missing_terms("Move the buffers to the device.", "把缓冲区移到设备上。") == []
    assert missing_terms("Move the buffers to the device.", "把缓存移到设备上。") == ["buffers? → 缓冲区"]


def test_terms_inside_words_do_not_count():
    assert missing_terms("The leafy deviceful parameterisation", "无") == []
