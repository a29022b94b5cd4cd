#!/usr/bin/env python3
"""gen_tokenizer_golden.py — golden token ids from the Hugging Face `tokenizers`
library for lilac's tokenizer tests (tests/unit/test_tokenizer.c).

Needs `pip install tokenizers` (tooling only; the committed test reads the
JSON this writes and needs no Python).  Run from the repository root:

    python3 tools/gen_tokenizer_golden.py

Writes
  tests/fixtures/tokenizer/golden_qwen3.json   real Qwen3 vocabulary (151K)
  tests/fixtures/tokenizer/golden_tiny.json    tests/fixtures/tiny tokenizer
  tests/fixtures/tokenizer/flags/              a variant of the tiny tokenizer:
      tokenizer.json        merges as "a b" strings, placed before the vocab,
                            extra added tokens with lstrip / rstrip /
                            single_word / normalized=true / special=false
      tokenizer_config.json one more added token that only the config lists
      golden.json           its golden ids

Each golden entry: {"text": str} or {"hex": bytes as hex} (invalid UTF-8; the
ids are HF's for the text Python's errors="replace" decoding makes, given as
"lossy"), "split_special": bool (HF encode_special_tokens), "ids", and
"decoded" (HF decode of the ids).
"""
import json
import os
import random

from tokenizers import AddedToken, Tokenizer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FIX = os.path.join(ROOT, "tests", "fixtures")

ADDED = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
         "</tool_call>", "<|vision_start|>", "<|image_pad|>", "<tool_response>", "<|fim_prefix|>"]

FIXED = [
    "", "a", " ", "  ", "\n", "\r\n", "\t", "Hello, world!", "hello world", "HELLO WORLD",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure it's fine, they've said we'll see what'd happen, you're right.",
    "I'M SURE IT'S FINE, THEY'VE SAID WE'LL SEE WHAT'D HAPPEN, YOU'RE RIGHT.",
    "iT'S wE'Ll tHeY'Ve 'S 'T 'RE 'VE 'M 'LL 'D 's 't 're 've 'm 'll 'd",
    "don't can't won't shouldn't y'all o'clock rock'n'roll '' ''' 'x 'ſ 'ſt 'K 'İx",
    "Numbers: 1234567890 and 3.14159, -42, 1e10, 0x1F, 1,000,000.00",
    "٠١٢٣٤٥٦٧٨٩ ০১২৩ ⅠⅡⅢ ½ ¼ ² ³ ① ⑳ 𝟘𝟙𝟚",
    "línea en español: ¿Qué tal? Niño, acción",
    "Ça va? Über naïve façade — coöperate résumé",
    "svenska: förfyllning och avkodning på enheten",
    "Русский текст: съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ελληνικά: Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "中文：我能吞下玻璃而不伤身体。生活的真谛是什么？人工智能",
    "日本語：私はガラスを食べられます。それは私を傷つけません。カタカナ ﾊﾝｶｸ",
    "한국어: 나는 유리를 먹을 수 있어요. 그래도 아프지 않아요",
    "ภาษาไทย: ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ สวัสดีครับ ผมชื่ออเล็กซ์ ปี ด",
    "العربية: أنا قادر على أكل الزجاج و هذا لا يؤلمني. مرحبا بالعالم",
    "עברית: אני יכול לאכול זכוכית וזה לא מזיק לי. שָׁלוֹם",
    "हिन्दी: मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती. नमस्ते",
    "தமிழ்: நான் கண்ணாடி சாப்பிடுவேன் ಕನ್ನಡ বাংলা ગુજરાતી",
    "Tiếng Việt: Tôi có thể ăn thủy tinh mà không hại gì.",
    "ქართული ენა Հայերեն ᏣᎳᎩ ትግርኛ ܣܘܪܝܝܐ ⴰⵎⴰⵣⵉⵖ",
    "emoji: 😊 🎉 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵🇫🇷 ❤️ 🤖💬 ☕",
    "e\u0301 a\u0300 A\u030a \u212b \u1100\u1161\u11a8 \ufb01 \u00c5 o\u0308\u0304 \u0958",
    "\u0301\u0301 lone marks \u0308x \u200d\u200c zwj",
    "mixed\u00a0nbsp\u3000ideographic\u2028line\u2029para\u0085nel\u000bvt\u000cff",
    "\x1c\x1d\x1e\x1f unit sep \x00 nul \x7f del \x01\x02",
    "spaces    between     words      and\t\ttabs\t \t end   ",
    "\n\n\nnewlines\n\n \n  \n\r\n\r\r\n\n\nend\n",
    "  leading spaces and trailing   ",
    "Hi  Hello\nHi   Hello\n\n \n  \n Hello\n<s>\nhi<s>there",
    "def f(x):\n    return x * 2\n\n\nprint(f(21))",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "°C", "days": [1, 2, 3]}}',
    "<html><body><p class=\"x\">Hello &amp; goodbye</p></body></html>",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%o''brien%';",
    "https://example.com/path?query=value&other=1#frag user@example.org",
    "$$\\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}$$ ∀x∈ℝ: x²≥0 ≠ ≤ ≥ ∞",
    "!!!??? ... --- *** ### @@@ ((( ))) [[[ ]]] {{{ }}} ~~~ ``` ''' \"\"\"",
    "a" * 300, "ab" * 200, " " * 500, "\n" * 100, "9" * 200, "!" * 150, "é" * 120, "中" * 130,
    "Supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>",
    "<|im_start|><|im_end|><|im_start|><think></think><tool_call></tool_call>",
    "text<|im_start|>text<|im_end|>text <|endoftext|> text",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n你好啊<|im_end|>\n",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
    "partial: <|im_start <|im_end| <think <|endoftext|| <<|im_start|>> <|<|im_end|>|>",
    "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>describe",
    "  <|im_start|>  spaced  <|im_end|>  ",
    "<tool_response>\n{\"temp\": 21}\n</tool_response>",
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
    "This is a test 😊\nI was born in 92000, and this is falsé.\n生活的真谛是\nHi  Hello\n"
    "The following string should be properly encoded: Hello.\nBut ird and ปี   ird   ด\nHey how are you doing",
]

POOLS = [
    "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  \t",
    "\n\r", ".,;:!?'\"-()[]{}<>/\\@#$%^&*_+=|~`", "'", "éèêëàâäôöûüçñßÅøæœ",
    "абвгдежзийклмнопрстуфхцчшщъыьэюя", "αβγδεζηθικλμνξοπρστυφχψω", "的一是不了人我在有他这中大来上国",
    "あいうえおかきくけこアイウエオ", "가나다라마바사아자차카타파하", "กขคงจฉชซฌญฎฏฐฑฒณดตถทธนบปผฝพฟภมยรลวศษสหฬอฮะัาำิีึืุู่้๊๋",
    "ابتثجحخدذرزسشصضطظعغفقكلمنهوي", "אבגדהוזחטיכלמנסעפצקרשת", "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह्ािीुूेैोौं",
    "\u0300\u0301\u0302\u0308\u0323\u0327\u094d\u0e31\u0e48", "😊🎉👍🏽‍❤️🇯🇵🤖☕", "\u00a0\u3000\u2028\u0085\u000b\u000c\u2009",
    "½²③ⅣⅫ٣৪", "\x00\x01\x1c\x1f\x7f", "<|>", "ſKİıﬁﬆ",
]


def random_texts(rng, n):
    out = []
    for _ in range(n):
        k = rng.randint(1, 60)
        s = []
        for _ in range(k):
            pool = rng.choice(POOLS)
            run = rng.randint(1, 6)
            s.append("".join(rng.choice(pool) for _ in range(run)))
        if rng.random() < 0.3:
            s.insert(rng.randint(0, len(s)), rng.choice(ADDED))
        out.append("".join(s))
    return out


INVALID = [
    b"\xff", b"\xfe\xff", b"abc\x80def", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf",
    b"\xed\xa0\x80", b"\xed\xbf\xbf x", b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xf5\x80", b"\xf8\x88\x80\x80\x80",
    b"\xe4\xb8", b"\xe4\xb8A", b"\xe4A\xb8", b"\xf0\x9f\x98", b"\xf0\x9f\x98 ok", b"\xf0\x9f", b"end\xe4",
    b"\xc3", b"\xc3\xc3\xa9", b"\x80\x80\x80", b"\xbf\xbe", b"Hello \xe4\xb8\xad\xe6\x96 world",
    b"<|im_start|>\xff<|im_end|>", b"<|im_\xffstart|>", b"e\xcc", b"e\xcc\x81\xcc", b"\xef\xbb\xbfBOM",
    b"\xe0\xa0", b"\xe1\x80\x41", b"\xf1\x80\x80", b"\xf3\xbf\xbf\xbf\xf4\x8f\xbf\xbf\xf4\x90",
    bytes(range(256)), bytes(range(255, -1, -1)),
]


def entry(tok, text, split_special=False, raw=None):
    tok.encode_special_tokens = split_special
    ids = tok.encode(text, add_special_tokens=False).ids
    tok.encode_special_tokens = False
    e = {}
    if raw is not None:
        e["hex"] = raw.hex()
        e["lossy"] = text
    else:
        e["text"] = text
    e["split_special"] = split_special
    e["ids"] = ids
    # HF runs added tokens through the ByteLevel decoder too, so an added token
    # with a character of the byte alphabet (e.g. "\u00c5ng") decodes to
    # other bytes than its content; lilac decodes added tokens to their content
    # (tokenizer.h), so such entries carry no "decoded".
    if all(tok.decode([i], skip_special_tokens=False) == (tok.id_to_token(i) or "") or
           tok.id_to_token(i) not in added_contents(tok) for i in set(ids)):
        e["decoded"] = tok.decode(ids, skip_special_tokens=False)
    return e


def added_contents(tok, cache={}):
    if id(tok) not in cache:
        cache[id(tok)] = {t.content for t in tok.get_added_tokens_decoder().values()}
    return cache[id(tok)]


def golden(tok, rng, n_random):
    out = []
    for t in FIXED + random_texts(rng, n_random):
        out.append(entry(tok, t))
    for t in FIXED:
        if "<" in t:
            out.append(entry(tok, t, split_special=True))
    for b in INVALID:
        out.append(entry(tok, b.decode("utf-8", errors="replace"), raw=b))
    return out


def write(path, obj):
    with open(path, "w", encoding="utf-8") as f:  # one entry per line
        f.write("[\n" + ",\n".join(json.dumps(e, ensure_ascii=False) for e in obj) + "\n]\n")
    print("wrote", os.path.relpath(path, ROOT))


def make_flags_tokenizer():
    """The tiny tokenizer with "a b" merges placed before the vocab and extra
    added tokens that exercise the added-token flags."""
    src = json.load(open(os.path.join(FIX, "tiny", "tokenizer.json"), encoding="utf-8"))
    model = src["model"]
    merges = [" ".join(m) if isinstance(m, list) else m for m in model["merges"]]
    new_model = {"type": "BPE", "merges": merges}
    for k, v in model.items():
        if k not in ("type", "merges"):
            new_model[k] = v
    src["model"] = new_model
    nid = max(t["id"] for t in src["added_tokens"]) + 1
    extra = [
        ("[LS]", dict(lstrip=True)), ("[RS]", dict(rstrip=True)), ("[LRS]", dict(lstrip=True, rstrip=True)),
        ("word", dict(single_word=True)), ("\u00c5ng", dict(normalized=True)), ("A\u030ax", dict()),
        ("<plain>", dict(special=False)), ("<|im", dict()),
    ]
    for content, flags in extra:
        t = {"id": nid, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
        t.update(flags)
        src["added_tokens"].append(t)
        nid += 1
    d = os.path.join(FIX, "tokenizer", "flags")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(src, f, ensure_ascii=False, indent=1)
    cfg = {"added_tokens_decoder": {str(nid): {"content": "<|cfg_only|>", "lstrip": False, "normalized": False,
                                               "rstrip": False, "single_word": False, "special": True}}}
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    tok.add_special_tokens([AddedToken("<|cfg_only|>", special=True, normalized=False)])
    assert tok.token_to_id("<|cfg_only|>") == nid
    texts = [
        "a [LS] b", "a   [LS]b", "[LS]", "  [LS]  ", "a [RS]   b", "a[RS]\n\nb", "x  [LRS]  y", "[LRS][LRS]  [LRS]",
        "word", "a word b", "words", "sword", "word_x", "word.", "(word)", "wordword", "é word ü", "1word",
        "\u00c5ng", "A\u030ang", "\u212bng", "xA\u030ax", "x\u00c5x", "<plain> text <plain>", "<|im_start|> <|im",
        "<|im_end|><|im", "<|cfg_only|> and <|cfg_only|><|im_start|>", "Hello [LS] world [RS] ! word",
    ]
    out = [entry(tok, t) for t in texts] + [entry(tok, t, split_special=True) for t in texts]
    write(os.path.join(d, "golden.json"), out)


def main():
    rng = random.Random(20260813)
    qwen3 = Tokenizer.from_file(os.path.join(FIX, "tokenizer", "qwen3", "tokenizer.json"))
    write(os.path.join(FIX, "tokenizer", "golden_qwen3.json"), golden(qwen3, rng, 400))
    tiny = Tokenizer.from_file(os.path.join(FIX, "tiny", "tokenizer.json"))
    write(os.path.join(FIX, "tokenizer", "golden_tiny.json"), golden(tiny, rng, 400))
    make_flags_tokenizer()


if __name__ == "__main__":
    main()
