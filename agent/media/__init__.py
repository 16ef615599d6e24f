"""Media: what a file is, its limits, fitting images to a model, and how a message refers to a
stored file. Decisions only; the bytes live in `state.media_store`, fetching is the gateway's."""

from __future__ import annotations

from agent.media.image_fit import FittedImage, ImageRoute, estimate_image_tokens, fit_image
from agent.media.refs import MEDIA_KEY, MediaRef, Origin, describe, has_images, media_of, with_media
from agent.media.sniff import MediaKind, Sniffed, limit_for, sniff
from agent.media.vision import VisionSetting, attach_media, model_sees_images, wanted_images

__all__ = [
    "MEDIA_KEY",
    "FittedImage",
    "ImageRoute",
    "MediaKind",
    "MediaRef",
    "Origin",
    "Sniffed",
    "VisionSetting",
    "attach_media",
    "describe",
    "estimate_image_tokens",
    "fit_image",
    "has_images",
    "limit_for",
    "media_of",
    "model_sees_images",
    "sniff",
    "wanted_images",
    "with_media",
]
