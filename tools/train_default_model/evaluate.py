#!/usr/bin/env python3
"""Greedy evaluation of the default model on tests/data/default_model_eval.json, with transformers
(Hugging Face checkpoint), mlx-lm (MLX checkpoint) or sanctum (either; f32 matmuls unless told), the
agreement between two result files, and the reference outputs the engine's parity tests read.

  evaluate.py transformers --model models/default/hf-bf16 --out eval_hf.json [--device cpu]
  evaluate.py mlx --model models/default/mlx-4bit --out eval_mlx.json
  evaluate.py sanctum --model models/default/mlx-4bit --out eval_sanctum.json [--bin build/sanctum]
  evaluate.py compare eval_hf.json eval_mlx.json
  evaluate.py table eval_hf.json [--markdown]
  evaluate.py references eval_hf.json eval_mlx.json --out models/default/reference_outputs.jsonl
  evaluate.py parity-smoke     (deploy/parity-smoke.json from the smoke set and the reference outputs)

Prompts are the battery's rendered 'prompt' strings, tokenized without extra special tokens; decoding
is greedy and stops at <|im_end|> or <|endoftext|> (max_new_tokens from the battery). A case scores when
the answer equals 'expected' exactly (after '</think>' when thinking is on; surrounding whitespace
stripped). Smoke prompts pass when the answer contains their 'contains' string.
"""
import argparse
import json
import re
import sys
import time
from collections import OrderedDict
from pathlib import Path

HERE = Path(__file__).resolve().parent
STOP_IDS = (2, 0)  # <|im_end|>, <|endoftext|>


def _answer(text: str, thinking) -> str:
    if thinking is True or "</think>" in text:
        text = text.split("</think>")[-1]
    return text.strip()


_CALL = re.compile(r"<tool_call>\n<function=([^>\n]*)>\n(.*?)</function>\n</tool_call>", re.S)
_PARAM = re.compile(r"<parameter=([^>\n]*)>\n(.*?)\n</parameter>\n", re.S)


def calls_as_summary(text: str) -> str:
    """Each XML tool call written name({"param": "value"}) (string values, as the default model's tools
    take), the way the deploy parity smoke writes the calls the server parsed."""
    sys.path.insert(0, str(HERE))
    from data import render_call_summary

    return _CALL.sub(lambda m: render_call_summary(m.group(1), dict(_PARAM.findall(m.group(2)))), text)


def _items(battery):
    items = []
    for c in battery["cases"]:
        items.append({"id": c["id"], "task": c["task"], "prompt": c["prompt"], "thinking": c["enable_thinking"],
                      "expected": c["expected"]})
    for s in battery["smoke"]:
        items.append({"id": s["id"], "task": "smoke", "prompt": s["prompt"], "thinking": None, "contains": s["contains"],
                      "tools": bool(s.get("tools"))})
    return items


def _score(items, outputs, tokenizer, backend, extra):
    rows = []
    for it, ids in zip(items, outputs):
        if ids is None:
            continue
        text = tokenizer.decode(ids, skip_special_tokens=False)
        ans = _answer(text, it["thinking"])
        if it["task"] == "smoke":
            ok = it["contains"] in (calls_as_summary(ans) if it["tools"] else ans)
        else:
            ok = ans == it["expected"]
        rows.append({"id": it["id"], "task": it["task"], "ids": ids, "text": text, "ok": ok})
    summary = OrderedDict()
    for r in rows:
        s = summary.setdefault(r["task"], [0, 0])
        s[0] += int(r["ok"])
        s[1] += 1
    return {"backend": backend, **extra, "summary": {k: {"correct": v[0], "total": v[1]} for k, v in summary.items()},
            "results": rows}


def run_transformers(model_dir: str, battery_path: str, device: str = "cpu", time_limit: float = 0, dtype: str = "float32"):
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    battery = json.loads(Path(battery_path).read_text())
    items = _items(battery)
    tok = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).to(device).eval()
    max_new = battery["max_new_tokens"]
    prompts = [tok.encode(it["prompt"], add_special_tokens=False).ids for it in items]
    # Batches of prompts with the same length: no padding, so each row computes what it would alone.
    groups = OrderedDict()
    for i, p in enumerate(prompts):
        groups.setdefault(len(p), []).append(i)
    outputs = [None] * len(items)
    t0 = time.time()
    for L, idx in groups.items():
        if time_limit and time.time() - t0 > time_limit:
            break
        for s in range(0, len(idx), 64):
            part = idx[s:s + 64]
            x = torch.tensor([prompts[i] for i in part], device=device)
            with torch.no_grad():
                y = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=max_new,
                                   do_sample=False, eos_token_id=list(STOP_IDS), pad_token_id=0)
            for r, i in enumerate(part):
                gen = y[r, L:].tolist()
                cut = next((k for k, t in enumerate(gen) if t in STOP_IDS), len(gen))
                outputs[i] = gen[:cut]
    done = sum(o is not None for o in outputs)
    return _score(items, outputs, tok, "transformers",
                  {"device": device, "dtype": dtype, "evaluated": done, "of": len(items),
                   "seconds": round(time.time() - t0, 1)})


def run_mlx(model_dir: str, battery_path: str):
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.generate import generate_step
    from tokenizers import Tokenizer

    battery = json.loads(Path(battery_path).read_text())
    items = _items(battery)
    tok = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    model, _ = load(model_dir)
    max_new = battery["max_new_tokens"]
    outputs = []
    t0 = time.time()
    for it in items:
        prompt = mx.array(tok.encode(it["prompt"], add_special_tokens=False).ids)
        gen = []
        for token, _ in generate_step(prompt, model, max_tokens=max_new, sampler=lambda lp: mx.argmax(lp, axis=-1)):
            t = int(token)
            if t in STOP_IDS:
                break
            gen.append(t)
        outputs.append(gen)
    return _score(items, outputs, tok, "mlx-lm", {"device": "cpu", "evaluated": len(items), "of": len(items),
                                                  "seconds": round(time.time() - t0, 1)})


def run_sanctum(model_dir: str, battery_path: str, binary: str, precision: str = "f32", threads: int = 0):
    import subprocess
    import tempfile

    from tokenizers import Tokenizer

    battery = json.loads(Path(battery_path).read_text())
    items = _items(battery)
    tok = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "prompts.txt"
        f.write_text("".join(",".join(map(str, tok.encode(it["prompt"], add_special_tokens=False).ids)) + "\n"
                             for it in items))
        cmd = [binary, "generate", "--model", model_dir, "--prompts-file", str(f), "--max-tokens",
               str(battery["max_new_tokens"]), "--temperature", "0", "--matmul-precision", precision]
        if threads:
            cmd += ["--threads", str(threads)]
        t0 = time.time()
        lines = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split("\n")[:len(items)]
    outputs = []
    for line in lines:
        ids = [int(t) for t in line.split(",")] if line.strip() else []
        outputs.append(ids[:next((k for k, t in enumerate(ids) if t in STOP_IDS), len(ids))])
    return _score(items, outputs, tok, "sanctum", {"device": "cpu", "matmul_precision": precision, "evaluated": len(items),
                                                   "of": len(items), "seconds": round(time.time() - t0, 1)})


def references(hf, mlx, description: str, transformers_version: str, mlx_version: str) -> str:
    """reference_outputs.jsonl for tests/parity/test_default_model.py: a header line, then per prompt the
    greedy ids, text and score of the transformers run and of the mlx-lm run."""
    by_id = {r["id"]: r for r in mlx["results"]}
    lines = [json.dumps({"description": description, "transformers": transformers_version, "mlx_lm": mlx_version},
                        ensure_ascii=False)]
    for r in hf["results"]:
        m = by_id[r["id"]]
        lines.append(json.dumps({"id": r["id"], "transformers_ids": r["ids"], "transformers_text": r["text"],
                                 "transformers_ok": r["ok"], "mlx_ids": m["ids"], "mlx_text": m["text"],
                                 "mlx_ok": m["ok"]}, ensure_ascii=False))
    return "\n".join(lines) + "\n"


PARITY_SMOKE_DESCRIPTION = (
    "Nightly parity smoke for the embedded default model: fixed prompts asked at temperature 0; each answer must "
    "contain 'contains' (with 'tools', the answer is the text then each parsed call as name({arguments})). The "
    "prompts of the 'smoke' set of tests/data/default_model_eval.json that both reference runs in "
    "models/default/reference_outputs.jsonl answer right (tools/train_default_model/evaluate.py parity-smoke; "
    "tests/deploy checks it); replace with your own seat's known-good prompts when it serves another model.")


def parity_smoke(battery, reference_lines) -> dict:
    """deploy/parity-smoke.json: the battery's smoke prompts that the model is known to pass, so the
    nightly watcher's one tolerated miss is left for drift."""
    ok = {r["id"]: r["transformers_ok"] and r["mlx_ok"] for r in reference_lines}
    prompts = []
    for s in battery["smoke"]:
        if ok[s["id"]]:
            prompts.append({"id": s["id"], "messages": s["messages"], **({"tools": s["tools"]} if "tools" in s else {}),
                            "contains": s["contains"]})
    return {"description": PARITY_SMOKE_DESCRIPTION, "max_tokens": battery["max_new_tokens"], "prompts": prompts}


def table(res, markdown: bool = False) -> str:
    lines = []
    if markdown:
        lines += ["| task | correct | total | exact match |", "| --- | ---: | ---: | ---: |"]
    for task, s in res["summary"].items():
        pct = 100.0 * s["correct"] / max(1, s["total"])
        lines.append(f"| {task} | {s['correct']} | {s['total']} | {pct:.1f}% |" if markdown
                     else f"{task:20s} {s['correct']:4d}/{s['total']:<4d} {pct:6.1f}%")
    cases = [(k, v) for k, v in res["summary"].items() if k != "smoke"]
    c = sum(v["correct"] for _, v in cases)
    t = sum(v["total"] for _, v in cases)
    lines.append(f"| all held-out cases | {c} | {t} | {100.0 * c / max(1, t):.1f}% |" if markdown
                 else f"{'all held-out cases':20s} {c:4d}/{t:<4d} {100.0 * c / max(1, t):6.1f}%")
    return "\n".join(lines)


def compare(a, b) -> str:
    ra = {r["id"]: r for r in a["results"]}
    rb = {r["id"]: r for r in b["results"]}
    common = [k for k in ra if k in rb]
    same_ids = [k for k in common if ra[k]["ids"] == rb[k]["ids"]]
    same_text = [k for k in common if _answer(ra[k]["text"], None) == _answer(rb[k]["text"], None)]
    same_score = [k for k in common if ra[k]["ok"] == rb[k]["ok"]]
    lines = [f"{a['backend']} ({a.get('device')}) vs {b['backend']} ({b.get('device')}): {len(common)} prompts",
             f"  identical greedy token ids: {len(same_ids)}/{len(common)}",
             f"  identical answers:          {len(same_text)}/{len(common)}",
             f"  same pass/fail:             {len(same_score)}/{len(common)}"]
    diff = [k for k in common if ra[k]["ids"] != rb[k]["ids"]]
    for k in diff[:8]:
        lines.append(f"  {k}: {ra[k]['text']!r} vs {rb[k]['text']!r}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    battery = str(HERE.parents[1] / "tests/data/default_model_eval.json")
    p = sub.add_parser("transformers")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--battery", default=battery)
    p = sub.add_parser("mlx")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--battery", default=battery)
    p = sub.add_parser("sanctum")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--bin", default=str(HERE.parents[1] / "build/sanctum"))
    p.add_argument("--matmul-precision", default="f32")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--battery", default=battery)
    p = sub.add_parser("references")
    p.add_argument("transformers_file")
    p.add_argument("mlx_file")
    p.add_argument("--out", required=True)
    p.add_argument("--description", required=True, help="how the two runs were made (the file's header)")
    p.add_argument("--transformers-version", required=True)
    p.add_argument("--mlx-version", required=True)
    p = sub.add_parser("parity-smoke")
    p.add_argument("--references", default=str(HERE.parents[1] / "models/default/reference_outputs.jsonl"))
    p.add_argument("--out", default=str(HERE.parents[1] / "deploy/parity-smoke.json"))
    p.add_argument("--battery", default=battery)
    p = sub.add_parser("compare")
    p.add_argument("a")
    p.add_argument("b")
    p = sub.add_parser("table")
    p.add_argument("file")
    p.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    if a.cmd in ("transformers", "mlx", "sanctum"):
        if a.cmd == "transformers":
            res = run_transformers(a.model, a.battery, a.device, dtype=a.dtype)
        elif a.cmd == "mlx":
            res = run_mlx(a.model, a.battery)
        else:
            res = run_sanctum(a.model, a.battery, a.bin, a.matmul_precision, a.threads)
        Path(a.out).write_text(json.dumps(res, ensure_ascii=False, indent=1) + "\n")
        print(table(res))
    elif a.cmd == "references":
        hf, mlx = (json.loads(Path(f).read_text()) for f in (a.transformers_file, a.mlx_file))
        Path(a.out).write_text(references(hf, mlx, a.description, a.transformers_version, a.mlx_version))
    elif a.cmd == "parity-smoke":
        refs = [json.loads(line) for line in Path(a.references).read_text().splitlines()[1:]]
        doc = parity_smoke(json.loads(Path(a.battery).read_text()), refs)
        Path(a.out).write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
        print(f"wrote {a.out}: {len(doc['prompts'])} prompts")
    elif a.cmd == "compare":
        print(compare(json.loads(Path(a.a).read_text()), json.loads(Path(a.b).read_text())))
    else:
        print(table(json.loads(Path(a.file).read_text()), a.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
