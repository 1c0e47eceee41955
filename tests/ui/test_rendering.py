"""Model text on the page is text: a stored conversation whose assistant turn holds <script> and
<img onerror> shows them as characters and runs neither; the Markdown renderer, imported in the
browser, escapes first and adds only its own markup; tool calls show as cards."""
from __future__ import annotations

import json

HOSTILE = ('Before <script>window.pwned = "script"</script> and <img src="x" onerror="window.pwned = \'img\'"> '
           'and [click](javascript:window.pwned=1) after.\n\n```html\n<script>alert(1)</script>\n```')


def store_conversation(page, messages: list[dict]) -> None:
    conversation = {"id": "cstored", "title": "Stored", "created": 1, "updated": 2, "messages": messages}
    page.js("localStorage.setItem('sanctum.conversations', arguments[0]); localStorage.setItem('sanctum.current', 'cstored');",
            json.dumps([conversation]))
    page.reload()


def test_script_and_img_onerror_in_model_output_render_as_text(page):
    page.open()
    store_conversation(page, [{"role": "user", "content": "<b>not bold</b> <img src=x onerror=alert(1)>"},
                              {"role": "assistant", "content": HOSTILE, "reasoning": "<img src=y onerror=\"window.pwned='r'\">"}])
    answer = page.wait(lambda _: page.find_all("article.message.assistant"))[0]
    content = answer.find_element("css selector", ".content")
    assert '<script>window.pwned = "script"</script>' in content.text
    assert "<img src=\"x\" onerror=" in content.text
    assert "<script>alert(1)</script>" in content.find_element("css selector", "pre code").text
    user = page.find("article.message.user .content")
    assert user.text == "<b>not bold</b> <img src=x onerror=alert(1)>"
    # Nothing the text spelled became an element or a link.
    assert page.find_all("#messages script, #messages img, #messages b") == []
    assert page.find_all("#messages a") == []
    answer.find_element("css selector", "details.reasoning summary").click()
    assert "<img src=y" in answer.find_element("css selector", ".reasoning-body").text
    assert page.js("return window.pwned === undefined")
    page.screenshot("hostile-text")


def test_renderer_escapes_first_and_adds_only_its_own_markup(page):
    page.open()
    cases = page.driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/ui/markdown.js').then(({ render_markdown }) => done({
          script: render_markdown('<script>alert(1)</script>'),
          attr: render_markdown('[x](https://a.example/" onmouseover="alert(1))'),
          js_link: render_markdown('[x](javascript:alert(1)) [y](data:text/html,hi)'),
          link: render_markdown('see [docs](https://example.org/a?b=1&c=2)'),
          emphasis: render_markdown('**bold** and *it* and `<i>code</i>` and snake_case_name'),
          fence: render_markdown('```py\\nx = "<tag>"\\n```'),
          open_fence: render_markdown('text\\n```\\nstill streaming <b>'),
          lists: render_markdown('- a\\n- b\\n\\n1. one\\n2. two'),
          paragraphs: render_markdown('one\\ntwo\\n\\nthree'),
          heading: render_markdown('# Title <x>'),
        })).catch((e) => done({ error: String(e) }));
    """)
    assert "error" not in cases, cases
    assert cases["script"] == "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"
    assert "onmouseover=\"" not in cases["attr"] and "&quot; onmouseover=&quot;" in cases["attr"]
    assert "<a " not in cases["js_link"] and "[x](javascript:alert(1))" in cases["js_link"]
    assert cases["link"] == ('<p>see <a href="https://example.org/a?b=1&amp;c=2" target="_blank" '
                             'rel="noopener noreferrer">docs</a></p>')
    assert cases["emphasis"] == ("<p><strong>bold</strong> and <em>it</em> and <code>&lt;i&gt;code&lt;/i&gt;</code> "
                                 "and snake_case_name</p>")
    assert '<span class="code-lang">py</span>' in cases["fence"] and 'class="copy-code"' in cases["fence"]
    assert "<pre><code>x = &quot;&lt;tag&gt;&quot;</code></pre>" in cases["fence"]
    assert cases["open_fence"].startswith("<p>text</p>") and "<code>still streaming &lt;b&gt;</code>" in cases["open_fence"]
    assert cases["lists"] == "<ul><li>a</li><li>b</li></ul><ol><li>one</li><li>two</li></ol>"
    assert cases["paragraphs"] == "<p>one<br>two</p><p>three</p>"
    assert cases["heading"] == "<h3>Title &lt;x&gt;</h3>"


def test_code_blocks_have_a_working_copy_button(page):
    page.open()
    page.driver.execute_cdp_cmd("Browser.grantPermissions", {"origin": page.base, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    store_conversation(page, [{"role": "user", "content": "code"},
                              {"role": "assistant", "content": "```sh\nsanctum serve --port 8080\n```"}])
    button = page.wait(lambda _: page.find_all(".copy-code"))[0]
    button.click()
    page.wait(lambda _: button.text == "Copied", timeout=5)
    copied = page.driver.execute_async_script("navigator.clipboard.readText().then(arguments[arguments.length - 1])")
    assert copied == "sanctum serve --port 8080"


def test_tool_calls_show_as_cards(page):
    page.open()
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo", "unit": "C"}'}}
    store_conversation(page, [{"role": "user", "content": "Weather in Oslo?"},
                              {"role": "assistant", "content": "", "tool_calls": [call]}])
    card = page.wait(lambda _: page.find_all(".tool-card"))[0]
    assert card.find_element("css selector", ".tool-name").text == "get_weather"
    assert card.find_element("css selector", ".tool-id").text == "call_1"
    assert json.loads(card.find_element("css selector", ".tool-args").text) == {"city": "Oslo", "unit": "C"}
    page.screenshot("tool-call")


def test_streamed_deltas_fold_into_text_reasoning_tool_cards_and_speed(page):
    """OpenAI's delta format, fed through the page's own Reply with a fake clock: the tool call's
    pieces join into one call per index, and the figures come from the stream's usage."""
    page.open()
    result = page.driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        Promise.all([import('/ui/reply.js'), import('/ui/messages.js')]).then(([{ Reply }, { create_message }]) => {
          let t = 1000;
          const message = { role: 'assistant', content: '', streaming: true };
          const reply = new Reply(message, () => t);
          const chunk = (delta, extra = {}) => ({ choices: [{ index: 0, delta, finish_reason: null }], ...extra });
          t = 1250; reply.add(chunk({ role: 'assistant', reasoning_content: 'Look it ' }));
          t = 1300; reply.add(chunk({ reasoning_content: 'up.' }));
          reply.add(chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }] }));
          reply.add(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city": ' } }] }));
          reply.add(chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '{}' } }] }));
          reply.add(chunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }));
          reply.add(chunk({ content: 'Checking.' }));
          reply.add({ choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] });
          t = 2250; reply.add({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 21, total_tokens: 30 } });
          reply.finish();
          const article = create_message(message);
          document.getElementById('messages').append(article);
          done({ message, cards: [...article.querySelectorAll('.tool-card')].map((c) => c.innerText),
                 stats: article.querySelector('.stats').innerText });
        }).catch((e) => done({ error: String(e) }));
    """)
    assert "error" not in result, result
    m = result["message"]
    assert m["reasoning"] == "Look it up." and m["content"] == "Checking." and m["finish_reason"] == "tool_calls"
    assert "streaming" not in m
    assert m["tool_calls"] == [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    assert m["stats"] == {"ttft_ms": 250, "tokens": 21, "estimated": False, "tokens_per_s": 20}  # 20 tokens after the first in 1 s
    assert "get_weather" in result["cards"][0] and '"city": "Oslo"' in result["cards"][0]
    assert "get_time" in result["cards"][1]
    assert result["stats"] == "TTFT 250 ms · 20.0 tok/s · 21 tokens"
    page.screenshot("streamed-tool-calls")


def test_export_downloads_the_open_conversation_as_json(page):
    page.open()
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!", "stats": {"ttft_ms": 5, "tokens": 2}}]
    store_conversation(page, messages)
    # Catch the file the page makes and the download link it clicks (the CSP keeps blob: URLs out
    # of fetch, so the Blob is read where it is made).
    page.js("""
        window.exported = null;
        let blob = null;
        const make_url = URL.createObjectURL;
        URL.createObjectURL = (b) => { blob = b; return make_url(b); };
        HTMLAnchorElement.prototype.click = function () {
          blob.text().then((text) => (window.exported = { name: this.download, text }));
        };
    """)
    page.find("#settings-toggle").click()
    page.find("#export").click()
    exported = page.wait(lambda _: page.js("return window.exported"), timeout=5)
    assert exported["name"] == "Stored.json"
    data = json.loads(exported["text"])
    assert data["id"] == "cstored" and data["title"] == "Stored" and data["messages"] == messages
