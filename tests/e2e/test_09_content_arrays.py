"""Phase content arrays: text parts are the same as string content."""
from server_harness import MODEL


def test_text_parts_equal_string_content(client, tiny_vocab):
    parts = [{"type": "text", "text": "Tell me"}, {"type": "text", "text": "a joke"}]
    a = client.chat.completions.create(model=MODEL, temperature=0, max_tokens=8,
                                       messages=[{"role": "user", "content": parts}])
    b = client.chat.completions.create(model=MODEL, temperature=0, max_tokens=8,
                                       messages=[{"role": "user", "content": "Tell me\na joke"}])
    assert a.choices[0].message.content == b.choices[0].message.content
    assert a.usage.prompt_tokens == b.usage.prompt_tokens == \
        len(tiny_vocab.chat_prompt([{"role": "user", "content": "Tell me\na joke"}]))


def test_system_content_parts(client, tiny_vocab):
    as_string = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    r = client.chat.completions.create(model=MODEL, temperature=0, max_tokens=4, messages=[
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, {"role": "user", "content": "Hi"}])
    plain = client.chat.completions.create(model=MODEL, temperature=0, max_tokens=4, messages=as_string)
    assert r.usage.prompt_tokens == len(tiny_vocab.chat_prompt(as_string))
    assert r.choices[0].message.content == plain.choices[0].message.content
