"""Settings: every option is a flag whose default comes from an environment variable (which the
units fill from /etc/sanctum/*.env), so timers run the scripts bare and tests pass flags."""
from __future__ import annotations

import argparse
import os
import re
import shlex
from pathlib import Path


def env_default(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def add_common_seat_flags(p: argparse.ArgumentParser) -> None:
    """How to reach a seat: URL, optional mTLS client identity or bearer token, model id."""
    p.add_argument("--url", default=env_default("SANCTUM_URL", "http://127.0.0.1:8080"),
                   help="seat base URL (env SANCTUM_URL)")
    p.add_argument("--ca-cert", default=env_default("SANCTUM_CA_CERT"),
                   help="CA bundle for an https:// seat (env SANCTUM_CA_CERT)")
    p.add_argument("--client-cert", default=env_default("SANCTUM_CLIENT_CERT"),
                   help="client certificate for an mTLS seat (env SANCTUM_CLIENT_CERT)")
    p.add_argument("--client-key", default=env_default("SANCTUM_CLIENT_KEY"),
                   help="client key for an mTLS seat (env SANCTUM_CLIENT_KEY)")
    p.add_argument("--bearer-token-file", default=env_default("SANCTUM_BEARER_TOKEN_FILE"),
                   help="file holding a bearer token (env SANCTUM_BEARER_TOKEN_FILE)")
    p.add_argument("--model", default=env_default("SANCTUM_MODEL_NAME"),
                   help="model id to request (env SANCTUM_MODEL_NAME; default: the seat's only model)")


def add_alert_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--alert-cmd", default=env_default("SANCTUM_ALERT_CMD"),
                   help="shell command run on alert; the alert JSON arrives on stdin and in "
                        "SANCTUM_ALERT_JSON (env SANCTUM_ALERT_CMD)")
    p.add_argument("--alert-webhook", default=env_default("SANCTUM_ALERT_WEBHOOK"),
                   help="URL that receives the alert JSON by POST (env SANCTUM_ALERT_WEBHOOK)")


def add_state_flag(p: argparse.ArgumentParser) -> None:
    # STATE_DIRECTORY is what systemd's StateDirectory= exports to the service.
    p.add_argument("--state-dir", default=env_default("SANCTUM_WATCH_STATE_DIR", env_default("STATE_DIRECTORY")),
                   help="directory for persistent state (env SANCTUM_WATCH_STATE_DIR, or systemd's STATE_DIRECTORY)")


def state_dir(value: str | None, watcher: str) -> Path:
    from .runlog import fail_config
    if not value:
        fail_config(watcher, "no state directory: pass --state-dir or set SANCTUM_WATCH_STATE_DIR")
    path = Path(value)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail_config(watcher, f"cannot create state directory {path}: {e.strerror}")
    return path


def positive_number(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return v


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return v


def non_negative_number(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return v


_ENV_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as systemd's EnvironmentFile= reads them (comments, blank lines, one level
    of single or double quotes). Raises ValueError naming the line on anything else."""
    out: dict[str, str] = {}
    for n, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith(";"):
            continue
        m = _ENV_LINE.match(line)
        if not m:
            raise ValueError(f"{path}:{n}: expected KEY=VALUE, got {raw!r}")
        key, value = m.group(1), m.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key] = value
    return out


def split_flags(value: str | None) -> list[str]:
    """A flags variable ($SANCTUM_EXTRA_FLAGS) split the way systemd splits an unbraced $VAR."""
    return shlex.split(value) if value else []
