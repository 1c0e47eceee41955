"""The two actions watchers take on the outside world: run a configured command (restart, stop,
start) and fire an alert (a command, a webhook, or both). Both are configurable so tests inject
fakes and sites plug in their own notifier."""
from __future__ import annotations

import json
import os
import subprocess
import urllib.request


def run_command(cmd: str, timeout: float = 120.0, extra_env: dict | None = None, stdin: str | None = None):
    """Run `cmd` through /bin/sh; returns (exit code, combined output tail). Never raises."""
    env = dict(os.environ)
    env.update(extra_env or {})
    try:
        r = subprocess.run(["/bin/sh", "-c", cmd], input=stdin, capture_output=True, text=True,
                           timeout=timeout, env=env)
        return r.returncode, (r.stdout + r.stderr)[-400:].strip()
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:g} s"
    except OSError as e:
        return 127, str(e)


def fire_alert(watcher: str, summary: str, details: dict, alert_cmd: str | None, webhook: str | None,
               timeout: float = 15.0) -> dict:
    """Deliver one alert; returns what happened to each channel (for the run's log line)."""
    payload = {"watcher": watcher, "summary": summary, "host": os.uname().nodename}
    payload.update(details)
    body = json.dumps(payload)
    result: dict = {}
    if alert_cmd:
        rc, out = run_command(alert_cmd, timeout, {"SANCTUM_ALERT_WATCHER": watcher, "SANCTUM_ALERT_SUMMARY": summary,
                                                   "SANCTUM_ALERT_JSON": body}, stdin=body + "\n")
        result["alert_cmd_rc"] = rc
        if rc != 0:
            result["alert_cmd_output"] = out
    if webhook:
        try:
            req = urllib.request.Request(webhook, data=body.encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                result["webhook_status"] = resp.status
        except Exception as e:  # a dead notifier must not crash the watcher
            result["webhook_error"] = str(e)[:200]
    if not alert_cmd and not webhook:
        result["alert_channel"] = "log-only (no SANCTUM_ALERT_CMD or SANCTUM_ALERT_WEBHOOK set)"
    return result
