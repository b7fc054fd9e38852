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
    # a bare part of the day: the latest such part begun at least an hour before as_of
    ("What did we eat at noon?", (3, 11), (3, 14), None),
    ("Who was in the kitchen in the afternoon?", (3, 12), (3, 15), None),
    ("What did we talk about during lunch?", (3, 11), (3, 14), None),
    ("What did Shure play in the evening?", (2, 17), (3, 0), None),  # today's has not begun: yesterday's
    ("What should we buy for dinner?", None, None, None),  # a meal ahead, not a time
    ("Who usually cooks dinner?", None, None, "spread"),  # a habit spans days
    ("What did I do last night?", (2, 18), (3, 5), None),
    ("Who cooked the night before last?", (1, 18), (2, 5), None),
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


def test_a_part_of_the_day_just_begun_is_yesterday_s(clock):
    """Asked at 12:30, "at noon" (from 11:00) has run an hour and a half: today's. Asked at 11:30,
    it has hardly begun, and the question is about the one before."""
    at = lambda d, h: clock.at(d, int(h * 3600))  # noqa: E731
    assert read_intent("Who was at the table at noon?", at(3, 12.5), clock).lo == at(3, 11)
    assert read_intent("Who was at the table at noon?", at(3, 11.5), clock).lo == at(2, 11)
