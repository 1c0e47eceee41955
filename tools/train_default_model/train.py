#!/usr/bin/env python3
"""Trains the default model: a tiny Qwen3.5 hybrid (GatedDeltaNet + gated full attention) text model
on the synthetic chats of data.py, then saves it in Hugging Face format (bf16 safetensors,
config.json, generation_config.json) and scores it on the evaluation battery.

Runs where torch and transformers are installed (a CUDA GPU; the CPU works for a smoke run):
  train.py --tokenizer models/default/hf-bf16 --out OUT --seed 1234 --steps 0 --train-seconds 400
--steps 0 sizes the run to --train-seconds from the measured step time and prints the step count;
--steps N repeats a run exactly (same data order and schedule).
"""
import argparse
import json
import math
import os
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import data  # noqa: E402

SHARD = 4000
_tok = None


def _init_worker(tokenizer_file: str) -> None:
    global _tok
    from tokenizers import Tokenizer

    _tok = Tokenizer.from_file(tokenizer_file)


def _make_shard(args):
    """Shard of tokenized examples: (flat ids uint16, lengths, prompt lengths)."""
    seed, shard = args
    exs = data.train_examples(seed, shard, SHARD)
    prompts = _tok.encode_batch([e.prompt() for e in exs], add_special_tokens=False)
    targets = _tok.encode_batch([e.target() + "<|im_end|>" for e in exs], add_special_tokens=False)
    ids, lens, plens = [], [], []
    for p, t in zip(prompts, targets):
        ids.extend(p.ids)
        ids.extend(t.ids)
        lens.append(len(p.ids) + len(t.ids))
        plens.append(len(p.ids))
    return np.asarray(ids, np.uint16), np.asarray(lens, np.int32), np.asarray(plens, np.int32)


class Stream:
    """Training batches in a seeded order, built while worker processes still generate later shards.

    Shards come in order (imap); each window of shards is shuffled, cut into runs of 64 batches that are
    sorted by length (little padding), and those batches are shuffled. Later epochs revisit the stored
    windows in a seeded order. The sequence of batches depends only on the seed and the arguments."""

    def __init__(self, shard_iter, n_shards: int, batch: int, max_len: int, seed: int, window_shards: int = 8):
        self.it, self.n_shards, self.batch, self.max_len = shard_iter, n_shards, batch, max_len
        self.rng = np.random.default_rng(seed)
        self.window_shards = window_shards
        self.windows, self.queue = [], []
        self.epoch, self.pos, self.taken = 0, 0, 0

    def _load_window(self):
        shards = []
        while len(shards) < self.window_shards and self.taken < self.n_shards:
            shards.append(next(self.it))
            self.taken += 1
        ids = np.concatenate([s[0] for s in shards])
        lens = np.concatenate([s[1] for s in shards])
        plens = np.concatenate([s[2] for s in shards])
        offs = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=offs[1:])
        return ids, lens, plens, offs

    def _refill(self):
        if self.epoch == 0 and self.taken < self.n_shards:
            w = self._load_window()
            self.windows.append(w)
        else:
            if self.epoch == 0 or self.pos >= len(self.order):
                self.epoch += 1
                self.order, self.pos = self.rng.permutation(len(self.windows)), 0
            w = self.windows[self.order[self.pos]]
            self.pos += 1
        ids, lens, plens, offs = w
        keep = self.rng.permutation(np.nonzero(lens <= self.max_len)[0])
        run = self.batch * 64
        batches = []
        for s in range(0, len(keep) - self.batch + 1, run):
            r = keep[s:s + run]
            r = r[np.argsort(lens[r], kind="stable")]
            batches += [r[i:i + self.batch] for i in range(0, len(r) - self.batch + 1, self.batch)]
        self.rng.shuffle(batches)
        self.queue += [(w, b) for b in batches]

    def next(self):
        while not self.queue:
            self._refill()
        (ids, lens, plens, offs), idx = self.queue.pop(0)
        L = int(lens[idx].max())
        x = np.zeros((len(idx), L), np.int64)
        y = np.full((len(idx), L), -100, np.int64)
        for r, i in enumerate(idx):
            seq = ids[offs[i]:offs[i + 1]].astype(np.int64)
            x[r, :len(seq)] = seq
            y[r, plens[i]:len(seq)] = seq[plens[i]:]  # loss on the answer (and its end-of-turn token) only
        return x, y


def model_config(a):
    from transformers import Qwen3_5TextConfig

    interval = a.full_attention_interval
    layer_types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(a.layers)]
    return Qwen3_5TextConfig(
        vocab_size=a.vocab_size, hidden_size=a.hidden, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
        num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
        linear_num_key_heads=a.gdn_key_heads, linear_num_value_heads=a.gdn_value_heads,
        linear_key_head_dim=a.gdn_head_dim, linear_value_head_dim=a.gdn_head_dim, linear_conv_kernel_dim=4,
        max_position_embeddings=a.max_positions, rms_norm_eps=1e-6, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        layer_types=layer_types, hidden_act="silu", attention_bias=False,
        bos_token_id=None, eos_token_id=2, pad_token_id=0,
    )


def save_hf(model, out: Path, tokenizer_dir: Path, interval: int):
    import shutil

    import torch

    out.mkdir(parents=True, exist_ok=True)
    import copy

    copy.deepcopy(model).to(device="cpu", dtype=torch.bfloat16).save_pretrained(str(out))  # tied lm_head is not stored
    cfg = json.loads((out / "config.json").read_text())
    cfg["dtype"] = "bfloat16"
    cfg["full_attention_interval"] = interval  # mlx-lm derives the layer pattern from this key
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    gen = {"bos_token_id": None, "eos_token_id": [2, 0], "pad_token_id": 0, "do_sample": False,
           "max_new_tokens": 256}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if (tokenizer_dir / f).resolve() != (out / f).resolve():
            shutil.copy(tokenizer_dir / f, out / f)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=0, help="0: as many as fit in --train-seconds")
    ap.add_argument("--train-seconds", type=float, default=400)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--examples", type=int, default=4_000_000)
    ap.add_argument("--max-len", type=int, default=320)
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--checkpoint-seconds", type=float, default=120)
    ap.add_argument("--eval", default=str(HERE.parents[1] / "tests/data/default_model_eval.json"))
    ap.add_argument("--eval-seconds", type=float, default=90, help="stop evaluating after this long (0: skip)")
    # model shape
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--intermediate", type=int, default=320)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--full-attention-interval", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--gdn-key-heads", type=int, default=2)
    ap.add_argument("--gdn-value-heads", type=int, default=4)
    ap.add_argument("--gdn-head-dim", type=int, default=64)
    ap.add_argument("--max-positions", type=int, default=4096)
    a = ap.parse_args()

    t0 = time.time()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    log_f = open(out / "train_log.txt", "a")

    def log(msg):
        line = f"[{time.time() - t0:7.1f}s] {msg}"
        print(line, flush=True)
        log_f.write(line + "\n")
        log_f.flush()

    import torch
    from transformers import Qwen3_5ForCausalLM

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True  # the GatedDeltaNet reference path runs in fp32
    torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    tok_dir = Path(a.tokenizer)
    log(f"torch {torch.__version__} on {dev}; args {vars(a)}")

    n_shards = (a.examples + SHARD - 1) // SHARD
    pool = Pool(a.workers, initializer=_init_worker, initargs=(str(tok_dir / "tokenizer.json"),))
    stream = Stream(pool.imap(_make_shard, [(a.seed, s) for s in range(n_shards)], chunksize=1), n_shards,
                    a.batch, a.max_len, a.seed)
    log(f"data: {n_shards} shards of {SHARD} examples, generated by {a.workers} workers while training")

    cfg = model_config(a)
    model = Qwen3_5ForCausalLM(cfg).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params} parameters (embedding tied); layer_types {cfg.layer_types}")

    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.ndim >= 2 and "embed" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")
    total = a.steps if a.steps > 0 else None
    sizing_from, sizing_at = 100, 200  # steps timed to size the run (after start-up and the first windows)

    def lr_at(step):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        T = total or 10 ** 9
        p = min(1.0, (step - a.warmup) / max(1, T - a.warmup))
        return a.lr * (a.min_lr_ratio + (1 - a.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * p)))

    model.train()
    t_train = time.time()
    t_ckpt = time.time()
    t_size = None
    step, ema = 0, None
    while total is None or step < total:
        x, y = stream.next()
        x, y = torch.from_numpy(x).to(dev, non_blocking=True), torch.from_numpy(y).to(dev, non_blocking=True)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            loss = model(input_ids=x, labels=y).loss
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step == sizing_from:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t_size = time.time()
        if total is None and step == sizing_at:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            per = (time.time() - t_size) / (sizing_at - sizing_from)
            left = a.train_seconds - (time.time() - t_train)
            total = sizing_at + max(1, int(0.97 * left / per))
            log(f"step time {per * 1000:.1f} ms: training for {total} steps (repeat with --steps {total})")
        if step % 50 == 0 or step == total:
            lv = loss.item()
            ema = lv if ema is None else 0.9 * ema + 0.1 * lv
            log(f"step {step}/{total} loss {lv:.4f} ema {ema:.4f} gnorm {gn.item():.3f} lr {lr_at(step - 1):.2e} "
                f"epoch {stream.epoch} shards {stream.taken}/{n_shards}")
        if time.time() - t_ckpt > a.checkpoint_seconds:
            save_hf(model, out / "hf", tok_dir, a.full_attention_interval)
            t_ckpt = time.time()
            log(f"checkpoint at step {step}")
    log(f"trained {step} steps in {time.time() - t_train:.1f}s")
    pool.terminate()
    model.eval()
    save_hf(model, out / "hf", tok_dir, a.full_attention_interval)
    log(f"saved {out / 'hf'}")

    if a.eval_seconds > 0:
        import evaluate

        res = evaluate.run_transformers(str(out / "hf"), a.eval, device=str(dev), time_limit=a.eval_seconds)
        res["training"] = {"steps": step, "seed": a.seed, "parameters": n_params, "seconds": round(time.time() - t_train, 1)}
        (out / f"eval_transformers_{dev.type}.json").write_text(json.dumps(res, ensure_ascii=False, indent=1) + "\n")
        log("\n" + evaluate.table(res))
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
