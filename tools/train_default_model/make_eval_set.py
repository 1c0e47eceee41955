#!/usr/bin/env python3
"""Writes the evaluation battery (held-out prompts per task, expected answers, and the ten-prompt smoke
set) to tests/data/default_model_eval.json. The same file drives the model's evaluation table, the
canary and the parity-smoke checks.

Example: make_eval_set.py --seed 1234 --out tests/data/default_model_eval.json
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import data  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    cases = []
    counters = {}
    for e in data.eval_examples(a.seed):
        counters[e.task] = counters.get(e.task, 0) + 1
        cases.append({
            "id": f"{e.task}-{counters[e.task]:03d}",
            "task": e.task,
            "messages": e.messages,
            **({"tools": e.tools} if e.tools else {}),
            "enable_thinking": e.thinking,
            "prompt": e.prompt(),
            "expected": e.answer,
        })
    smoke = [{"id": f"smoke-{i + 1:02d}", "messages": [{"role": "user", "content": p}],
              "prompt": data.render_prompt([{"role": "user", "content": p}], True, None), "contains": s}
             for i, (p, s) in enumerate(data.SMOKE)]
    for p, names, s in data.TOOL_SMOKE:
        msgs, tools = [{"role": "user", "content": p}], [data.TOOLS[n] for n in names]
        smoke.append({"id": f"smoke-{len(smoke) + 1:02d}", "messages": msgs, "tools": tools,
                      "prompt": data.render_prompt(msgs, True, None, tools), "contains": s})
    doc = {
        "description": ("Evaluation battery of the default model (models/default). 'cases': held-out prompts per "
                        "task; score = exact match of the answer (for enable_thinking=true, the text after "
                        "'</think>', stripped) at temperature 0. 'smoke': fixed prompts whose answer must "
                        "contain 'contains' (canary: the first; with 'tools', the call written name(arguments JSON)). 'prompt' is the chat template's rendering with "
                        "add_generation_prompt=true."),
        "generator": f"tools/train_default_model/make_eval_set.py --seed {a.seed}",
        "max_new_tokens": 96,
        "stop": ["<|im_end|>", "<|endoftext|>"],
        "canary": {"messages": [{"role": "user", "content": data.CANARY_PROMPT}], "expected": "4"},
        "smoke": smoke,
        "cases": cases,
    }
    Path(a.out).write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {len(cases)} cases, {len(smoke)} smoke prompts to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
