"""Audio and frame messages on the wire: both header forms, coded errors."""

import pytest

from streams.errors import SchemaViolation
from streams.messages import MediaHeader, TooLarge, split_media


def test_v5_user_properties_and_311_header_line_give_the_same_header():
    h = MediaHeader(ts=1735700000123, seq=7, id="cam-7")
    raw = b"\x00\x01" * 10
    v5 = split_media(raw, dict(h.user_properties()))
    v311 = split_media(h.with_bytes(raw))
    assert v5 == v311 == (h, raw)
    assert h.with_bytes(raw).split(b"\n", 1)[0] == b'{"ts":1735700000123,"seq":7,"id":"cam-7"}'


def test_raw_bytes_may_contain_newlines_after_the_header():
    raw = b"\n\n\xff\xd8\n"
    assert split_media(MediaHeader(ts=5, seq=0).with_bytes(raw))[1] == raw


@pytest.mark.parametrize("payload,user,fragment", [
    (b"\x00\x01\x02", {}, "no header"),
    (b'{"ts": 1, "seq": 0}', {}, "no header"),  # no newline: where would the bytes start?
    (b'{"ts": "soon", "seq": 0}\n\x00', {}, "ts"),
    (b'{"ts": 1, "seq": 0, "what": 1}\n\x00', {}, "what"),
    (b"\x00\x00", {"ts": "12a", "seq": "1"}, "decimal"),
    (b"\x00\x00", {"ts": "12"}, "seq"),
    (b"\x00\x00", {"ts": "12", "seq": "1", "id": "a b"}, "id"),
])
def test_bad_headers_are_schema_errors(payload, user, fragment):
    with pytest.raises(SchemaViolation) as e:
        split_media(payload, user, where="chorus/v1/agents/r1/audio")
    assert e.value.code == "bad_schema" and fragment in str(e.value)


def test_a_payload_over_the_limit_is_too_large():
    with pytest.raises(TooLarge) as e:
        split_media(b"{}\n" + b"\x00" * 100, max_bytes=50)
    assert e.value.code == "too_large"
