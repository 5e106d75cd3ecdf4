"""Helpers shared by several test files, one module per wing (tests/conftest.py holds the fixtures)."""
