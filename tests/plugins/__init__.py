"""Tests for the plugins shipped in plugins/."""
