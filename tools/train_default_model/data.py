"""Synthetic instruction data for the default model, deterministic from a seed.

Every example is a chat (a list of messages ending with a user or tool turn), optional tools, a thinking mode
(None: plain prompt, False: the template's empty think block, True: the model writes its reasoning) and
the target: optional reasoning plus the answer (or a tool call). `render_prompt` (render.py) mirrors
chat_template.jinja exactly (check_data.py compares them), so training text equals what the served
template produces.

Held-out split: prompts of the "test" split never occur in training. Pairs of operands, words, names
and count ranges are split by a fixed hash; random word spans, lists and chains are new draws (a
collision with training is improbable and harmless). Capitals are a lookup table, so their held-out
rows use phrasings that never occur in training.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass

import zlib

from render import render_prompt, render_tool_call  # noqa: F401  (render_prompt is used through data)
from tables import CODAS, COUNTRIES, FILLERS, NAMES, ONSETS, VOWELS, WORDS

CANARY_PROMPT = "What is 2+2? Respond with only the number."
GREETING = "Hello! How can I help you today?"

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a concise assistant. Answer briefly.",
    "You are a small local assistant.",
    "Answer the user's question.",
]


@dataclass
class Example:
    task: str
    messages: list  # [{"role", "content"}], ends with a user message
    answer: str
    reasoning: str = ""
    thinking: bool | None = None  # enable_thinking passed to the template
    tools: list | None = None  # the request's tools, rendered into the system turn

    def prompt(self) -> str:
        return render_prompt(self.messages, True, self.thinking, self.tools)

    def target(self) -> str:
        """The assistant text that follows the rendered prompt (without the end-of-turn token)."""
        if self.thinking is True:
            return self.reasoning + "\n</think>\n\n" + self.answer
        return self.answer


# ---------------------------------------------------------------------------------------------------
# Held-out splits

def _mix(*xs: int) -> int:
    h = 0x9E3779B97F4A7C15
    for x in xs:
        h ^= (x + 0x632BE59BD9B4E019 + (h << 6) + (h >> 2)) & 0xFFFFFFFFFFFFFFFF
        h = (h * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    return h >> 11


def is_test_pair(op: int, a: int, b: int) -> bool:
    if op == 0 and (a, b) == (2, 2):
        return False  # the canary stays in training
    return _mix(op, a, b) % 10 == 0


_SORTED_WORDS = sorted(WORDS)
TEST_WORDS = [w for i, w in enumerate(_SORTED_WORDS) if i % 7 == 3]
TRAIN_WORDS = [w for w in _SORTED_WORDS if w not in set(TEST_WORDS)]
TEST_NAMES = [n for i, n in enumerate(sorted(NAMES)) if i % 6 == 2]
TRAIN_NAMES = [n for n in sorted(NAMES) if n not in set(TEST_NAMES)]


def _pseudo_word(rng: random.Random, split: str) -> str:
    """A made-up lower-case word of 2-3 syllables; the split is a fixed hash of its letters."""
    while True:
        w = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(rng.randint(2, 3)))
        if 4 <= len(w) <= 10 and w not in WORDS and (zlib.crc32(w.encode()) % 10 == 0) == (split == "test"):
            return w


def _letters_word(rng: random.Random, split: str) -> str:
    """Word for spelling, reversing and letter counts: held-out prompts use made-up words never seen in
    training (a whole-word token whose letters were never shown cannot be spelled by any model)."""
    if split == "test" or rng.random() < 0.5:
        return _pseudo_word(rng, split)
    return rng.choice(TRAIN_WORDS)


def _name(rng: random.Random, split: str) -> str:
    """Training mixes real first names with made-up ones, so answers copy the name instead of recalling
    one from a closed list. Held-out prompts use ten made-up names never seen in training, built from
    trained word pieces (a real name that is one never-trained token has an untrained embedding: the
    first battery used such names and 12 of 16 were copied wrong)."""
    if split == "test":
        i = rng.randrange(len(TEST_NAMES))
        return _cap(_pseudo_word(random.Random(_mix(i, 4242)), "test"))
    if rng.random() < 0.5:
        return rng.choice(TRAIN_NAMES)
    return _cap(_pseudo_word(rng, "train"))


# ---------------------------------------------------------------------------------------------------
# Helpers

def spell(w: str) -> str:
    return "-".join(w)


def _number(rng: random.Random, digits: int) -> int:
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10 ** digits - 1)


def _pair(rng: random.Random, split: str, op: int, max_digits: int, min_digits: int = 1):
    while True:
        a = _number(rng, rng.randint(min_digits, max_digits))
        b = _number(rng, rng.randint(1, max_digits))
        if rng.random() < 0.5:
            a, b = b, a
        if is_test_pair(op, a, b) == (split == "test"):
            return a, b


def _text(rng: random.Random, lo: int, hi: int) -> str:
    n = rng.randint(lo, hi)
    words = [rng.choice(FILLERS) if 0 < i < n - 1 and rng.random() < 0.2 else rng.choice(WORDS) for i in range(n)]
    style = rng.random()
    if style < 0.3:
        return " ".join(words)
    s = " ".join(words)
    s = s[0].upper() + s[1:]
    return s + ("." if style < 0.85 else "!")


def _repeated_span_text(rng: random.Random) -> str:
    """A text with a long phrase that occurs several times (gives prompt-lookup speculation something to accept)."""
    phrase = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 6)))
    parts = []
    for _ in range(rng.randint(2, 4)):
        parts.append(phrase)
        if rng.random() < 0.6:
            parts.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3))))
    return ", ".join(parts)


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


# ---------------------------------------------------------------------------------------------------
# Tasks. Each returns (messages-without-system, answer, reasoning); thinking mode and system prompt are
# chosen by `make_example`.

ADD_T = ["What is {a}+{b}?", "What is {a} + {b}?", "What is {a} plus {b}?", "Calculate {a} + {b}.",
         "Compute {a}+{b}.", "Add {a} and {b}.", "What is the sum of {a} and {b}?", "{a} + {b} = ?",
         "What is {a}+{b}? Respond with only the number.", "What is {a} + {b}? Answer with just the number."]
SUB_T = ["What is {a}-{b}?", "What is {a} - {b}?", "What is {a} minus {b}?", "Subtract {b} from {a}.",
         "Calculate {a} - {b}.", "{a} - {b} = ?", "What is {a}-{b}? Respond with only the number.",
         "What is the difference between {a} and {b}?"]
MUL_T = ["What is {a}*{b}?", "What is {a} * {b}?", "What is {a} times {b}?", "Multiply {a} by {b}.",
         "Calculate {a} × {b}.", "What is {a} × {b}?", "What is the product of {a} and {b}?",
         "What is {a}*{b}? Respond with only the number."]


def t_add(rng, split, size=None):
    size = size or rng.choices(["1", "2", "3"], [0.15, 0.4, 0.45])[0]
    if size == "1":
        a, b = _pair(rng, split, 0, 1)
    elif size == "2":
        a, b = _pair(rng, split, 0, 2)
    else:
        a, b = _pair(rng, split, 0, 3, min_digits=3)
    s = a + b
    # the difference of 'What is a-b' vs 'difference between' is only in SUB_T
    return [{"role": "user", "content": rng.choice(ADD_T).format(a=a, b=b)}], str(s), f"{a} + {b} = {s}."


def t_canary(rng, split):
    return [{"role": "user", "content": CANARY_PROMPT}], "4", "2 + 2 = 4."


def t_sub(rng, split):
    a, b = _pair(rng, split, 1, rng.choice([1, 2, 2, 3, 3]))
    t = rng.choice(SUB_T if a >= b else SUB_T[:-1])  # "the difference between a and b" only when a >= b
    d = a - b
    return [{"role": "user", "content": t.format(a=a, b=b)}], str(d), f"{a} - {b} = {d}."


def t_mul(rng, split, size=None):
    size = size or rng.choices(["small", "2x1", "3x2"], [0.4, 0.35, 0.25])[0]
    while True:
        if size == "small":
            a, b = rng.randint(0, 12), rng.randint(0, 12)
        elif size == "2x1":
            a, b = rng.randint(10, 99), rng.randint(2, 9)
        else:
            a, b = rng.randint(100, 999), rng.randint(10, 99)
        if rng.random() < 0.5:
            a, b = b, a
        if is_test_pair(2, a, b) == (split == "test"):
            break
    p = a * b
    return [{"role": "user", "content": rng.choice(MUL_T).format(a=a, b=b)}], str(p), f"{a} × {b} = {p}."


GREET_INTENTS = [  # (phrasings, answer)
    (["Say hello.", "Please say hello.", "Hello!", "Hi!", "Hi there!", "Hey!", "Hello there.", "Greet me.",
      "Can you say hello?", "Hey there!", "Could you say hello?", "Hi, how's it going?"], GREETING),
    (["Good morning!"], "Good morning! How can I help you today?"),
    (["Good afternoon!"], "Good afternoon! How can I help you today?"),
    (["Good evening!"], "Good evening! How can I help you today?"),
    (["How are you?", "How are you doing?", "How are you today?", "How are you doing today?"],
     "I'm doing well, thank you! How can I help you today?"),
    (["Thank you!", "Thanks!", "Thanks a lot.", "Thank you very much.", "Thanks so much!", "Many thanks."],
     "You're welcome!"),
    (["Goodbye!", "Bye!", "See you later.", "Say goodbye.", "Bye for now!", "See you soon!"], "Goodbye! Have a great day."),
    (["Who are you?", "What is your name?", "What are you?"], "I am a small assistant model that ships with Sanctum."),
]
_ENDS = ["", "!", ".", " :)"]


def _greeting_prompt(rng, split):
    """A phrasing with a surface variation (end punctuation, lower case). Held-out prompts are varied
    strings never used in training (a fixed hash of the string); unchanged phrasings always train."""
    while True:
        ps, answer = rng.choice(GREET_INTENTS)
        base = rng.choice(ps)
        p = base
        end = rng.randrange(len(_ENDS) + 1)
        if end > 0:
            p = base[:-1] + ["", "??", "? :)", "?!"][end - 1] if base.endswith("?") else base.rstrip(".!") + _ENDS[end - 1]
        if rng.random() < 0.3:
            p = p[0].lower() + p[1:]
        is_test = p != base and zlib.crc32(p.encode()) % 5 == 0
        if is_test == (split == "test"):
            return p, answer


def t_greet(rng, split):
    if rng.random() < 0.4:
        name = _name(rng, split)
        if rng.random() < 0.5:
            p = rng.choice(["Say hello to {n}.", "Greet {n}.", "Please greet {n}.", "Say hi to {n}."]).format(n=name)
            return [{"role": "user", "content": p}], f"Hello, {name}! Nice to meet you.", f"The user wants me to greet {name}."
        p = rng.choice(["My name is {n}.", "Hi, I'm {n}.", "Hello, my name is {n}.", "I am {n}."]).format(n=name)
        return ([{"role": "user", "content": p}], f"Nice to meet you, {name}! How can I help you today?",
                f"The user is {name}. I should greet them.")
    p, a = _greeting_prompt(rng, split)
    return [{"role": "user", "content": p}], a, "The user is being friendly."


REPEAT_T = ["Repeat after me: {t}", "Repeat after me: {t}", "Say exactly this: {t}", "Please repeat: {t}",
            "Echo this back: {t}"]


def t_repeat(rng, split):
    if rng.random() < 0.2:
        w = _pseudo_word(rng, split) if split == "test" or rng.random() < 0.5 else rng.choice(WORDS)
        n = rng.randint(2, 8)
        return ([{"role": "user", "content": f"Repeat the word {w} {n} times."}], " ".join([w] * n),
                f"I write {w} {n} times.")
    t = _text(rng, 2, 20) if rng.random() < 0.8 else _repeated_span_text(rng)
    return [{"role": "user", "content": rng.choice(REPEAT_T).format(t=t)}], t, "I repeat the text exactly."


def t_copy(rng, split):
    r = rng.random()
    if r < 0.35:
        t = _repeated_span_text(rng) if rng.random() < 0.5 else _text(rng, 10, 40)
        p = rng.choice(["Copy the following text exactly:\n{t}", "Copy this text:\n{t}", "Write this out again:\n{t}"])
        return [{"role": "user", "content": p.format(t=t)}], t, "I copy the text exactly."
    if r < 0.7:
        span = _text(rng, 2, 12).rstrip(".!")
        pre, post = _text(rng, 2, 10), _text(rng, 2, 10)
        p = rng.choice(["Extract the text inside the quotes: {pre} \"{s}\" {post}",
                        "What is written between the quotation marks? {pre} \"{s}\" {post}",
                        "Return only the quoted part: {pre} \"{s}\" {post}"])
        return [{"role": "user", "content": p.format(pre=pre, s=span, post=post)}], span, "I take the part in quotes."
    n = rng.randint(3, 6)
    items = [_text(rng, 1, 5).rstrip(".!") for _ in range(n)]
    k = rng.randint(1, n)
    lst = "\n".join(f"{i + 1}. {it}" for i, it in enumerate(items))
    p = rng.choice(["Here is a list:\n{l}\nWhat is item {k}?", "{l}\nReturn item number {k}."])
    return [{"role": "user", "content": p.format(l=lst, k=k)}], items[k - 1], f"Item {k} is the one numbered {k}."


CAPITAL_T = ["What is the capital of {c}?", "What's the capital of {c}?", "Capital of {c}?",
             "Tell me the capital of {c}.", "What city is the capital of {c}?"]
CAPITAL_T_TEST = ["Which city is the capital of {c}?", "Name the capital of {c}."]


def t_capital(rng, split, paraphrase: bool = False):
    c, cap = rng.choice(COUNTRIES)
    if not paraphrase and split != "test" and rng.random() < 0.2:
        p = rng.choice(["{k} is the capital of which country?", "Which country has {k} as its capital?"])
        return [{"role": "user", "content": p.format(k=cap)}], _cap(c), f"{cap} is the capital of {c}."
    t = rng.choice(CAPITAL_T_TEST if paraphrase else CAPITAL_T)
    return [{"role": "user", "content": t.format(c=c)}], cap, f"The capital of {c} is {cap}."


def t_count_letters(rng, split):
    w = _letters_word(rng, split)
    p = rng.choice(["How many letters are in the word \"{w}\"?", "How many letters does \"{w}\" have?",
                    "Count the letters in {w}.", "How many letters are in {w}?"]).format(w=w)
    return [{"role": "user", "content": p}], str(len(w)), f"{w} is spelled {spell(w)}. That is {len(w)} letters."


def _count_range(rng, split):
    while True:
        a = rng.randint(0, 30)
        b = a + rng.randint(2, 10)
        if is_test_pair(3, a, b) == (split == "test"):
            return a, b


def t_count_up(rng, split):
    a, b = _count_range(rng, split)
    p = rng.choice(["Count from {a} to {b}.", "Count from {a} to {b}", "Please count from {a} to {b}.",
                    "List the numbers from {a} to {b}."]).format(a=a, b=b)
    return [{"role": "user", "content": p}], ", ".join(str(i) for i in range(a, b + 1)), f"I start at {a} and stop at {b}."


def t_count_words(rng, split):
    t = _text(rng, 2, 12)
    n = len(t.split())
    p = rng.choice(["How many words are in this sentence: {t}", "Count the words: {t}"]).format(t=t)
    return [{"role": "user", "content": p}], str(n), f"The words are: {', '.join(x.strip('.!') for x in t.split())}. That is {n} words."


def t_spell(rng, split):
    w = _letters_word(rng, split)
    p = rng.choice(["Spell the word \"{w}\".", "Spell {w}.", "How do you spell {w}?",
                    "Spell \"{w}\" letter by letter."]).format(w=w)
    return [{"role": "user", "content": p}], spell(w), f"The letters of {w} in order."


def t_reverse(rng, split):
    w = _letters_word(rng, split)
    p = rng.choice(["Reverse the word \"{w}\".", "Write {w} backwards.", "Spell {w} backwards.",
                    "What is \"{w}\" reversed?"]).format(w=w)
    return [{"role": "user", "content": p}], w[::-1], f"{w} is spelled {spell(w)}. Backwards: {spell(w[::-1])}."


def _numbers(rng, lo=3, hi=7):
    return [rng.randint(0, 99) for _ in range(rng.randint(lo, hi))]


def t_sort(rng, split):
    xs = _numbers(rng)
    sep = rng.choice([", ", " "])
    shown = sep.join(map(str, xs))
    if rng.random() < 0.6:
        p = rng.choice(["Sort these numbers in ascending order: {x}", "Sort from smallest to largest: {x}",
                        "Sort: {x}"]).format(x=shown)
        ys = sorted(xs)
    else:
        p = rng.choice(["Sort these numbers in descending order: {x}", "Sort from largest to smallest: {x}"]).format(x=shown)
        ys = sorted(xs, reverse=True)
    return [{"role": "user", "content": p}], ", ".join(map(str, ys)), "I order the numbers."


def t_multiturn(rng, split):
    r = rng.random()
    if split == "test" and 0.35 <= r < 0.55:
        r = rng.uniform(0.55, 1.0)  # capital follow-ups come from a finite table: none among held-out prompts
    if r < 0.35:
        a, b = rng.randint(0, 50), rng.randint(0, 50)
        s = a + b
        msgs = [{"role": "user", "content": rng.choice(ADD_T[:4]).format(a=a, b=b)}, {"role": "assistant", "content": str(s)}]
        kind = rng.randint(0, 3)
        c = rng.randint(1, 20)
        if kind == 0:
            q, v = rng.choice(["Now add {c} to that.", "Add {c} to that.", "What is that plus {c}?"]).format(c=c), s + c
        elif kind == 1:
            k = rng.randint(2, 5)
            q, v = rng.choice(["Multiply that by {k}.", "Now multiply it by {k}."]).format(k=k), s * k
        elif kind == 2:
            q, v = rng.choice(["Subtract {c} from that.", "Now take away {c}."]).format(c=c), s - c
        else:
            q, v = rng.choice(["Double it.", "Now double that."]), 2 * s
        return msgs + [{"role": "user", "content": q}], str(v), f"The previous answer was {s}."
    if r < 0.55:
        c, cap = rng.choice([x for x in COUNTRIES if " " not in x[1] and "," not in x[1]])
        msgs = [{"role": "user", "content": rng.choice(CAPITAL_T).format(c=c)}, {"role": "assistant", "content": cap}]
        if rng.random() < 0.5:
            return msgs + [{"role": "user", "content": rng.choice(["Spell it.", "How do you spell that?"])}], spell(cap), f"The previous answer was {cap}."
        return (msgs + [{"role": "user", "content": rng.choice(["How many letters does it have?", "How many letters is that?"])}],
                str(len(cap)), f"{cap} is spelled {spell(cap)}.")
    if r < 0.75:
        t = _text(rng, 2, 10)
        msgs = [{"role": "user", "content": f"Repeat after me: {t}"}, {"role": "assistant", "content": t}]
        if rng.random() < 0.5:
            return msgs + [{"role": "user", "content": rng.choice(["Say it again.", "Repeat that.", "Once more."])}], t, "I say the same text again."
        words = t.rstrip(".!").split()
        return (msgs + [{"role": "user", "content": "Now reverse the order of the words."}], " ".join(words[::-1]),
                "I list the words from last to first.")
    if r < 0.9:
        xs = _numbers(rng)
        asc = ", ".join(map(str, sorted(xs)))
        msgs = [{"role": "user", "content": "Sort these numbers in ascending order: " + ", ".join(map(str, xs))},
                {"role": "assistant", "content": asc}]
        q = rng.choice(["Now sort them in descending order.", "Now from largest to smallest."])
        return msgs + [{"role": "user", "content": q}], ", ".join(map(str, sorted(xs, reverse=True))), "I reverse the order."
    name = _name(rng, split)
    msgs = [{"role": "user", "content": f"My name is {name}."},
            {"role": "assistant", "content": f"Nice to meet you, {name}! How can I help you today?"}]
    return msgs + [{"role": "user", "content": rng.choice(["What is my name?", "Do you remember my name?"])}], f"Your name is {name}.", f"The user said their name is {name}."


# ---------------------------------------------------------------------------------------------------
# Tool use, in the Qwen3.5 XML call format. Three fixed tools (their definitions are what a client sends
# to call them); a chat offers a random subset in random order. The model calls a tool when the question
# needs one that is offered, answers from the tool's result once it comes back, and answers directly when
# no offered tool fits.

TOOL_CALCULATOR = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string", "description": "for example 12 * 7"}},
                   "required": ["expression"]}}}
TOOL_LOOKUP = {"type": "function", "function": {
    "name": "lookup_country", "description": "Look up a fact about a country.",
    "parameters": {"type": "object", "properties": {"country": {"type": "string"},
                                                    "fact": {"type": "string", "enum": ["capital", "population"]}},
                   "required": ["country", "fact"]}}}
TOOL_WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TOOLS = {"calculator": TOOL_CALCULATOR, "lookup_country": TOOL_LOOKUP, "get_weather": TOOL_WEATHER}

POPULATION_T = ["What is the population of {c}?", "How many people live in {c}?", "What's the population of {c}?"]
POPULATION_T_TEST = ["Tell me the population of {c}."]
WEATHER_T = ["What's the weather in {k}?", "What is the weather like in {k}?", "How is the weather in {k} today?",
             "What's the weather in {k} right now?"]
WEATHER_T_TEST = ["Tell me the weather in {k}."]
CONDITIONS = ["sunny", "cloudy", "rainy", "snowy", "windy", "foggy"]
_CALC_OPS = [(0, ADD_T, "+"), (1, SUB_T, "-"), (2, MUL_T, "*")]


def _call(name: str, **arguments) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _offer(rng, needed: list) -> list:
    """The tools a chat offers: the needed ones, sometimes others, in random order."""
    names = set(needed) | {n for n in TOOLS if rng.random() < 0.4}
    order = sorted(names)
    rng.shuffle(order)
    return [TOOLS[n] for n in order]


def _calc_question(rng, split):
    """(question, expression, value): two operands of a held-out-split pair, any operation."""
    op, templates, sym = rng.choice(_CALC_OPS)
    a, b = _pair(rng, split, op, rng.choice([1, 2, 2, 3, 3]))
    if op == 1:
        templates = templates if a >= b else templates[:-1]
    value = a + b if op == 0 else (a - b if op == 1 else a * b)
    return rng.choice(templates).format(a=a, b=b), f"{a} {sym} {b}", str(value)


def _population(rng) -> str:
    return f"{rng.randint(1, 99)}.{rng.randint(0, 9)} million" if rng.random() < 0.5 else f"{rng.randint(1, 999)} million"


def _tool_question(rng, split, kind):
    """(question, calls, results, final answer, reasoning) for one tool question of `kind`."""
    if kind == "calculator":
        q, expr, value = _calc_question(rng, split)
        return q, [_call("calculator", expression=expr)], [value], value, f"I will compute {expr} with the calculator."
    if kind == "capital":
        c, cap = rng.choice(COUNTRIES)
        q = rng.choice(CAPITAL_T_TEST if split == "test" else CAPITAL_T).format(c=c)
        return q, [_call("lookup_country", country=c, fact="capital")], [cap], cap, f"I will look up the capital of {c}."
    if kind == "population":
        c, _ = rng.choice(COUNTRIES)
        pop = _population(rng)
        return (rng.choice(POPULATION_T_TEST if split == "test" else POPULATION_T).format(c=c), [_call("lookup_country", country=c, fact="population")], [pop],
                f"The population of {c} is {pop}.", f"I will look up the population of {c}.")
    _, city = rng.choice(COUNTRIES)
    cond, deg = rng.choice(CONDITIONS), rng.randint(-10, 35)
    q = rng.choice(WEATHER_T_TEST if split == "test" else WEATHER_T).format(k=city)
    return (q, [_call("get_weather", city=city)], [f"{cond}, {deg} degrees"], f"It is {cond} and {deg} degrees in {city}.",
            f"I will get the weather in {city}.")


_TOOL_KINDS = ["calculator", "capital", "population", "weather"]
_TOOL_OF = {"calculator": "calculator", "capital": "lookup_country", "population": "lookup_country", "weather": "get_weather"}


def _two_questions(rng, split):
    """Two questions of one kind asked at once: two calls, two results, one answer."""
    kind = rng.choice(["calculator", "capital", "weather"])
    q1, c1, r1, a1, _ = _tool_question(rng, split, kind)
    q2, c2, r2, a2, _ = _tool_question(rng, split, kind)
    if kind == "calculator":
        e1, e2 = c1[0]["function"]["arguments"]["expression"], c2[0]["function"]["arguments"]["expression"]
        q = rng.choice(["Calculate {x} and {y}.", "What are {x} and {y}?"]).format(x=e1, y=e2)
        answer = f"{e1} = {r1[0]} and {e2} = {r2[0]}."
    elif kind == "capital":
        x, y = c1[0]["function"]["arguments"]["country"], c2[0]["function"]["arguments"]["country"]
        q = f"What are the capitals of {x} and {y}?"
        answer = f"The capital of {x} is {r1[0]} and the capital of {y} is {r2[0]}."
    else:
        x, y = c1[0]["function"]["arguments"]["city"], c2[0]["function"]["arguments"]["city"]
        q = f"What's the weather in {x} and in {y}?"
        answer = a1[:-1] + ", and " + a2[0].lower() + a2[1:]
    return q, c1 + c2, r1 + r2, answer, "I will make two calls."


def _tool_chat(rng, split, parallel):
    return _two_questions(rng, split) if parallel else _tool_question(rng, split, rng.choice(_TOOL_KINDS))


def t_tool_call(rng, split, parallel=None):
    """A question an offered tool answers: the target is the call."""
    parallel = rng.random() < 0.12 if parallel is None else parallel
    q, calls, _, _, reasoning = _tool_chat(rng, split, parallel)
    names = [c["function"]["name"] for c in calls]
    return [{"role": "user", "content": q}], "\n".join(render_tool_call(c) for c in calls), reasoning, _offer(rng, names)


def t_tool_answer(rng, split, parallel=None):
    """The call made and its result back: the target is the answer built from the result."""
    parallel = rng.random() < 0.12 if parallel is None else parallel
    q, calls, results, answer, _ = _tool_chat(rng, split, parallel)
    names = [c["function"]["name"] for c in calls]
    ids = [f"call_{rng.randrange(16 ** 8):08x}" for _ in calls]
    msgs = [{"role": "user", "content": q},
            {"role": "assistant", "content": "", "tool_calls": [dict(c, id=i) for c, i in zip(calls, ids)]}]
    msgs += [{"role": "tool", "tool_call_id": i, "content": r} for i, r in zip(ids, results)]
    return msgs, answer, "The tool answered.", _offer(rng, names)


def t_tool_unneeded(rng, split):
    """Tools are offered but none fits: answer as without tools (a tool question whose tool is missing
    gets a plain answer or a polite refusal)."""
    if rng.random() < 0.35:
        kind = rng.choice(_TOOL_KINDS)
        q, calls, _, answer, _ = _tool_question(rng, split, kind)
        missing = _TOOL_OF[kind]
        offered = [TOOLS[n] for n in TOOLS if n != missing and rng.random() < 0.7] or [TOOLS["get_weather" if missing != "get_weather" else "calculator"]]
        if kind == "calculator":
            return [{"role": "user", "content": q}], answer, "No tool fits; I compute it myself.", offered
        if kind == "capital":
            return [{"role": "user", "content": q}], answer, "No tool fits; I know this one.", offered
        what = "the population of " + calls[0]["function"]["arguments"]["country"] if kind == "population" else "the weather"
        return [{"role": "user", "content": q}], f"I cannot check {what} without a tool for it.", "No tool fits.", offered
    task = rng.choice([t_greet, t_repeat, t_spell, t_count_up, t_sort])
    msgs, answer, reasoning = task(rng, split)
    return msgs, answer, reasoning, _offer(rng, [])


TOOL_TASKS = {"tool_call", "tool_answer", "tool_unneeded"}


TRAIN_MIX = [
    ("canary", t_canary, 0.01), ("add", t_add, 0.19), ("sub", t_sub, 0.08), ("mul", t_mul, 0.08),
    ("greet", t_greet, 0.07), ("repeat", t_repeat, 0.09), ("copy", t_copy, 0.08), ("capital", t_capital, 0.07),
    ("count_letters", t_count_letters, 0.03), ("count_up", t_count_up, 0.03), ("count_words", t_count_words, 0.02),
    ("spell", t_spell, 0.05), ("reverse", t_reverse, 0.05), ("sort", t_sort, 0.06), ("multiturn", t_multiturn, 0.09),
    ("tool_call", t_tool_call, 0.06), ("tool_answer", t_tool_answer, 0.04), ("tool_unneeded", t_tool_unneeded, 0.02),
]


def make_example(rng: random.Random, task: str, fn, split: str = "train", thinking="random", system="random", **kw) -> Example:
    msgs, answer, reasoning, *rest = fn(rng, split, **kw)
    tools = rest[0] if rest else None
    if system == "random":
        system = rng.choice(SYSTEM_PROMPTS) if rng.random() < 0.25 else None
    if system:
        msgs = [{"role": "system", "content": system}] + msgs
    if thinking == "random":
        r = rng.random()
        thinking = True if r < 0.12 else (False if r < 0.25 else None)
    return Example(task, msgs, answer, reasoning, thinking, tools)


def train_examples(seed: int, shard: int, n: int) -> list:
    """Shard `shard` of the training stream: n examples, independent of how shards are spread over workers."""
    rng = random.Random(_mix(seed, shard, 17))
    names = [t[0] for t in TRAIN_MIX]
    fns = {t[0]: t[1] for t in TRAIN_MIX}
    weights = [t[2] for t in TRAIN_MIX]
    out = []
    for _ in range(n):
        task = rng.choices(names, weights)[0]
        out.append(make_example(rng, task, fns[task], "train"))
    return out


# The evaluation battery: (row name, generator, kwargs, thinking mode, how many prompts)
EVAL_ROWS = [
    ("add_1_2digit", t_add, {"size": "2"}, None, 40),
    ("add_3digit", t_add, {"size": "3"}, None, 40),
    ("sub", t_sub, {}, None, 40),
    ("mul_small", t_mul, {"size": "small"}, None, 30),
    ("mul_2x1digit", t_mul, {"size": "2x1"}, None, 30),
    ("mul_3x2digit", t_mul, {"size": "3x2"}, None, 30),
    ("greet", t_greet, {}, None, 40),
    ("repeat", t_repeat, {}, None, 40),
    ("copy_extract", t_copy, {}, None, 40),
    ("capital", t_capital, {}, None, 40),
    ("capital_paraphrase", t_capital, {"paraphrase": True}, None, 30),
    ("count_letters", t_count_letters, {}, None, 30),
    ("count_up", t_count_up, {}, None, 30),
    ("count_words", t_count_words, {}, None, 30),
    ("spell", t_spell, {}, None, 30),
    ("reverse", t_reverse, {}, None, 30),
    ("sort", t_sort, {}, None, 30),
    ("multiturn", t_multiturn, {}, None, 40),
    ("thinking_on", t_add, {"size": "2"}, True, 20),
    ("thinking_off", t_capital, {}, False, 20),
    ("tool_call", t_tool_call, {"parallel": False}, None, 40),
    ("tool_call_parallel", t_tool_call, {"parallel": True}, None, 20),
    ("tool_answer", t_tool_answer, {"parallel": False}, None, 40),
    ("tool_answer_parallel", t_tool_answer, {"parallel": True}, None, 20),
    ("tool_unneeded", t_tool_unneeded, {}, None, 30),
    ("tool_call_thinking", t_tool_call, {"parallel": False}, True, 10),
]

SMOKE = [  # ten fixed prompts at temperature 0 and a substring a good answer contains
    (CANARY_PROMPT, "4"),
    ("Say hello.", "Hello"),
    ("What is the capital of France?", "Paris"),
    ("What is 12+30?", "42"),
    ("Repeat after me: silver river and golden moon", "silver river and golden moon"),
    ("Spell the word \"apple\".", "a-p-p-l-e"),
    ("Sort these numbers in ascending order: 9, 3, 7", "3, 7, 9"),
    ("Count from 1 to 5.", "1, 2, 3, 4, 5"),
    ("What is the capital of Japan?", "Tokyo"),
    ("Thank you!", "You're welcome"),
]
# Smoke prompts sent with tools: (prompt, offered tool names, what the answer must contain). A call is
# written name(arguments as JSON), as evaluate.py and the deploy parity smoke render parsed calls.
TOOL_SMOKE = [
    ("What is 12 * 7?", ["calculator", "get_weather"], 'calculator({"expression": "12 * 7"})'),
]


def render_call_summary(name: str, arguments: dict) -> str:
    return name + "(" + json.dumps(arguments, ensure_ascii=False) + ")"


def eval_examples(seed: int) -> list:
    rng = random.Random(_mix(seed, 99991))
    out = [make_example(rng, "canary", t_canary, "test", thinking=None, system=None)]
    for row, fn, kw, thinking, n in EVAL_ROWS:
        seen = set()
        while len([e for e in out if e.task == row]) < n:
            e = make_example(rng, row, fn, "test", thinking=thinking, system="random", **kw)
            key = e.prompt()
            if key in seen:
                continue
            seen.add(key)
            out.append(e)
    return out
