"""Tests for agent.compaction: one module per pure phase."""
