#!/usr/bin/env python3
"""Checks that data.render_prompt equals the shipped Jinja chat template (through transformers'
apply_chat_template) and that the train and test splits do not share prompts.

Example: check_data.py --tokenizer models/default/hf-bf16
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import data  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--n", type=int, default=3000)
    a = ap.parse_args()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    train = data.train_examples(a.seed, 0, a.n)
    test = data.eval_examples(a.seed)
    bad = 0
    for e in train + test:
        for msgs, gen in ((e.messages, True), (e.messages + [{"role": "assistant", "content": e.target() if e.thinking is not True else "<think>\n" + e.target()}], False)):
            kw = {} if e.thinking is None else {"enable_thinking": e.thinking}
            want = tok.apply_chat_template(msgs, tools=e.tools, tokenize=False, add_generation_prompt=gen, **kw)
            got = data.render_prompt(msgs, gen, e.thinking, e.tools)
            if want != got:
                bad += 1
                if bad < 4:
                    print("MISMATCH\n", repr(want), "\n", repr(got))
    print(f"template: {bad} mismatches over {2 * (len(train) + len(test))} renderings")

    train_prompts = set()
    for shard in range(20):
        for e in data.train_examples(a.seed, shard, 5000):
            train_prompts.add(e.prompt())
    leaked = [e for e in test if e.prompt() in train_prompts and e.task not in ("canary", "capital", "thinking_off")]
    print(f"split: {len(leaked)} of {len(test)} test prompts also drawn in 100k training examples")
    for e in leaked[:10]:
        print("  ", e.task, repr(e.messages[-1]["content"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
