"""scripts/sandbox_corpus_report.py: the JSON it prints has every figure, on a small sample."""

from __future__ import annotations

import pytest

from agent.tools.sandbox import bwrap_problem
from scripts.sandbox_corpus_report import main

PROBLEM = bwrap_problem()


@pytest.mark.skipif(PROBLEM is not None, reason=f"bwrap unusable: {PROBLEM}")
async def test_the_report_has_both_rates_and_the_sandbox_alone_rate() -> None:
    """Three dangerous and three benign commands: the refusal, harm and run figures add up."""
    report = await main(limit=3, parallel=3, timeout_s=3.0)
    policy, bare = report["policy_and_sandbox"], report["sandbox_without_policy"]
    assert isinstance(policy, dict) and isinstance(bare, dict)
    assert policy["dangerous"]["commands"] == 3 and policy["dangerous"]["harmful"] == 0
    assert policy["dangerous"]["refused"] == 3
    assert bare["dangerous"]["ran"] == 3 and bare["dangerous"]["harmful"] == 0
    assert policy["benign"]["ran"] == 3 and bare["benign"]["ran"] == 3
    assert report["policy_alone"]["dangerous_not_safe"] == 3
