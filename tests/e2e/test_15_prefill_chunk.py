"""--prefill-chunk: the prompt tokens each forward takes. On the embedded default model (a GatedDeltaNet
hybrid) in the CPU's exact f32 mode, a prompt cut into forwards of 64 tokens gives the answer the
default pieces give, since no result there depends on where a prompt is cut at multiples of 64; a
bad value stops the server before it loads anything."""
import subprocess

from server_harness import ROOT

DEFAULT_MODEL = ROOT / "models" / "default" / "mlx-4bit"
WORDS = "amber basin cedar delta ember fjord garnet harbor island juniper kestrel lantern meadow".split()


def ask(server):
    from openai import OpenAI
    client = OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0, timeout=120)
    text = "Copy the following text exactly:\n" + ", ".join(
        " ".join(WORDS[(i * 5 + j) % len(WORDS)] for j in range(3)) for i in range(30))
    r = client.chat.completions.create(model="default", messages=[{"role": "user", "content": text}], temperature=0,
                                       max_tokens=24)
    return r.usage.prompt_tokens, r.choices[0].message.content


def test_prompts_in_forwards_of_64_tokens_answer_as_the_default(start_server):
    default = ask(start_server(models=[f"default={DEFAULT_MODEL}"]))
    pieces = ask(start_server("--prefill-chunk", "64", models=[f"default={DEFAULT_MODEL}"]))
    assert default[0] > 3 * 64, default  # the prompt spans several forwards of 64
    assert pieces == default


def test_a_bad_prefill_chunk_is_refused(sanctum_bin):
    for bad in ("0", "-64", "many"):
        r = subprocess.run([sanctum_bin, "serve", "--prefill-chunk", bad], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0, bad
        assert "--prefill-chunk" in r.stderr, r.stderr
