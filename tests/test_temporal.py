import pytest

from assistant.temporal import HOUR, read_intent


@pytest.fixture
def now(clock):
    return clock.at(3, 15 * 3600)  # DAY3 15:00


@pytest.mark.parametrize("question, lo, hi, order", [
    ("What did Tasha cook on DAY2?", (2, 0), (3, 0), None),
    ("Who went shopping yesterday?", (2, 0), (3, 0), None),
    ("Who did I talk to this morning?", (3, 5), (3, 12), None),
    ("What did we eat today?", (3, 0), (3, 15), None),
    ("Who just helped Katrina with the flowers?", (3, 14), (3, 15), None),
    ("What was I holding two hours ago?", (3, 12.5), (3, 13.5), None),
    ("When was the last time we talked about coffee?", None, None, "latest"),
    ("Who used the screwdriver first?", None, None, "earliest"),
    ("Who was the last person to use the small white microwave on the first floor?", None, None, "latest"),
    ("On the first day, who did Tasha ask to bring her a cup?", None, None, None),
    ("What do I usually show everyone on my phone?", None, None, "spread"),
    ("What app did I order the takeout with?", None, None, None),
])
def test_intent_ranges_and_orders(clock, now, question, lo, hi, order):
    i = read_intent(question, now, clock)
    at = lambda d_h: None if d_h is None else clock.at(d_h[0], d_h[1] * 3600)  # noqa: E731
    assert (i.lo, i.hi, i.order) == (at(lo), at(hi), order)


def test_a_range_never_reaches_past_as_of(clock, now):
    i = read_intent("What happened this evening?", clock.at(3, 19 * 3600), clock)
    assert i.hi == clock.at(3, 19 * 3600) and i.lo == clock.at(3, 17 * 3600)


def test_relevance_is_soft_outside_the_range(clock, now):
    i = read_intent("Who went shopping yesterday?", now, clock)
    inside, near, far = clock.at(2, 12 * 3600), clock.at(3, 3600), clock.at(1, 3600)
    assert i.relevance(inside) == 1.0
    assert 0.05 < i.relevance(near) < 1.0
    assert i.relevance(far) < i.relevance(near)
    assert i.relevance(clock.at(2, 23 * 3600) + 7 * 24 * HOUR) == 0.05  # floor: never a hard cut
