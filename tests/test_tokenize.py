from memory.tokenize import estimate_tokens, query_tokens, tokenize


def test_english_is_stemmed_without_stop_words():
    assert tokenize("Who used the screwdrivers?") == ["use", "screwdriv"]
    assert tokenize("She is USING a Screwdriver") == ["use", "screwdriv"]


def test_chinese_gives_unigrams_and_bigrams():
    assert tokenize("螺丝刀") == ["螺", "丝", "刀", "螺丝", "丝刀"]


def test_mixed_line_keeps_both_scripts():
    toks = tokenize("Lucia: 这个螺丝刀 has no magnet")
    assert "lucia" in toks and "magnet" in toks and "螺丝" in toks and "这个" in toks


def test_full_width_forms_are_normalized():
    assert tokenize("ＡＢＣ１２") == tokenize("abc12")


def test_question_words_are_dropped_from_queries_only():
    assert "where" not in query_tokens("Where did I put the charger?")
    assert "charger" in query_tokens("Where did I put the charger?")


def test_token_estimate_grows_with_text():
    assert estimate_tokens("我拿着手机") == 5
    assert estimate_tokens("hello world") < estimate_tokens("hello world, how are you today")
