"""llama.cpp through llama-cpp-python's low-level API: prefill, decode, batched decode, logits.

Measured the way `sanctum bench` measures itself: prefill of random ids into an empty context,
decode of a fixed list of random ids one forward at a time after a prompt (the logits row computed,
no sampler), each test after one warm-up. Batched decode feeds one token for each of several
sequences (distinct seq_ids) per llama_decode, the way llama.cpp's server batches its slots.
"""
from __future__ import annotations

import ctypes
import sys
import time

import numpy as np


_QUIET = None


def quiet_logs() -> None:
    """llama.cpp logs every tensor it loads; keep its errors only (they explain a failed load)."""
    global _QUIET
    import llama_cpp

    if _QUIET is None:
        @llama_cpp.llama_log_callback
        def _log(level, text, _user):
            if level == 4:  # GGML_LOG_LEVEL_ERROR
                sys.stderr.write(text.decode(errors="replace"))
        _QUIET = _log
        llama_cpp.llama_log_set(_QUIET, ctypes.c_void_p(0))


def random_tokens(n: int, vocab: int, seed: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, vocab, size=n).tolist()


class LlamaPeer:
    def __init__(self, gguf_path: str, threads: int, n_ctx: int, n_seq: int = 1, n_batch: int = 2048,
                 n_ubatch: int = 512, kv_type: str = "f16"):
        """kv_type: the KV cache's type, "f16" (llama.cpp's default) or "q8_0" (with flash attention,
        which llama.cpp needs for a quantized V)."""
        import llama_cpp

        self.ll = llama_cpp
        quiet_logs()
        llama_cpp.llama_backend_init()
        mp = llama_cpp.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = llama_cpp.llama_model_load_from_file(str(gguf_path).encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {gguf_path}; its log above says why")
        cp = llama_cpp.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_batch
        cp.n_ubatch = min(n_ubatch, n_batch)
        cp.n_seq_max = n_seq
        cp.n_threads = threads
        cp.n_threads_batch = threads
        cp.kv_unified = True  # every sequence may use the whole context
        cp.no_perf = True
        if kv_type != "f16":
            ggml_type = {"q8_0": llama_cpp.GGML_TYPE_Q8_0}[kv_type]
            cp.type_k = cp.type_v = ggml_type
            cp.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        self.ctx = llama_cpp.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError(f"llama.cpp could not create a context (n_ctx {n_ctx}, {n_seq} sequences)")
        self.vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model))
        self.n_batch = n_batch
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, n_seq)

    def close(self) -> None:
        self.ll.llama_batch_free(self.batch)
        self.ll.llama_free(self.ctx)
        self.ll.llama_model_free(self.model)

    def clear(self) -> None:
        self.ll.llama_memory_clear(self.ll.llama_get_memory(self.ctx), True)

    def _decode(self, rows: list[tuple[int, int, int, bool]]) -> None:
        """rows: (token, position, sequence, wants logits)."""
        b = self.batch
        b.n_tokens = len(rows)
        for i, (tok, pos, seq, out) in enumerate(rows):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = out
        rc = self.ll.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} for a batch of {len(rows)} tokens")

    def feed(self, tokens: list[int], seq: int = 0, start: int = 0, logits: str = "last") -> None:
        """Feeds tokens of one sequence in forwards of up to n_batch tokens."""
        for begin in range(0, len(tokens), self.n_batch):
            chunk = tokens[begin:begin + self.n_batch]
            last = begin + len(chunk) == len(tokens)
            rows = [(t, start + begin + i, seq, logits == "all" or (logits == "last" and last and i == len(chunk) - 1))
                    for i, t in enumerate(chunk)]
            self._decode(rows)
        self.ll.llama_synchronize(self.ctx)

    def logits_row(self, i: int) -> np.ndarray:
        ptr = self.ll.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(self.vocab,)).copy()

    def all_logits(self, tokens: list[int]) -> np.ndarray:
        """(n, vocab) logits of every position, from one prefill."""
        if len(tokens) > self.n_batch:
            raise ValueError(f"{len(tokens)} tokens: all-position logits take one batch of at most {self.n_batch}")
        self.clear()
        self.feed(tokens, logits="all")
        return np.stack([self.logits_row(i) for i in range(len(tokens))])

    def time_prefill(self, tokens: list[int]) -> float:
        self.clear()
        t0 = time.perf_counter()
        self.feed(tokens)
        return time.perf_counter() - t0

    def time_decode(self, context: list[int], tokens: list[int]) -> float:
        self.clear()
        if context:
            self.feed(context)
        t0 = time.perf_counter()
        for i, t in enumerate(tokens):
            self._decode([(t, len(context) + i, 0, True)])
            self.ll.llama_synchronize(self.ctx)
        return time.perf_counter() - t0

    def time_batched(self, prompts: list[list[int]], gen: int, seed: int = 11) -> dict:
        """Prefills each sequence's prompt (one after another, as requests arrive at a server), then
        decodes `gen` tokens for all of them, one token per sequence per llama_decode."""
        self.clear()
        n = len(prompts)
        steps = [random_tokens(gen, self.vocab, seed + s) for s in range(n)]
        t0 = time.perf_counter()
        for s, p in enumerate(prompts):
            self.feed(p, seq=s)
        t1 = time.perf_counter()
        for k in range(gen):
            self._decode([(steps[s][k], len(prompts[s]) + k, s, True) for s in range(n)])
            self.ll.llama_synchronize(self.ctx)
        t2 = time.perf_counter()
        return {"sequences": n, "gen": gen, "total_s": t2 - t0, "decode_s": t2 - t1,
                "aggregate_tok_s": n * gen / (t2 - t0), "decode_tok_s": n * gen / (t2 - t1)}
