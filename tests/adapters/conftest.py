"""The adapter suites reuse the parity suites' runners (tests/parity/parity_common.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "parity"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
