"""WordPiece on the tiny vocabulary: normalisation, punctuation, CJK, [UNK], pairs, truncation."""

import pytest

from attn_explorer.models import TokenizerConfig, WordPieceTokenizer
from attn_explorer.models.testing.tiny_bert import TINY_VOCAB


@pytest.fixture
def tokenizer():
    return WordPieceTokenizer(list(TINY_VOCAB))


def test_whole_words_and_pieces(tokenizer):
    assert tokenizer.tokenize("The cat sat") == ["the", "cat", "sat"]
    assert tokenizer.tokenize("unaffable") == ["un", "##aff", "##able"]
    assert tokenizer.tokenize("cats") == ["cat", "##s"]


def test_accents_are_stripped_and_case_lowered(tokenizer):
    assert tokenizer.tokenize("CAFÉ Naïve") == ["cafe", "naive"]


def test_accents_kept_when_config_says_so():
    tokenizer = WordPieceTokenizer(list(TINY_VOCAB), TokenizerConfig(strip_accents=False))
    assert tokenizer.normalize("Café") == "café"
    cased = WordPieceTokenizer(list(TINY_VOCAB), TokenizerConfig(do_lower_case=False))
    assert cased.normalize("Café") == "Café"  # strip_accents follows do_lower_case


def test_punctuation_is_split_off(tokenizer):
    assert tokenizer.tokenize("hello,world!") == ["hello", ",", "world", "!"]
    assert tokenizer.tokenize("$(a)") == ["$", "(", "a", ")"]


def test_cjk_characters_are_words_of_their_own(tokenizer):
    assert tokenizer.tokenize("中国cat") == ["中", "国", "cat"]


def test_unknown_and_overlong_words_become_unk(tokenizer):
    assert tokenizer.tokenize("☃") == ["[UNK]"]
    assert tokenizer.tokenize("cat☃") == ["[UNK]"]  # one uncovered piece sinks the word
    assert tokenizer.tokenize("a" * 101) == ["[UNK]"]
    assert tokenizer.tokenize("a" * 100) != ["[UNK]"]


def test_control_characters_removed_and_whitespace_normalised(tokenizer):
    assert tokenizer.normalize("a\x00b\u200bc\td\u00a0e") == "abc d e"
    assert tokenizer.normalize("ΟΔΥΣ") == "οδυσ"  # per-character lower-case: no final sigma


def test_special_tokens_typed_in_the_text_stay_whole(tokenizer):
    assert tokenizer.tokenize("the [MASK] sat") == ["the", "[MASK]", "sat"]


def test_single_and_pair_encoding(tokenizer):
    single = tokenizer.encode("the cat")
    assert single.tokens == ["[CLS]", "the", "cat", "[SEP]"]
    assert single.token_type_ids == [0, 0, 0, 0]
    assert single.input_ids == [TINY_VOCAB.index(t) for t in single.tokens]
    pair = tokenizer.encode("the cat", "sat")
    assert pair.tokens == ["[CLS]", "the", "cat", "[SEP]", "sat", "[SEP]"]
    assert pair.token_type_ids == [0, 0, 0, 0, 1, 1]
    assert tokenizer.encode("the cat", "   ").tokens == single.tokens  # blank pair: no pair


@pytest.mark.parametrize("text", ["", "   ", "\x00\u200b"])
def test_empty_sentence_is_a_clear_error(tokenizer, text):
    with pytest.raises(ValueError, match="empty"):
        tokenizer.encode(text)


def test_truncation_is_flagged(tokenizer):
    encoding = tokenizer.encode("the cat " * 10, max_length=8)
    assert encoding.truncated and encoding.full_length == 22
    assert encoding.tokens == ["[CLS]", "the", "cat", "the", "cat", "the", "cat", "[SEP]"]
    pair = tokenizer.encode("the cat " * 4, "a", max_length=8)
    assert pair.tokens == ["[CLS]", "the", "cat", "the", "cat", "[SEP]", "a", "[SEP]"]
    assert not tokenizer.encode("the cat", max_length=8).truncated


def test_vocabulary_without_special_tokens_is_refused():
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        WordPieceTokenizer(["[PAD]", "[UNK]", "[SEP]", "a"])
