"""Deterministic text corpus for tokenizer parity: prose, code, whitespace runs, numbers, contractions,
CJK, emoji/ZWJ, combining marks, RTL, a 100 kB single word, special-token strings, random Unicode."""
import random

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse...",
    "  Leading spaces, trailing spaces.   ",
    "Mr. O'Neil's dog—who'd've thought?—barked at 3:45 a.m. on 2024-05-17.",
    "HELLO World hElLo WORLD",
    "e.g. i.e. etc. vs. U.S.A. Ph.D.",
]
CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "int main(int argc, char** argv) {\n\tprintf(\"%d\\n\", argc);\n\treturn 0;\n}\n",
    "for (let i = 0; i < 10; i++) { console.log(`value: ${i}`); }",
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name DESC;",
    "<html><body><div class=\"a\">x &amp; y</div></body></html>",
    "fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![1, 2, 3]; Ok(()) }",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
    "    if x:\n        pass\n\n\n    else:\n\t\tpass\r\n",
]
WHITESPACE = [" ", "  ", "   a", "a   ", "\t", "\t\t\tx", "\n", "\n\n", "\n\n\n\n", "\r\n", "\r\n\r\n", " \n \n ",
              "a\n\nb", "a \n b", "    ", " " * 33, "\t \t \n", "x" + " " * 17 + "y", "\u00a0nbsp\u00a0", "\u3000ideographic",
              "\u2003em\u2002en", "\u0085nel", "\u2028ls\u2029ps", "\x0bvt\x0cff"]
NUMBERS = ["0", "12", "123", "1234", "12345", "123456789012345678901234567890", "3.14159", "1,000,000", "-42",
           "1e-10", "0x1F", "v1.2.3", "2024年5月17日", "٣٤٥", "१२३", "½ ¾ ⅞", "①②③", "x²+y²"]
CONTRACTIONS = ["I'm", "you're", "he's", "we've", "they'll", "I'd", "don't", "can't", "won't", "It'S", "I'M",
                "Y'ALL'D'VE", "rock 'n' roll", "'tis", "’s curly", "o'clock"]
CJK = ["你好，世界！", "日本語のテキストです。", "한국어 문장입니다.", "中文English混合text", "漢字かなカナ",
       "我爱北京天安门", "東京タワー123", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇺🇸🇯🇵", "Hello 👋 world 🌍!", "🤖🤖🤖", "1️⃣", "🧑🏿‍💻"]
COMBINING = ["e\u0301", "cafe\u0301", "n\u0303", "a\u0308\u0304", "Å", "A\u030a", "\u1e9b\u0323", "ﬁ ligature",
             "Ω Ω", "ｶﾀｶﾅ", "z\u0335\u0321\u0334a\u0337lgo"]
RTL = ["مرحبا بالعالم", "שלום עולם", "English עברית mixed", "العربية 123", "\u202eRLO override\u202c", "فارسی‌ zwnj"]


def special_strings(specials):
    out = []
    for s in specials[:12]:
        out += [s, f"a{s}b", f" {s} ", f"{s}{s}", f"text {s}\n", s[:-1], f"x{s[:len(s)//2]}"]
    if len(specials) >= 2:
        out.append("".join(specials[:6]))
        out.append(f"<|im_start|>user\nhi{specials[1]}<|im_end|>")
    return out


def random_unicode(rng, n):
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x23FF), (0x3040, 0x30FF),
              (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF), (0x10000, 0x1007F),
              (0x20000, 0x2A6DF), (0xE000, 0xE0FF), (0x0, 0x1F), (0x300, 0x36F)]
    out = []
    for _ in range(n):
        length = rng.randint(1, 40)
        chars = []
        for _ in range(length):
            lo, hi = rng.choice(ranges)
            c = rng.randint(lo, hi)
            if 0xD800 <= c <= 0xDFFF:
                c = 0x41
            chars.append(chr(c))
        out.append("".join(chars))
    return out


def random_mix(rng, pools, n):
    out = []
    for _ in range(n):
        parts = [rng.choice(rng.choice(pools)) for _ in range(rng.randint(2, 6))]
        sep = rng.choice(["", " ", "\n", "  ", "\t"])
        out.append(sep.join(parts))
    return out


def build(specials, seed=1234, n_random=600, n_mix=400, with_big_word=True):
    rng = random.Random(seed)
    pools = [PROSE, CODE, WHITESPACE, NUMBERS, CONTRACTIONS, CJK, EMOJI, COMBINING, RTL]
    cases = []
    for p in pools:
        cases += p
    cases += special_strings(specials)
    cases += random_unicode(rng, n_random)
    cases += random_mix(rng, pools + ([special_strings(specials)] if specials else []), n_mix)
    cases.append("")
    if with_big_word:
        cases.append("a" * 100_000)
        cases.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(100_000)))
        cases.append("密" * 34_000)
    return cases
