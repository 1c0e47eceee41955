"""Persistent watcher state (consecutive failures, cooldown timestamps) as one JSON file in a state
directory, so a timer can run each watcher one-shot and the count survives between runs."""
from __future__ import annotations

import json
from pathlib import Path

from .files import atomic_write


class State:
    def __init__(self, state_dir: Path, name: str):
        self.path = Path(state_dir) / f"{name}.json"
        try:
            self.data = json.loads(self.path.read_text())
            if not isinstance(self.data, dict):
                self.data = {}
        except FileNotFoundError:
            self.data = {}
        except ValueError:
            # A corrupt state file must not wedge the watcher: start counting afresh.
            self.data = {"_reset_reason": "unreadable state file"}

    def get(self, key: str, default=None):
        return self.data.get(key, default)

    def set(self, key: str, value) -> None:
        self.data[key] = value

    def save(self) -> None:
        self.data.pop("_reset_reason", None)
        atomic_write(self.path, (json.dumps(self.data, indent=1, sort_keys=True) + "\n").encode(), 0o644)
