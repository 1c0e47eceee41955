"""The chat page as a person uses it, in headless Chromium against `sanctum serve` on the embedded
default model: an answer appears, a long one stops when asked, conversations outlive a reload, the
thinking switch shows the reasoning in a collapsed block, and the page talks to no other host."""
from __future__ import annotations

import json
import re
import time

from selenium.webdriver.common.action_chains import ActionChains

from ui_harness import PHONE, own_host_only, wait_until

QUESTION = "What is 2+2? Respond with only the number."


def ask_deterministically(page) -> None:
    page.models_loaded()
    page.set_setting("temperature", "0")
    page.close_settings()


def test_two_plus_two_shows_4_with_ttft_and_tokens_per_second(page):
    page.open()
    page.models_loaded()
    page.screenshot("empty")
    ask_deterministically(page)
    page.send(QUESTION)
    answer = page.wait_answer_done()
    assert answer.find_element("css selector", ".content").text.strip() == "4"
    assert page.find("article.message.user .content").text == QUESTION
    stats = answer.find_element("css selector", ".stats").text
    assert re.search(r"TTFT \d+ ms", stats) and re.search(r"\d+\.\d tok/s", stats), stats
    assert re.search(r"\d+ tokens", stats) and "counted from the stream" not in stats, stats  # usage came in the stream
    page.screenshot("answered")


def test_stop_ends_a_long_answer_mid_stream(page, ui_server):
    page.open()
    ask_deterministically(page)
    # The default model ends every answer within a few tokens; ignore_eos (an extra request field the
    # settings take as JSON) makes this one run to max_tokens, several seconds at ~400 tokens/s.
    page.set_setting("max-tokens", "4000")
    page.set_setting("extra", '{"ignore_eos": true}')
    page.close_settings()
    page.send("Count from 1 to 300.")
    page.wait(lambda _: len(page.assistant_messages()) == 1 and len(page.assistant_messages()[0].text) > 40)
    assert "streaming" in page.assistant_messages()[0].get_attribute("class")
    assert page.find("#stop").is_displayed() and not page.find("#send").is_enabled()
    page.screenshot("streaming")
    page.find("#stop").click()
    answer = page.wait_answer_done(timeout=10)
    stopped_text = answer.find_element("css selector", ".content").text
    assert "stopped" in answer.find_element("css selector", ".stats").text
    assert not page.find("#stop").is_displayed() and page.find("#send").is_enabled()
    time.sleep(0.3)
    assert answer.find_element("css selector", ".content").text == stopped_text, "text kept arriving after Stop"
    # The server saw the client go and ended the request: 4000 tokens would take ~10 s at the
    # default model's ~400 tokens/s on one thread, a loaded machine only longer.
    def ended_early():
        done = [r for r in ui_server.log_records() if r.get("msg") == "access" and r.get("route") == "/v1/chat/completions"]
        return done and float(done[-1]["duration_ms"]) < 5000
    assert wait_until(ended_early), ui_server.logs()[-2000:]
    stored = page.stored_conversations()[0]["messages"][-1]
    assert stored["stopped"] is True and stored["content"]


def test_conversations_survive_switching_and_a_reload(page):
    page.open()
    ask_deterministically(page)
    page.send(QUESTION)
    page.wait_answer_done()
    first = page.stored_conversations()[0]
    page.find("#new-chat").click()
    page.send("Hello!")
    page.wait_answer_done()
    assert len(page.find_all("#conversations li")) == 2
    # Rename the second one, go back to the first, reload.
    page.find("#settings-toggle").click()
    page.find("#rename").click()
    title = page.find(".rename-input")  # its text is selected: typing replaces it
    title.send_keys("Greetings")
    page.js("arguments[0].dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'}))", title)
    page.close_settings()
    page.find(f'#conversations li[data-id="{first["id"]}"] button').click()
    page.reload()
    assert page.js("return localStorage.getItem('sanctum.current')") == first["id"]
    texts = [a.find_element("css selector", ".content").text for a in page.find_all("article.message")]
    assert texts == [QUESTION, "4"]
    titles = sorted(b.text for b in page.find_all("#conversations li button"))
    assert titles == sorted(["Greetings", QUESTION[:60]]), titles
    # Delete the open one: the other remains, intact.
    page.find("#settings-toggle").click()
    page.find("#delete").click()
    page.driver.switch_to.alert.accept()
    page.close_settings()
    remaining = page.stored_conversations()
    assert [c["title"] for c in remaining] == ["Greetings"]
    assert [m["role"] for m in remaining[0]["messages"]] == ["user", "assistant"]


def test_thinking_shows_reasoning_in_a_collapsed_block(page):
    page.open()
    ask_deterministically(page)
    page.wait(lambda _: page.find("#thinking-row").is_displayed() or page.find("#settings").get_attribute("hidden") is not None)
    page.find("#settings-toggle").click()
    assert page.find("#thinking-row").is_displayed(), "the default model's template thinks: the switch must show"
    page.find("#thinking").click()
    page.close_settings()
    page.send(QUESTION)
    answer = page.wait_answer_done()
    reasoning = answer.find_element("css selector", "details.reasoning")
    assert reasoning.is_displayed() and reasoning.get_attribute("open") is None
    reasoning.find_element("css selector", "summary").click()
    assert reasoning.get_attribute("open") is not None
    assert reasoning.find_element("css selector", ".reasoning-body").text.strip()
    body = json.loads(page.js("return localStorage.getItem('sanctum.settings')"))
    assert body["thinking"] is True
    page.screenshot("reasoning-expanded")


def test_the_page_requests_nothing_from_other_hosts(page):
    page.open()
    ask_deterministically(page)
    page.send(QUESTION)
    page.wait_answer_done()
    page.find("#theme-toggle").click()
    page.screenshot("other-theme")
    urls = page.requested_urls()
    assert any(u.endswith("/v1/chat/completions") for u in urls) and any(u.endswith("/ui/app.js") for u in urls), urls
    assert own_host_only(urls, page.base) == []


def test_phone_width_folds_the_sidebar_behind_the_menu(page):
    page.driver.set_window_size(*PHONE)
    page.open()
    ask_deterministically(page)
    page.send(QUESTION)
    page.wait_answer_done()
    assert not page.find("#new-chat").is_displayed() or page.find("#new-chat").location["x"] < 0
    page.screenshot("phone")
    page.find("#menu").click()
    page.wait(lambda _: page.find("#new-chat").location["x"] >= 0)
    page.screenshot("phone-menu")
    # A tap on the chat beside the sidebar (offsets count from the element's centre) puts it away.
    ActionChains(page.driver).move_to_element_with_offset(page.find("#messages"), 150, 0).click().perform()
    page.wait(lambda _: page.find("#new-chat").location["x"] < 0)
    width = page.js("return document.documentElement.scrollWidth")
    assert width <= PHONE[0], f"the page scrolls sideways at phone width ({width} px)"


def test_shift_enter_adds_a_line_and_enter_sends(page):
    from selenium.webdriver.common.keys import Keys
    page.open()
    ask_deterministically(page)
    box = page.find("#input")
    box.send_keys("What is 2+2?")
    box.send_keys(Keys.SHIFT, Keys.ENTER)
    box.send_keys("Respond with only the number.")
    assert box.get_attribute("value") == "What is 2+2?\nRespond with only the number."
    assert page.find_all("article.message") == []
    box.send_keys(Keys.ENTER)
    page.wait_answer_done()
    assert page.find("article.message.user .content").text == "What is 2+2?\nRespond with only the number."
    assert box.get_attribute("value") == ""
