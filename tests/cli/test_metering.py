"""The metering wrappers: transparent to what they wrap, one sample per thing that happened."""

from __future__ import annotations

from typing import Any

import pytest

from agent.errors import ProviderUnavailable
from agent.events import CompactionBegan, ModelSwitched
from agent.messages import user_message
from agent.proposals import Proposal
from agent.providers.base import ProviderReply, ProviderRequest, Usage
from cli.metering import MeteredProvider, MeteredWork, event_sink
from gateway.metrics import (
    BackgroundPass,
    CompactionStarted,
    ModelCall,
    ProposalSettled,
    Sample,
)


class _Recorder:
    def __init__(self) -> None:
        self.samples: list[Sample] = []

    def record(self, sample: Sample) -> None:
        self.samples.append(sample)


class _Session:
    session_id = "s1"
    transcript = [user_message("hi")]


class _Work:
    """End-of-turn work that proposes, finds nothing, or fails, as told."""

    def __init__(self, result: Proposal | None | Exception) -> None:
        self.result = result
        self.forgotten: list[str] = []

    def delay_s(self, session: Any) -> float | None:
        return 1.5

    async def __call__(self, session: Any) -> Proposal | None:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result

    def forget_session(self, session_id: str) -> None:
        self.forgotten.append(session_id)


async def test_a_proposal_reports_its_adoption_before_its_own_callback() -> None:
    """A proposing pass is one sample; adopting the (same) proposal reports it, then runs the
    work's own callback with the adopted messages."""
    seen: list[Any] = []

    async def own(messages: Any) -> None:
        seen.append(messages)

    base = tuple(_Session.transcript)
    recorder = _Recorder()
    metered = MeteredWork(_Work(Proposal(kind="micro", base=base, prefix=[], on_adopted=own)), recorder, "micro")  # fmt: skip
    proposal = await metered(_Session())  # type: ignore[arg-type]
    assert proposal is not None and proposal.base is base
    assert [type(s) for s in recorder.samples] == [BackgroundPass]
    assert (
        isinstance(recorder.samples[0], BackgroundPass)
        and recorder.samples[0].outcome == "proposed"
    )
    assert proposal.on_adopted is not None
    await proposal.on_adopted(["adopted"])  # type: ignore[list-item]
    assert recorder.samples[-1] == ProposalSettled(session_id="s1", kind="micro", adopted=True)
    assert seen == [["adopted"]]
    assert proposal.on_dropped is not None
    await proposal.on_dropped("transcript_changed")
    assert recorder.samples[-1] == ProposalSettled(session_id="s1", kind="micro", adopted=False)


@pytest.mark.parametrize(
    ("result", "outcome"), [(None, "nothing"), (RuntimeError("boom"), "failed")]
)
async def test_a_pass_without_a_proposal_is_counted_as_it_ended(
    result: None | Exception, outcome: str
) -> None:
    """Nothing to do, or a failure (which still propagates), is one sample of that outcome."""
    recorder = _Recorder()
    work = _Work(result)
    metered = MeteredWork(work, recorder, "batch")
    assert metered.delay_s(_Session()) == 1.5  # type: ignore[arg-type]
    if isinstance(result, Exception):
        with pytest.raises(RuntimeError):
            await metered(_Session())  # type: ignore[arg-type]
    else:
        assert await metered(_Session()) is None  # type: ignore[arg-type]
    assert [(s.kind, s.outcome) for s in recorder.samples if isinstance(s, BackgroundPass)] == [
        ("batch", outcome)
    ]
    metered.forget_session("s1")
    assert work.forgotten == ["s1"]


class _Provider:
    name = "fake"

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    async def complete(self, request: ProviderRequest, *, on_text: Any = None) -> ProviderReply:
        if self.fail:
            raise ProviderUnavailable("fake", "m", "down")
        return ProviderReply(
            message={"role": "assistant", "content": "ok"},
            usage=Usage(),
            stop_reason="end",
            model="m",
        )

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("fail", [False, True])
async def test_every_model_call_is_one_sample_failed_ones_too(fail: bool) -> None:
    """The reply (or the error) passes through untouched; the call is timed either way."""
    recorder = _Recorder()
    provider = MeteredProvider(_Provider(fail), recorder, role="summary")
    request = ProviderRequest(model="m", messages=[user_message("x")])
    if fail:
        with pytest.raises(ProviderUnavailable):
            await provider.complete(request)
    else:
        assert (await provider.complete(request)).message["content"] == "ok"
    assert [(s.role, s.ok) for s in recorder.samples if isinstance(s, ModelCall)] == [
        ("summary", not fail)
    ]
    assert provider.name == "fake"


def test_events_are_recorded_and_passed_on() -> None:
    """The event sink records the counted events and still hands every event on."""
    recorder, passed = _Recorder(), list[str]()
    sink = event_sink(recorder, lambda event: passed.append(event.name))
    sink(CompactionBegan(session_id="s1", reason="manual"))
    sink(ModelSwitched(model="m", context_length=200_000))
    assert recorder.samples == [CompactionStarted(session_id="s1", reason="manual")]
    assert passed == ["compaction:start", "model:switch"]
