"""A provider that shows the model the media its request references: the thin async shell
around `agent.media.vision` (load the owner's bytes, fit them once, attach or note)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any, Protocol

import structlog

from agent.media.image_fit import FittedImage, ImageRoute, fit_image
from agent.media.marks import MARK_OPEN
from agent.media.vision import (
    VisionSetting,
    attach_media,
    model_sees_images,
    recalled_marks,
    show_recalled,
    wanted_images,
)
from agent.providers.base import OnText, Provider, ProviderReply, ProviderRequest
from state.values import content_text

__all__ = ["FITTED_CACHE_SIZE", "MediaProvider", "MediaReader", "route_of"]

log = structlog.get_logger(__name__)

FITTED_CACHE_SIZE = 32
"""Fitted images kept in memory (by route, owner and hash), so a photo in the active context is not
decoded again on every call of every turn."""


class MediaReader(Protocol):
    """What the provider needs of the media store (`state.media_store.MediaStore`)."""

    async def read(self, owner: str, sha256: str) -> bytes | None:
        """The bytes of `owner`'s file, or None (not theirs, not stored)."""
        ...

    def verify(self, owner: str, sha256: str, tag: str) -> bool:
        """Whether `tag` is this store's signature of a recall mark (`agent.media.marks`)."""
        ...


def route_of(provider_name: str) -> ImageRoute:
    """Anthropic's image rule for the Anthropic API, OpenAI's for every OpenAI-style wire."""
    return "anthropic" if provider_name == "anthropic" else "openai"


class MediaProvider:
    """Wraps a provider: requests leave with image parts (or notes), replies come back as is."""

    def __init__(self, inner: Provider, media: MediaReader, *, vision: VisionSetting) -> None:
        self._inner = inner
        self._media = media
        self._vision = vision
        self._fitted: OrderedDict[tuple[ImageRoute, str, str], FittedImage] = OrderedDict()
        self.name = inner.name

    async def complete(
        self, request: ProviderRequest, *, on_text: OnText | None = None
    ) -> ProviderReply:
        wanted = wanted_images(request.messages)
        recalled = any(
            m.get("role") == "tool" and MARK_OPEN in content_text(m) for m in request.messages
        )
        if wanted or recalled:
            request = await self._with_media(request, wanted)
        return await self._inner.complete(request, on_text=on_text)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _with_media(
        self, request: ProviderRequest, wanted: list[tuple[str, str]]
    ) -> ProviderRequest:
        from dataclasses import replace

        sees = model_sees_images(request.model, self._vision)
        verify = self._media.verify
        images: dict[str, FittedImage] = {}
        if sees:
            route = route_of(self.name)
            for owner, sha in [*wanted, *recalled_marks(request.messages, verify)]:
                fitted = await self._fitted_image(route, owner, sha)
                if fitted is not None:
                    images[sha] = fitted
        messages = attach_media(request.messages, images, sees=sees)
        messages = show_recalled(messages, images, sees=sees, verify=verify)
        return replace(request, messages=messages)

    async def _fitted_image(self, route: ImageRoute, owner: str, sha: str) -> FittedImage | None:
        key = (route, owner, sha)  # the owner too: a cache never widens who reads what
        if (cached := self._fitted.get(key)) is not None:
            self._fitted.move_to_end(key)
            return cached
        data = await self._media.read(owner, sha)
        if data is None:
            log.warning("media_missing", sha256=sha[:12])
            return None
        try:
            fitted = await asyncio.to_thread(fit_image, data, route)
        except ValueError:
            log.warning("media_unreadable", sha256=sha[:12])
            return None
        self._fitted[key] = fitted
        while len(self._fitted) > FITTED_CACHE_SIZE:
            self._fitted.popitem(last=False)
        return fitted
