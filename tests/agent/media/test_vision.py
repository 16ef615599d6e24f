"""A request's media as the model receives it: image parts for a model that sees, one line of
text for one that does not; the bytes never enter the transcript."""

from __future__ import annotations

import base64

import pytest

from agent.media import attach_media, fit_image, model_sees_images, wanted_images
from agent.media.refs import MediaRef, with_media
from agent.messages import user_message
from state.values import ChatMessage
from tests.agent.media.images import png

REF: MediaRef = {
    "sha256": "ab" * 32,
    "owner": "telegram:1",
    "kind": "image",
    "mime": "image/png",
    "size_bytes": 2048,
    "origin": "photo",
    "width": 640,
    "height": 480,
}


@pytest.mark.parametrize(
    ("model", "sees"),
    [
        ("claude-sonnet-4-6", True),
        ("claude-3-5-haiku-latest", True),
        ("gpt-4o-mini", True),
        ("gpt-5", True),
        ("o3-mini", False),
        ("gpt-3.5-turbo", False),
        ("deepseek-chat", False),
        ("llama3.1:8b", False),
        ("qwen2.5-vl-7b", True),
        ("my-custom-model", False),
    ],
)
def test_known_models(model: str, sees: bool) -> None:
    """ "auto" knows the big families; an unknown model is taken as blind (a note, no error)."""
    assert model_sees_images(model) is sees


def test_setting_overrides_the_family() -> None:
    """`model.vision: true/false` wins over what the name suggests."""
    assert model_sees_images("my-custom-model", True) is True
    assert model_sees_images("gpt-4o", False) is False


def _photo_message() -> ChatMessage:
    return with_media(user_message("what plant is this?"), [REF])


def test_a_seeing_model_gets_the_caption_and_an_image_part() -> None:
    """The caption stays text, the image is a data URL of the fitted bytes."""
    fitted = fit_image(png(640, 480), "anthropic")
    sent = attach_media([_photo_message()], {REF["sha256"]: fitted}, sees=True)
    blocks = sent[0]["content"]
    assert isinstance(blocks, list)
    assert blocks[0] == {"type": "text", "text": "what plant is this?"}
    url = blocks[1]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == fitted.data
    assert "_media" not in sent[0]


def test_a_blind_model_gets_one_line() -> None:
    """No image part at all; a line names the photo and says it cannot be seen."""
    fitted = fit_image(png(640, 480), "openai")
    sent = attach_media([_photo_message()], {REF["sha256"]: fitted}, sees=False)
    blocks = sent[0]["content"]
    assert isinstance(blocks, list)
    assert [b["type"] for b in blocks] == ["text", "text"]
    assert "cannot see images" in blocks[1]["text"]
    assert "640×480" in blocks[1]["text"]


def test_messages_without_media_are_untouched_and_the_input_is_not_mutated() -> None:
    """Plain messages are the same objects; the transcript keeps its reference, no bytes."""
    plain = user_message("hi")
    photo = _photo_message()
    sent = attach_media([plain, photo], {}, sees=True)
    assert sent[0] is plain
    assert photo["content"] == "what plant is this?" and photo["_media"] == [REF]
    assert "no longer stored" in str(sent[1]["content"])


def test_wanted_images_lists_each_once() -> None:
    """Two messages with the same photo ask for it once, with its owner."""
    assert wanted_images([_photo_message(), _photo_message()]) == [("telegram:1", "ab" * 32)]


def test_the_estimate_counts_images_not_their_absence() -> None:
    """A photo reference adds its tokens (dearer rule) to the rough estimate; a recall result
    with an image mark adds the largest image's; the same text without either adds nothing."""
    from agent.media.image_fit import estimate_image_tokens
    from agent.media.marks import media_mark
    from agent.messages import tool_message
    from agent.tokens import estimate_message_tokens_rough

    plain = user_message("what plant is this?")
    photo = _photo_message()
    assert estimate_message_tokens_rough(photo) - estimate_message_tokens_rough(plain) == (
        estimate_image_tokens(640, 480)
    )
    mark = media_mark("telegram:1", "ab" * 32)
    recalled = tool_message("c1", "recall", f"#12 user\nlook\n{mark}")
    unmarked = tool_message("c1", "recall", "#12 user\nlook\n" + "x" * len(mark))
    extra = estimate_message_tokens_rough(recalled) - estimate_message_tokens_rough(unmarked)
    assert extra == estimate_image_tokens(None, None)
