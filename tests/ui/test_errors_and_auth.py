"""What the page says when things go wrong: a server that wants a bearer token (the page asks for
it and keeps it only in the tab's sessionStorage), a server that is gone, an error answer."""
from __future__ import annotations

import json
import signal

from ui_harness import new_page, start_server

QUESTION = "What is 2+2? Respond with only the number."


def test_a_guarded_server_gets_the_token_the_page_asks_for(browser, guarded_server, auth_token, request):
    page = new_page(browser, guarded_server.base, request)
    page.open()
    dialog = page.wait(lambda _: page.find("#token-dialog").is_displayed() and page.find("#token-dialog"))
    assert "requires a bearer token" in page.find("#token-reason").text
    page.screenshot("token-asked")
    page.find("#token-input").send_keys("wrong-token")
    page.find("#token-save").click()
    page.wait(lambda _: "was refused" in page.find("#token-reason").text and dialog.is_displayed())
    page.find("#token-input").send_keys(auth_token)
    page.find("#token-save").click()
    page.models_loaded()
    assert page.js("return sessionStorage.getItem('sanctum.token')") == auth_token
    page.set_setting("temperature", "0")
    page.close_settings()
    page.send(QUESTION)
    answer = page.wait_answer_done()
    assert answer.find_element("css selector", ".content").text.strip() == "4"
    stored = page.js("return JSON.stringify(Object.assign({}, localStorage))")
    assert auth_token not in stored, "the token must stay out of localStorage"
    # A new tab of the same origin starts without it.
    page.driver.switch_to.new_window("tab")
    try:
        page.driver.get(guarded_server.base + "/")
        assert page.js("return sessionStorage.getItem('sanctum.token')") is None
    finally:
        page.driver.close()
        page.driver.switch_to.window(page.driver.window_handles[0])


def test_a_server_that_is_gone_is_named_plainly(browser, sanctum_bin, tmp_path, request):
    server = start_server(sanctum_bin, tmp_path)
    page = new_page(browser, server.base, request)
    try:
        page.open()
        page.models_loaded()
        server.terminate(signal.SIGKILL)
        page.send(QUESTION)
        answer = page.wait_answer_done()
        error = answer.find_element("css selector", ".error")
        assert error.is_displayed() and "Cannot reach the server" in error.text, error.text
        page.wait(lambda _: page.find("#banner").is_displayed() and "sanctum serve" in page.find("#banner").text)
        page.wait(lambda _: page.find("#status").get_attribute("data-state") == "down")
        page.screenshot("error")
        messages = json.loads(page.js("return localStorage.getItem('sanctum.conversations')"))[0]["messages"]
        assert messages[-1]["error"].startswith("Cannot reach the server")
    finally:
        server.terminate(signal.SIGKILL)


def test_an_error_answer_shows_the_servers_message(page):
    page.open()
    page.models_loaded()
    page.set_setting("max-tokens", "100000")
    page.close_settings()
    page.send(QUESTION)
    answer = page.wait_answer_done()
    error = answer.find_element("css selector", ".error").text
    assert "The server answered 400" in error and "context" in error, error
    # Regenerate after fixing the setting answers the same question again.
    page.set_setting("max-tokens", "16")
    page.set_setting("temperature", "0")
    page.close_settings()
    page.find("#regenerate").click()
    page.wait(lambda _: page.find("article.message.assistant .content").text.strip() == "4")
    answer = page.wait_answer_done()
    assert len(page.assistant_messages()) == 1 and not answer.find_element("css selector", ".error").is_displayed()


def test_a_draining_answer_says_the_server_is_shutting_down(page):
    """The 503 a draining server gives a request that reaches it. A real drain also closes the
    listener, so new connections fail and the page says the server is gone (the test above); this
    one puts the 503 body in the page's fetch to see the words for the draining case."""
    page.open()
    page.models_loaded()
    page.js("""
        const real = window.fetch;
        window.fetch = (url, init) => String(url).endsWith('/v1/chat/completions')
          ? Promise.resolve(new Response(JSON.stringify({ error: { message: 'The server is shutting down',
              type: 'service_unavailable_error', param: null, code: 'draining' } }),
              { status: 503, headers: { 'Content-Type': 'application/json' } }))
          : real(url, init);
    """)
    page.send(QUESTION)
    answer = page.wait_answer_done()
    error = answer.find_element("css selector", ".error").text
    assert error.startswith("The server is shutting down and takes no new requests"), error
    assert "Start it again" in page.find("#banner").text
