#!/usr/bin/env python3
"""A stand-in for `systemctl` where systemd is not PID 1 (containers, CI, unprivileged tests).

It runs the real ExecStart= of the installed unit files (EnvironmentFile=, Environment=, %i, ${X}
as one argument and $X split on whitespace, as systemd does), keeps each main process's pid in a
state directory, and stops processes the way systemd does (KillSignal to the whole process group,
SIGKILL after TimeoutStopSec). Conflicts= and ConditionPathExists= are honoured; timers and other
non-service units are only marked active. Restart= is not emulated. Every call is appended to
calls.log so tests can assert the order of operations (stop then start, never reload).

usage: fake_systemctl.py --unit-dir DIR --state DIR <systemctl arguments>
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

UNIT_DIR: Path
STATE: Path


def parse_unit(name: str) -> dict[str, list[str]]:
    """{'Section.Key': [values...]} of a unit file, a template instance resolving to its template."""
    path = UNIT_DIR / name
    instance = ""
    if not path.exists() and "@" in name:
        prefix, rest = name.split("@", 1)
        instance, suffix = rest.rsplit(".", 1)
        path = UNIT_DIR / f"{prefix}@.{suffix}"
    if not path.exists():
        raise LookupError(f"Unit {name} not found.")
    out: dict[str, list[str]] = {}
    section = ""
    pending = ""
    for raw in path.read_text().splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, _, value = line.partition("=")
        value = value.strip().replace("%i", instance).replace("%n", name).replace("%%", "%")
        out.setdefault(f"{section}.{key.strip()}", []).append(value)
    return out


def read_env(path: str, env: dict[str, str]) -> None:
    optional = path.startswith("-")
    path = path.lstrip("-")
    try:
        text = Path(path).read_text()
    except OSError:
        if optional:
            return
        raise RuntimeError(f"Failed to load environment files: {path}")
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key.strip()] = value


VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand_argv(command: str, env: dict[str, str]) -> list[str]:
    argv = []
    for word in shlex.split(command.lstrip("-@+!:")):
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:  # unbraced $VAR as a whole word: split into words (none when empty)
            argv += env.get(whole.group(1), "").split()
        else:
            argv.append(VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), word))
    return argv


def pid_of(unit: str) -> int:
    try:
        return int((STATE / f"{unit}.pid").read_text())
    except (OSError, ValueError):
        return 0


def alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")  # a zombie has exited


def state_of(unit: str) -> str:
    if unit.endswith(".service"):
        if alive(pid_of(unit)):
            return "active"
        return "failed" if (STATE / f"{unit}.pid").exists() else "inactive"
    return "active" if (STATE / f"{unit}.active").exists() else "inactive"


def seconds(value: str, default: float) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|min)?", value.strip()) if value else None
    if not m:
        return default
    n = float(m.group(1))
    return n / 1000 if m.group(2) == "ms" else n * 60 if m.group(2) == "min" else n


def stop(unit: str) -> int:
    if not unit.endswith(".service"):
        (STATE / f"{unit}.active").unlink(missing_ok=True)
        return 0
    pid = pid_of(unit)
    if alive(pid):
        spec = parse_unit(unit)
        sig = getattr(signal, spec.get("Service.KillSignal", ["SIGTERM"])[-1])
        timeout = seconds(spec.get("Service.TimeoutStopSec", [""])[-1], 90.0)
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        if alive(pid):
            os.killpg(pid, signal.SIGKILL)
            while alive(pid):
                time.sleep(0.01)
    (STATE / f"{unit}.pid").unlink(missing_ok=True)
    return 0


def conflicting(unit: str, spec: dict) -> list[str]:
    """Units Conflicts= ties to `unit`, declared on either side."""
    out = set(" ".join(spec.get("Unit.Conflicts", [])).split())
    for f in STATE.glob("*.pid"):
        other = f.name[:-len(".pid")]
        if other != unit:
            try:
                if unit in " ".join(parse_unit(other).get("Unit.Conflicts", [])).split():
                    out.add(other)
            except LookupError:
                pass
    return sorted(out)


def start(unit: str) -> int:
    spec = parse_unit(unit)
    for path in spec.get("Unit.ConditionPathExists", []):
        negate = path.startswith("!")
        if Path(path.lstrip("!")).exists() == negate:
            return 0  # condition failed: systemd skips the unit and `start` still succeeds
    for other in conflicting(unit, spec):
        stop(other)
    if not unit.endswith(".service"):
        (STATE / f"{unit}.active").touch()
        return 0
    if alive(pid_of(unit)):
        return 0
    env = dict(os.environ)
    for value in spec.get("Service.Environment", []):
        for assignment in shlex.split(value):
            key, _, v = assignment.partition("=")
            env[key] = v
    for path in spec.get("Service.EnvironmentFile", []):
        try:
            read_env(path, env)
        except RuntimeError as e:
            print(f"Job for {unit} failed: {e}", file=sys.stderr)
            return 1
    argv = expand_argv(spec["Service.ExecStart"][-1], env)
    log = open(STATE / f"{unit}.log", "ab")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd="/",
                                start_new_session=True)
    except OSError as e:  # Type=exec: a binary that cannot be executed fails the start job
        print(f"Job for {unit} failed: {argv[0]}: {e.strerror}", file=sys.stderr)
        (STATE / f"{unit}.pid").write_text("0")
        return 1
    (STATE / f"{unit}.pid").write_text(str(proc.pid))
    return 0


def main(argv: list[str]) -> int:
    global UNIT_DIR, STATE
    if len(argv) < 5 or argv[0] != "--unit-dir" or argv[2] != "--state":
        print(__doc__, file=sys.stderr)
        return 2
    UNIT_DIR, STATE = Path(argv[1]), Path(argv[3])
    STATE.mkdir(parents=True, exist_ok=True)
    args = argv[4:]
    with open(STATE / "calls.log", "a") as f:
        f.write(" ".join(args) + "\n")
    verb, rest = args[0], [a for a in args[1:] if not a.startswith("-")]
    flags = [a for a in args[1:] if a.startswith("-")]
    try:
        if verb in ("daemon-reload", "reset-failed"):
            return 0
        if verb in ("enable", "disable"):
            for unit in rest:
                parse_unit(unit)
                marker = STATE / f"{unit}.enabled"
                marker.touch() if verb == "enable" else marker.unlink(missing_ok=True)
            if "--now" in flags:
                return max([start(u) if verb == "enable" else stop(u) for u in rest] + [0])
            return 0
        if verb == "start":
            return max(start(u) for u in rest)
        if verb == "stop":
            return max(stop(u) for u in rest)
        if verb == "restart":
            return max(stop(u) or start(u) for u in rest)
        if verb == "reload":
            for unit in rest:
                if alive(pid_of(unit)):
                    os.kill(pid_of(unit), signal.SIGHUP)
            return 0
        if verb == "is-active":
            states = [state_of(u) for u in rest]
            if "--quiet" not in flags and "-q" not in flags:
                print("\n".join(states))
            return 0 if all(s == "active" for s in states) else 3
        if verb == "show":
            props = [a.split("=", 1)[1] for a in flags if a.startswith("--property=")]
            if "-p" in args:
                props.append(args[args.index("-p") + 1])
                rest = [u for u in rest if u != props[-1]]
            for unit in rest:
                for prop in props:
                    value = str(pid_of(unit) if alive(pid_of(unit)) else 0) if prop == "MainPID" else ""
                    print(value if "--value" in flags else f"{prop}={value}")
            return 0
    except LookupError as e:
        print(str(e), file=sys.stderr)
        return 5
    print(f"fake systemctl: unsupported command {verb!r}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
