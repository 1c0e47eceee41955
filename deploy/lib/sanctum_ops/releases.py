"""The binary store: each release is PREFIX/releases/<id>/sanctum with its recorded SHA-256 beside
it, `current` and `previous` are symlinks to release directories, and `fallback/` holds a separate
copy of the previous release for the promote-only fallback seat. Units run PREFIX/current/sanctum,
so switching a release is one atomic symlink rename, and rollback is the same rename back."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .files import atomic_symlink, atomic_write, sha256_file

BINARY = "sanctum"
HASH_FILE = "sanctum.sha256"


class ReleaseError(Exception):
    pass


@dataclass
class Check:
    ok: bool
    reason: str          # "ok", "missing", "corrupt", "no recorded hash", "not executable"
    expected: str | None = None
    actual: str | None = None


def release_id(digest: str) -> str:
    return digest[:16]


def verify_binary(directory: Path) -> Check:
    """Does directory/sanctum exist, stay executable, and match the hash recorded when installed?"""
    binary, recorded = directory / BINARY, directory / HASH_FILE
    if not binary.exists():
        return Check(False, "missing")
    try:
        expected = recorded.read_text().split()[0]
    except (OSError, IndexError):
        return Check(False, "no recorded hash")
    try:
        actual = sha256_file(binary)
    except OSError as e:
        return Check(False, f"unreadable ({e.strerror})", expected)
    if actual != expected:
        return Check(False, "corrupt", expected, actual)
    if not os.access(binary, os.X_OK):
        return Check(False, "not executable", expected, actual)
    return Check(True, "ok", expected, actual)


class Store:
    def __init__(self, prefix: Path):
        self.prefix = Path(prefix)
        self.releases = self.prefix / "releases"
        self.current_link = self.prefix / "current"
        self.previous_link = self.prefix / "previous"
        self.fallback_dir = self.prefix / "fallback"

    def add(self, binary: Path) -> tuple[str, Path]:
        """Copy `binary` into its own release directory (idempotent); returns (id, directory)."""
        if not binary.is_file():
            raise ReleaseError(f"{binary} is not a file")
        digest = sha256_file(binary)
        rid = release_id(digest)
        directory = self.releases / rid
        if verify_binary(directory).ok:
            return rid, directory
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write(directory / BINARY, binary.read_bytes(), 0o755)
        atomic_write(directory / HASH_FILE, f"{digest}  {BINARY}\n".encode(), 0o644)
        return rid, directory

    def _target(self, link: Path) -> str | None:
        try:
            return Path(os.readlink(link)).name
        except OSError:
            return None

    def current(self) -> str | None:
        return self._target(self.current_link)

    def previous(self) -> str | None:
        return self._target(self.previous_link)

    def directory(self, rid: str) -> Path:
        return self.releases / rid

    def point(self, current: str, previous: str | None) -> None:
        """Switch the links (no `previous` removes that link); relative targets keep the prefix
        relocatable."""
        if previous:
            atomic_symlink(f"releases/{previous}", self.previous_link)
        else:
            self.previous_link.unlink(missing_ok=True)
        atomic_symlink(f"releases/{current}", self.current_link)

    def set_fallback(self, rid: str) -> None:
        """Make the fallback seat's binary a separate copy of release `rid` (a separate file, so
        corruption of the release file cannot reach it)."""
        src = self.directory(rid)
        self.fallback_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.fallback_dir / BINARY, (src / BINARY).read_bytes(), 0o755)
        atomic_write(self.fallback_dir / HASH_FILE, (src / HASH_FILE).read_bytes(), 0o644)
        atomic_write(self.fallback_dir / "release", f"{rid}\n".encode(), 0o644)

    def fallback_release(self) -> str | None:
        try:
            return (self.fallback_dir / "release").read_text().strip() or None
        except OSError:
            return None

    def prune(self, keep: int) -> list[str]:
        """Delete the oldest releases beyond `keep`, never current, previous or the fallback's."""
        protected = {self.current(), self.previous(), self.fallback_release()}
        dirs = sorted((d for d in self.releases.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime,
                      reverse=True) if self.releases.is_dir() else []
        removed = []
        for d in dirs[keep:]:
            if d.name not in protected:
                shutil.rmtree(d)
                removed.append(d.name)
        return removed
