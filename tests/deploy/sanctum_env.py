"""Read an EnvironmentFile the way the deploy scripts do (their own parser, from deploy/lib)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deploy" / "lib"))
from sanctum_ops.config import read_env_file  # noqa: E402


def env_of(path) -> dict[str, str]:
    return dict(read_env_file(Path(path)))
