"""One structured line per run: a JSON object on stdout, which journald keeps with the unit's name.
Operators grep or `jq` it; `level=error` lines are what alerting and dashboards key on."""
from __future__ import annotations

import json
import sys
import time
from typing import NoReturn


def emit(watcher: str, level: str, outcome: str, **fields) -> dict:
    record = {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "watcher": watcher, "level": level,
              "outcome": outcome}
    record.update(fields)
    sys.stdout.write(json.dumps(record, sort_keys=False) + "\n")
    sys.stdout.flush()
    return record


def fail_config(watcher: str, message: str) -> NoReturn:
    """Bad configuration: one error line, exit 2 (distinct from 1 = 'the check found a problem')."""
    emit(watcher, "error", "config_error", error=message)
    raise SystemExit(2)
