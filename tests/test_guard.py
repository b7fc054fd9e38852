"""The gate in front of the agents' topics and the throttle on complaints, on a fake clock."""

from daemon.admission import Gate, RateLimit, ReportThrottle


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_rate_limit_allows_the_burst_then_the_rate():
    clock = Clock()
    rl = RateLimit(rate=10, burst=5, clock=clock)
    assert [rl.take("a") for _ in range(6)] == [True] * 5 + [False]
    assert rl.take("b")  # buckets are per key
    clock.t += 0.35  # 3.5 tokens back
    assert [rl.take("a") for _ in range(4)] == [True, True, True, False]


def test_rate_limit_forgets_idle_keys_when_there_are_too_many():
    clock = Clock()
    rl = RateLimit(rate=1, burst=2, clock=clock, max_keys=100)
    for i in range(100):
        rl.take(f"junk{i}")
    clock.t += 10
    rl.take("new")
    assert len(rl.buckets) == 1


def test_gate_allow_list_then_rate():
    clock = Clock()
    g = Gate(["robot1", "robot2"], rate=1, burst=2, clock=clock)
    assert g.check("robot9")[0] == "not_allowed"
    assert g.check("robot1") is None and g.check("robot1") is None
    code, message = g.check("robot1")
    assert code == "rate_limited" and "robot1" in message
    assert g.check("robot2") is None
    assert g.counts == {"not_allowed": 1, "rate_limited": 1}
    assert Gate([], rate=1, burst=1).check("anyone") is None  # no list: every valid id


def test_throttle_holds_back_a_flood_and_says_how_much():
    clock = Clock()
    t = ReportThrottle(rate=1, burst=3, clock=clock)
    assert [t.admit("bad_schema", "r1") for _ in range(5)] == [0, 0, 0, None, None]
    assert t.admit("bad_time", "r1") == 0  # another complaint is not held back
    clock.t += 1
    assert t.admit("bad_schema", "r1") == 2
