"""Images through a live server end to end: a tiny random Qwen3.5 vision-language checkpoint (mlx-vlm,
with the real Qwen3 tokenizer, the Qwen3.5 chat template and a preprocessor config sized for its tiny
tower) answers an image chat through the official openai SDK, streamed and whole, with the tokens that
mlx-vlm generates greedily from transformers' PIL processor output and transformers' rendering of the
same conversation; Responses and Messages carry the same image to the same answer; the prompt cache
serves a later turn about the same image (and only the same image) with the same answer as mlx-vlm's;
a corrupt image is a 400."""
import base64
import copy
import gzip
import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import vl_models as vl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import server_harness as sh  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODEL = "tiny-vl"
STEPS = 6
PROCESSOR = {"size": {"shortest_edge": 64, "longest_edge": 4096}, "patch_size": 4, "temporal_patch_size": 2, "merge_size": 2,
             "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
             "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast"}


@pytest.fixture(scope="module")
def vl_model(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("vl-server") / "model"
    config = vl.vl_config("qwen3_5")
    config["text_config"]["vocab_size"] = config["vocab_size"] = sh.VOCAB
    # The Qwen3 tokenizer's vision tokens.
    config.update({"image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652, "vision_end_token_id": 151653})
    vl.save_checkpoint(vl.make_model(copy.deepcopy(config), seed=5), config, out)
    with gzip.open(sh.TOKENIZER_DIR / "tokenizer.json.gz", "rb") as src, open(out / "tokenizer.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(sh.TOKENIZER_DIR / "tokenizer_config.json", out / "tokenizer_config.json")
    shutil.copy(ROOT / "tests" / "data" / "chat_templates" / "Qwen3.5-4B.jinja", out / "chat_template.jinja")
    (out / "preprocessor_config.json").write_text(json.dumps(PROCESSOR))
    return out


@pytest.fixture(scope="module")
def server(sanctum_bin, vl_model, tmp_path_factory):
    s = sh.Server(sanctum_bin, [f"{MODEL}={vl_model}"], tmp_path_factory.mktemp("vl-logs") / "server.log", extra=["--threads", "2"])
    yield s
    s.terminate()


def picture() -> Image.Image:
    rng = np.random.default_rng(3)
    return Image.fromarray(rng.integers(0, 256, size=(20, 28, 3), dtype=np.uint8))


def png_b64(img: Image.Image) -> str:
    b = io.BytesIO()
    img.save(b, format="PNG")
    return base64.b64encode(b.getvalue()).decode()


def reference(vl_model, messages, images) -> dict:
    """mlx-vlm's greedy answer to `messages` (transformers' template; {"type": "image"} parts, in order
    `images`), from transformers' processor output."""
    from transformers import AutoTokenizer
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    proc = Qwen2VLImageProcessorPil(**{k: v for k, v in PROCESSOR.items() if k not in ("processor_class", "image_processor_type")})
    out = proc(images=images, return_tensors="np")
    pixels, grids = np.asarray(out["pixel_values"], dtype=np.float32), [list(map(int, g)) for g in out["image_grid_thw"]]
    tok = AutoTokenizer.from_pretrained(str(vl_model))
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, enable_thinking=False)
    ids, runs = [], iter(grids)
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    for t in tok.encode(text, add_special_tokens=False):
        if t == pad:
            g = next(runs)
            ids += [pad] * (g[0] * g[1] * g[2] // 4)
        else:
            ids.append(t)
    tokens = vl.reference_greedy(vl.load(vl_model), ids, pixels, grids, STEPS)
    return {"prompt_tokens": len(ids), "text": tok.decode(tokens, skip_special_tokens=True)}


@pytest.fixture(scope="module")
def expected(vl_model):
    """mlx-vlm's greedy answer to [image, "What is this?"]."""
    return reference(vl_model, [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is this?"}]}], [picture()])


def chat_content(b64: str):
    return [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64}}, {"type": "text", "text": "What is this?"}]


def test_an_image_chat_answers_as_mlx_vlm_does(server, expected):
    import openai

    client = openai.OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0, timeout=120)
    kw = dict(model=MODEL, messages=[{"role": "user", "content": chat_content(png_b64(picture()))}], max_tokens=STEPS, temperature=0,
              extra_body={"ignore_eos": True, "chat_template_kwargs": {"enable_thinking": False}})
    r = client.chat.completions.create(**kw)
    assert r.usage.prompt_tokens == expected["prompt_tokens"]
    assert r.choices[0].message.content == expected["text"]
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**kw, stream=True) if c.choices)
    assert streamed == expected["text"]


def test_responses_and_messages_carry_the_image_to_the_same_answer(server, expected):
    import anthropic
    import openai

    b64 = png_b64(picture())
    client = openai.OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0, timeout=120)
    r = client.responses.create(model=MODEL, max_output_tokens=STEPS, temperature=0, reasoning={"effort": "none"},
                                input=[{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64," + b64},
                                                                    {"type": "input_text", "text": "What is this?"}]}])
    assert r.usage.input_tokens == expected["prompt_tokens"]
    assert r.output_text and expected["text"].startswith(r.output_text)  # the same tokens, up to an end the model may choose
    claude = anthropic.Anthropic(base_url=server.base, api_key="unused", max_retries=0, timeout=120)
    m = claude.messages.create(model=MODEL, max_tokens=STEPS, extra_body={"temperature": 0}, thinking={"type": "disabled"},
                               messages=[{"role": "user", "content": [
                                   {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}},
                                   {"type": "text", "text": "What is this?"}]}])
    assert m.usage.input_tokens == expected["prompt_tokens"]
    text = "".join(b.text for b in m.content if b.type == "text")
    assert text and expected["text"].startswith(text)


def large_picture(seed: int) -> Image.Image:
    """80 x 80 pixels: 100 placeholder tokens, so that the prompt cache's 64-token snapshots fall inside
    the image and after it."""
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, size=(80, 80, 3), dtype=np.uint8))


def cached_tokens(server) -> float:
    _, _, body = sh.request(server.port, "GET", "/metrics")
    return sh.metric_value(body.decode(), "sanctum_mlx_prompt_cache_tokens_total")


def test_a_later_turn_about_the_same_image_reuses_its_prefix_and_answers_as_mlx_vlm(server, vl_model):
    """Turn two of a chat about one image continues from the snapshot the first turn left (inside the
    image: its placeholders are keyed by the image's content); a new chat with another image of the same
    size, whose placeholder ids are the same, gets nothing past the image's start and its own answer."""
    import openai

    client = openai.OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0, timeout=120)
    first, other = large_picture(11), large_picture(12)
    kw = dict(model=MODEL, max_tokens=STEPS, temperature=0, extra_body={"ignore_eos": True, "chat_template_kwargs": {"enable_thinking": False}})
    question = {"type": "text", "text": "What is this?"}

    def ask(img, history=()):
        content = [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + png_b64(img)}}, question]
        return client.chat.completions.create(messages=[{"role": "user", "content": content}, *history], **kw)

    before = cached_tokens(server)
    r1 = ask(first)
    turn1 = [{"role": "user", "content": [{"type": "image"}, question]}]
    assert r1.choices[0].message.content == reference(vl_model, turn1, [first])["text"]
    follow = [{"role": "assistant", "content": r1.choices[0].message.content}, {"role": "user", "content": "And the colours?"}]
    r2 = ask(first, follow)
    want2 = reference(vl_model, turn1 + follow, [first])
    assert r2.usage.prompt_tokens == want2["prompt_tokens"]
    assert r2.choices[0].message.content == want2["text"]
    reused = cached_tokens(server) - before
    assert reused >= 64, f"turn two reused {reused} prompt tokens"
    r3 = ask(other)
    assert r3.choices[0].message.content == reference(vl_model, turn1, [other])["text"]
    assert cached_tokens(server) - before - reused < 20, "the other image's placeholders were served from the first image's prefix"


def test_a_corrupt_image_is_a_400(server):
    import openai

    client = openai.OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0)
    broken = base64.b64encode(base64.b64decode(png_b64(picture()))[:40]).decode()
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": chat_content(broken)}], max_tokens=2)
    assert e.value.body["param"] == "messages[0].content[0]"
