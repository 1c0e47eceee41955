"""Phase multi-turn: history with system, assistant and user turns renders as the chat template
renders it (counted against reference.py's rendering) and generates."""
from server_harness import MODEL


def test_multi_turn_conversation(client, tiny_vocab):
    history = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}]
    first = client.chat.completions.create(model=MODEL, messages=history, temperature=0, max_tokens=6)
    assert first.usage.prompt_tokens == len(tiny_vocab.chat_prompt(history))
    history += [{"role": "assistant", "content": first.choices[0].message.content or "ok"},
                {"role": "user", "content": "And then?"}]
    second = client.chat.completions.create(model=MODEL, messages=history, temperature=0, max_tokens=6)
    assert second.usage.prompt_tokens == len(tiny_vocab.chat_prompt(history))


def test_history_changes_the_prompt(client, tiny_vocab):
    one = [{"role": "user", "content": "One"}]
    three = [{"role": "user", "content": "One"}, {"role": "assistant", "content": "Two"}, {"role": "user", "content": "One"}]
    a = client.chat.completions.create(model=MODEL, messages=one, temperature=0, max_tokens=1)
    b = client.chat.completions.create(model=MODEL, messages=three, temperature=0, max_tokens=1)
    assert a.usage.prompt_tokens == len(tiny_vocab.chat_prompt(one))
    assert b.usage.prompt_tokens == len(tiny_vocab.chat_prompt(three))
    assert b.usage.prompt_tokens > a.usage.prompt_tokens


def test_assistant_message_without_content_is_allowed(client, tiny_vocab):
    # No content renders as empty content (templates concatenate it).
    r = client.chat.completions.create(model=MODEL, temperature=0, max_tokens=2, messages=[
        {"role": "user", "content": "x"}, {"role": "assistant", "content": None}, {"role": "user", "content": "y"}])
    assert r.usage.prompt_tokens == len(tiny_vocab.chat_prompt([
        {"role": "user", "content": "x"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "y"}]))
