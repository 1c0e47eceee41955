"""Drives the chat page: a headless Chromium (Debian's chromium + chromium-driver, through Selenium)
with its performance log on, the page's controls, the sanctum servers the tests start, and where
screenshots go (build/test-output/ui/<test name>/; SANCTUM_TEST_OUTPUT moves the root)."""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import server_harness as sh  # noqa: E402

OUTPUT_ROOT = Path(os.environ.get("SANCTUM_TEST_OUTPUT", sh.ROOT / "build" / "test-output")) / "ui"
DESKTOP = (1280, 860)
PHONE = (390, 844)


def start_server(sanctum_bin: str, log_dir: Path, extra: list[str] | None = None) -> sh.Server:
    return sh.Server(sanctum_bin, [f"default={sh.DEFAULT_MODEL}"], log_dir / "server.log", extra=["--threads", "1"] + (extra or []))


def chromium_driver():
    """A headless Chromium with the performance log on, or pytest.skip saying why it cannot start."""
    chromium = shutil.which("chromium")
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        reason = "Chromium cannot start: chromium and chromium-driver are not installed (scripts/setup.sh installs them)"
        print(f"tests/ui skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--force-device-scale-factor=1", "--hide-scrollbars",
                f"--window-size={DESKTOP[0]},{DESKTOP[1]}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    try:
        return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    except WebDriverException as e:
        reason = f"Chromium cannot start: {e.msg or e}"
        print(f"tests/ui skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)


class Page:
    """The chat page in the shared browser, for one test."""

    def __init__(self, driver, base: str, out_dir: Path):
        self.driver = driver
        self.base = base
        self.out_dir = out_dir

    # ---- navigation and state ----
    def open(self, fresh: bool = True) -> None:
        if fresh:
            # Same origin first, so the storage cleared is this server's.
            self.driver.get(self.base + "/health")
            self.driver.execute_script("localStorage.clear(); sessionStorage.clear();")
        self.driver.get(self.base + "/")
        self.wait(lambda d: d.execute_script("return document.readyState") == "complete")

    def reload(self) -> None:
        self.driver.refresh()
        self.wait(lambda d: d.execute_script("return document.readyState") == "complete")

    def wait(self, condition, timeout: float = 30.0, message: str = ""):
        from selenium.webdriver.support.ui import WebDriverWait
        return WebDriverWait(self.driver, timeout, poll_frequency=0.05).until(condition, message)

    def find(self, css: str):
        from selenium.webdriver.common.by import By
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str):
        from selenium.webdriver.common.by import By
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def screenshot(self, name: str) -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"{name}.png"
        assert self.driver.save_screenshot(str(path)), f"could not save {path}"
        return path

    # ---- the page's controls ----
    def models_loaded(self) -> None:
        self.wait(lambda d: self.js("return document.getElementById('model').options.length") > 0, message="no model listed")

    def set_setting(self, element_id: str, value: str) -> None:
        """Fills a settings field and commits it (the change event a person's edit ends with)."""
        if self.find("#settings").get_attribute("hidden") is not None:
            self.find("#settings-toggle").click()
        field = self.find(f"#{element_id}")
        assert field.is_displayed(), f"#{element_id} is not on screen"
        self.js("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('change'))", field, value)

    def close_settings(self) -> None:
        if self.find("#settings").get_attribute("hidden") is None:
            self.find("#settings-close").click()

    def send(self, text: str) -> None:
        from selenium.webdriver.common.keys import Keys
        box = self.find("#input")
        box.send_keys(text)
        box.send_keys(Keys.ENTER)

    def assistant_messages(self):
        return self.find_all("article.message.assistant")

    def wait_answer_done(self, index: int = -1, timeout: float = 60.0):
        def done(_):
            msgs = self.assistant_messages()
            if not msgs:
                return False
            m = msgs[index]
            return m if "streaming" not in m.get_attribute("class") else False
        return self.wait(done, timeout, "the answer did not finish")

    def stored_conversations(self) -> list[dict]:
        return json.loads(self.js("return localStorage.getItem('sanctum.conversations') || '[]'"))

    # ---- the performance log ----
    def requested_urls(self) -> list[str]:
        urls = []
        for entry in self.driver.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg.get("method") == "Network.requestWillBeSent":
                urls.append(msg["params"]["request"]["url"])
        return urls


def new_page(browser, base: str, request) -> Page:
    """The shared browser at desktop size, its performance log emptied, for the server at `base`."""
    browser.set_window_size(*DESKTOP)
    browser.get_log("performance")  # drop what earlier tests left
    return Page(browser, base, OUTPUT_ROOT / request.node.name)


def own_host_only(urls: list[str], base: str) -> list[str]:
    """The URLs that went anywhere but the server (data: and blob: stay inside the page)."""
    own = urlsplit(base).netloc
    return [u for u in urls if urlsplit(u).scheme not in ("data", "blob") and urlsplit(u).netloc != own]


def wait_until(predicate, timeout: float = 10.0, step: float = 0.05) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
