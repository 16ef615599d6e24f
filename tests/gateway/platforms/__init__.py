"""Tests of the platform adapters against fakes of their services."""

from __future__ import annotations
