"""Image requests against a live server with the official SDKs: a text-only model answers every
API's image part with a 400 that names the model and the part, the image flags parse, and a bad
flag value stops start-up with the flag named. (Image limits, URL policy and placeholder expansion
need a model with a vision tower to be reached end to end: tests/image/image_request_test.cc checks
them below HTTP.)"""
import base64
import io
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import server_harness as sh  # noqa: E402


def png_data_url() -> str:
    b = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(b, format="PNG")
    return "data:image/png;base64," + base64.b64encode(b.getvalue()).decode()


@pytest.fixture(scope="module")
def server(sanctum_bin, tmp_path_factory):
    model = sh.make_tiny_chat_model(tmp_path_factory.mktemp("image-e2e") / "tiny-chat")
    s = sh.Server(sanctum_bin, [f"tiny={model}"], tmp_path_factory.mktemp("image-logs") / "server.log",
                  extra=["--threads", "1", "--max-image-pixels", "1000000", "--max-images-per-request", "2", "--allow-image-urls"])
    yield s
    s.terminate()


def test_chat_image_on_a_text_model_is_a_400_naming_it(server):
    import openai

    client = openai.OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0)
    content = [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": png_data_url()}}]
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": content}], max_tokens=4, stream=stream)
        assert "model 'tiny' does not accept images" in e.value.body["message"]
        assert e.value.body["param"] == "messages[0].content[1]"


def test_responses_image_on_a_text_model_is_a_400_naming_it(server):
    import openai

    client = openai.OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="tiny", max_output_tokens=4, input=[
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}, {"type": "input_image", "image_url": png_data_url()}]}])
    assert "does not accept images" in e.value.body["message"] and e.value.body["param"] == "input[0].content[1]"


def test_messages_image_on_a_text_model_is_a_400_naming_it(server):
    import anthropic

    client = anthropic.Anthropic(base_url=server.base, api_key="unused", max_retries=0)
    data = png_data_url().split(",", 1)[1]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="tiny", max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}, {"type": "text", "text": "?"}]}])
    assert "does not accept images" in e.value.body["error"]["message"]


def test_malformed_image_parts_are_400s_before_the_model(server):
    code, _, out = sh.post_json(server.port, "/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,not base64!"}}]}]})
    assert code == 400 and out["error"]["param"] == "messages[0].content[0]" and "base64" in out["error"]["message"]


@pytest.mark.parametrize("flag", ["--max-image-pixels", "--max-images-per-request"])
def test_a_bad_image_flag_stops_start_up_naming_it(sanctum_bin, tmp_path, flag):
    done = subprocess.run([sanctum_bin, "serve", "--port", "0", flag, "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and flag in done.stderr
