"""Helpers shared by several test files, one module per wing (tests/conftest.py holds the fixtures).

ROOT is the repository's root, named once here: test files sit a folder deep under tests/ (tests/<wing>/), and a
depth counted in each of them would break at the next move."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
