"""Phase multi-turn: history with system, assistant and user turns renders and generates."""
from server_harness import MODEL


def test_multi_turn_conversation(client):
    history = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}]
    first = client.chat.completions.create(model=MODEL, messages=history, temperature=0, max_tokens=6)
    history += [{"role": "assistant", "content": first.choices[0].message.content or "ok"},
                {"role": "user", "content": "And then?"}]
    second = client.chat.completions.create(model=MODEL, messages=history, temperature=0, max_tokens=6)
    assert second.usage.prompt_tokens > first.usage.prompt_tokens + 4


def test_history_changes_the_prompt(client):
    a = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "One"}], max_tokens=1)
    b = client.chat.completions.create(model=MODEL, temperature=0, max_tokens=1, messages=[
        {"role": "user", "content": "One"}, {"role": "assistant", "content": "Two"}, {"role": "user", "content": "One"}])
    assert b.usage.prompt_tokens > a.usage.prompt_tokens


def test_assistant_message_without_content_is_allowed(client):
    r = client.chat.completions.create(model=MODEL, temperature=0, max_tokens=2, messages=[
        {"role": "user", "content": "x"}, {"role": "assistant", "content": None}, {"role": "user", "content": "y"}])
    assert r.choices[0].finish_reason in ("stop", "length")
