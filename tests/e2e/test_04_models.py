"""Phase models: /v1/models through the SDK, one and several models."""
import json

import openai
import pytest

import server_harness as sh
from server_harness import MODEL


def test_list_models(client):
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert ids == [MODEL]
    assert models.data[0].object == "model" and models.data[0].owned_by == "sanctum"


def test_retrieve_model(client):
    m = client.models.retrieve(MODEL)
    assert m.id == MODEL and m.created > 0


def test_retrieve_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("no-such-model")
    assert e.value.body["code"] == "model_not_found"


def test_two_models_are_addressed_by_name(start_server, tiny_model):
    s = start_server(models=[f"alpha={tiny_model}", f"beta={tiny_model}"])
    status, _, raw = sh.request(s.port, "GET", "/v1/models")
    assert [m["id"] for m in json.loads(raw)["data"]] == ["alpha", "beta"]
    for name in ["alpha", "beta"]:
        status, _, body = sh.post_json(s.port, "/v1/chat/completions", sh.chat_body(name, max_tokens=3))
        assert status == 200 and body["model"] == name
    status, _, body = sh.post_json(s.port, "/v1/chat/completions", sh.chat_body("gamma"))
    assert status == 404 and body["error"]["param"] == "model"
