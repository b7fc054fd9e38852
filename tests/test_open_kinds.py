"""Open questions whose answer is a person or a time (`assistant.people`, `assistant.when`):
which questions they are, who may answer, and a time told as people say it."""

from assistant import people, when
from assistant.query import Query
from memory.records import Unit


def unit(uid, agent, ms, text):
    return Unit(uid, agent, ms, ms + 30_000, text, ())


def test_which_questions_want_a_person_or_a_time():
    assert people.asks_who("Who used the screwdriver first?") and people.asks_who("Whose phone is this?")
    assert not people.asks_who("What did Tasha buy?")
    assert when.asks_when("When was the last time we talked about coffee?")
    assert when.asks_when("when did we first mention hot pot")
    assert not when.asks_when("When we go out shopping, who usually sits next to me?")
    assert not when.asks_when("What did we eat when Lucia came?")
    assert not when.asks_when("When I usually buy clothes, what type of clothing do I not purchase?")
    assert people.asks_who("When we go out shopping and take a taxi, who usually sits next to me?")
    assert people.asks_who("Among us, who doesn't like eating durian") and people.asks_who("With whom did I eat?")
    assert not people.asks_who("What did the person who bought the durian say?")
    dropped = "When I was eating the cake, I dropped the strawberry. Who helped me pick it up?"
    assert people.asks_who(dropped) and not when.asks_when(dropped)  # the question is its last sentence
    assert not people.asks_who("Where did the man who fixed the shelf go?")
    assert people.asks_who("谁先用了螺丝刀？") and when.asks_when("我们上次什么时候喝咖啡？")
    assert not people.asks_who("我们午饭吃了什么？") and not when.asks_when("我们午饭吃了什么？")


def test_the_people_who_may_answer(clock):
    t = clock.parse("DAY1 11:00:00")
    units = [unit(1, "A2_ALICE", t, "Nicous: Where is the tape?\nI keep tightening screws\nNicous: Here"),
             unit(2, "A3_TASHA", t, "Tasha: Here\n说话人1: 好\nNote: once\nOthers: yes\nOthers: no")]
    agents = ["A1_JAKE", "A2_ALICE", "A3_TASHA", "A4_LUCIA"]
    q = Query("Who helped Alice look after the ring?", t, asker="A1_JAKE")
    # not Alice: she is asked of; not "Others", a crowd seen twice
    assert people.candidates(q, agents, units) == ["Jake", "Tasha", "Lucia", "Nicous"]
    q = Query("Who came to visit my room at noon?", t, asker="A1_JAKE")
    assert people.candidates(q, agents, units) == ["Alice", "Tasha", "Lucia", "Nicous"]  # "my": not the asker
    q = Query("Who joined us on the way home from shopping?", t, asker="A1_JAKE")
    assert people.candidates(q, agents, units) == ["Alice", "Tasha", "Lucia", "Nicous"]  # "us": not the asker
    q = Query("Among us, who often goes out wearing slippers?", t, asker="A1_JAKE")
    assert people.candidates(q, agents, units) == ["Jake", "Alice", "Tasha", "Lucia", "Nicous"]  # one of "us"
    assert people.sentence(["Jake"], units[0], Query("Who put it there?", t, asker="A1_JAKE"),
                           clock.label) == "You (Jake), around 11:00 on DAY1."
    assert people.sentence(["Tasha"], None, q, clock.label) == "Tasha."
    # company is often more than one person: the best two are named, the asker as "You"
    assert people.asks_companions("Who was I with when we took the car?") and people.asks_companions("我和谁一起吃饭？")
    assert not people.asks_companions("Who used the screwdriver first?")
    assert people.sentence(["Tasha", "Jake"], units[0], Query("Who did I eat with?", t, asker="A1_JAKE"),
                           clock.label) == "You (Jake) and Tasha, around 11:00 on DAY1."
    q = Query("Was it Alice or Tasha who fixed the shelf?", t, asker="A1_JAKE")
    assert people.candidates(q, agents, units) == ["Alice", "Tasha"]
    assert people.shows(units[0], "Alice") and people.shows(units[0], "Nicous") and not people.shows(units[1], "Lucia")


def test_a_time_told_as_people_say_it(clock):
    now = clock.parse("DAY2 17:20:00")
    assert when.ago(clock.parse("DAY2 16:31:00"), now, clock) == "About 50 minutes ago"
    assert when.ago(clock.parse("DAY2 13:25:00"), now, clock) == "About four hours ago"
    assert when.ago(clock.parse("DAY2 12:50:00"), now, clock) == "About four and a half hours ago"
    assert when.ago(clock.parse("DAY2 16:22:00"), now, clock) == "About an hour ago"
    assert when.ago(clock.parse("DAY2 16:21:00"), now, clock) == "About an hour ago"
    assert when.ago(clock.parse("DAY1 20:31:00"), now, clock) == "Last night"
    assert when.ago(clock.parse("DAY1 02:10:00"), now, clock) == "The night before last"
    assert when.ago(clock.parse("DAY1 15:10:00"), now, clock) == "Yesterday afternoon"
    assert when.ago(clock.parse("DAY1 12:10:00"), clock.parse("DAY3 16:50:00"), clock) == \
        "The day before yesterday at noon"
    assert when.ago(clock.parse("DAY1 12:10:00"), clock.parse("DAY5 12:00:00"), clock) == "Four days ago"


def test_the_moment_that_answers_follows_the_question_s_order(clock):
    at = clock.parse
    units = [unit(1, "A1_JAKE", at("DAY1 13:59:00"), "Tasha: We can cook hot pot here"),
             unit(2, "A4_LUCIA", at("DAY1 17:31:00"), "Shure: Hot pot base, two packs"),
             unit(3, "A1_JAKE", at("DAY1 15:00:00"), "I wash the strawberries")]
    now = at("DAY1 18:00:00")
    first = Query("When did we first mention having hot pot?", now)
    last = Query("When was the last time we talked about hot pot?", now)
    idf = {"hot": 2.0, "pot": 2.0, "talk": 0.5, "coffe": 3.0}.get
    idf = lambda t, f=idf: f(t, 1.0)  # noqa: E731
    assert when.moment(units, first, clock, idf).id == 1 and when.moment(units, last, clock, idf).id == 2
    assert when.moment(units, Query("When did we buy the durian?", now), clock, idf) is None  # no word of it
    talk = [unit(4, "A2_ALICE", at("DAY1 10:00:00"), "Alice: I like coffee"),
            unit(5, "A3_TASHA", at("DAY1 17:00:00"), "Tasha: we can talk later")]
    assert when.moment(talk, Query("When was the last time we talked about coffee?", now), clock, idf).id == 4
    # asked while cherries are being talked of: the answer is the occasion before, not the one under way
    cherries = [unit(6, "A5_KATRINA", at("DAY2 10:45:00"), "Katrina: Free cherry radish seeds"),
                unit(7, "A1_JAKE", at("DAY2 10:38:00"), "Jake: cherry tomatoes, cherries"),
                unit(8, "A3_TASHA", at("DAY1 11:40:00"), "Tasha: we could buy cherries"),
                unit(9, "A2_ALICE", at("DAY1 09:00:00"), "Alice: good morning")]
    asked = Query("When was the last time cherries were mentioned?", at("DAY2 10:50:00"))
    assert when.under_way(cherries, [1, 1, 1, 0], asked.as_of_ms) == {6, 7}
    assert when.moment(cherries, asked, clock, idf).id == 8
    again = Query("Katrina mentions cherries. When were cherries mentioned before?", at("DAY2 10:50:00"))
    assert when.moment(cherries, again, clock, idf).id == 8
    only_now = Query("When was the last time cherries were mentioned?", at("DAY2 10:50:00"))
    assert when.moment(cherries[:2], only_now, clock, idf).id == 6  # nothing before: the latest there is
    # the occasion before in Chinese alone (five of the six wearers' captions are): its words
    # are read in the glossary's sure translations ("cherries" in 樱桃)
    chinese = [*cherries[:2], unit(10, "A4_LUCIA", at("DAY1 11:40:00"), "我看着桌子\nLucia: 我们可以买樱桃吗"),
               unit(11, "A2_ALICE", at("DAY1 12:00:00"), "Alice: 我们买桃子吧")]
    assert when.moment(chinese, only_now, clock, idf).id == 6  # without them, the occasion under way
    sure = {"cherri": {"樱桃", "樱"}}.get
    found = when.moment(chinese, only_now, clock, idf, lambda t: sure(t, set()))
    assert found.id == 10
    assert when.sentence(found, only_now, clock, lambda t: sure(t, set())) == \
        'Yesterday morning (DAY1 11:40): "Lucia: 我们可以买樱桃吗".'
    # the line shown is the English twin of the Chinese line that holds the word (樱桃小丸子: Chibi Maruko)
    twins = unit(12, "A1_JAKE", at("DAY1 11:48:00"), "Katrina: We can plant it too\nKatrina: 海底捞最近跟樱桃小丸子联名\n"
                                                     "Katrina: Haidilao recently partnered with Chibi Maruko-chan")
    assert when.sentence(twins, only_now, clock, lambda t: sure(t, set())) == \
        'Yesterday morning (DAY1 11:48): "Katrina: Haidilao recently partnered with Chibi Maruko-chan".'
    assert when.sentence(units[0], first, clock) == 'About four hours ago (DAY1 13:59): "Tasha: We can cook hot pot here".'
    # a recording asked about long after (chat's as-of is the wall clock): the day and time, not "697 days ago"
    late = Query("When did we first mention hot pot?", units[0].start_ms + 697 * when.DAY)
    assert when.sentence(units[0], late, clock) == 'On DAY1 at 13:59: "Tasha: We can cook hot pot here".'


def test_a_name_is_scored_by_its_own_probability_not_its_tokens_mean(monkeypatch):
    """' T' + 'asha': the mean of a two-token name halves the cost of its first token when the
    second is sure. Read by the total (the default), the likelier name wins; by the mean, the other."""
    from models.llm import Usage
    from models.scoring import Scores

    got = Scores([], options=[-1.2, -0.8], pmi=[0.0, 0.0], totals=[-1.2, -1.6])
    monkeypatch.setattr(people, "score_choices", lambda *a, **kw: (got, Usage()))
    none = {"mentions": [0.0, 0.0]}
    pick = lambda reading: people.pick(None, [], "Answer:", ["Alice", "Tasha"], lambda ns: none, {}, reading)[0]  # noqa: E731
    assert pick("total") == "Alice" and pick("likelihood") == "Tasha"
    name, scores, _ = people.pick(None, [], "Answer:", ["Alice", "Tasha"], lambda ns: none, {}, "total")
    assert scores["total"] == [-1.2, -1.6] and scores["pick"] == "Alice"
    # the evidence's vote still counts: mentions that back Tasha outweigh the model's small lead
    backed = {"mentions": [0.0, 3.0]}
    assert people.pick(None, [], "Answer:", ["Alice", "Tasha"], lambda ns: backed, {"mentions": 1.0}, "total")[0] == "Tasha"
