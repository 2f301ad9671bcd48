"""Layers 2 and 3 of the protocol: the chat template's raw text, and the processor's
expansion of it into token ids with soft-token runs for each image, clip and video."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gemma4_ui.core.conversation import Conversation, to_gemma_messages, video_metadata
from gemma4_ui.core.options import ChatOptions


class ToolSchemas(Protocol):
    """What a prompt needs of the tools (tools.registry.ToolRegistry): the schemas of those enabled."""

    def schemas(self, names) -> list[dict]: ...


@dataclass
class PromptSpec:
    """Everything `apply_chat_template` receives (layer 1)."""

    messages: list[dict]
    tools: list[dict] | None = None
    enable_thinking: bool = False
    image_budget: int = 280
    video_metadata: list = field(default_factory=list)

    def template_kwargs(self) -> dict:
        kwargs: dict = {"add_generation_prompt": True, "enable_thinking": self.enable_thinking}
        if self.tools:
            kwargs["tools"] = self.tools
        return kwargs

    def processor_kwargs(self) -> dict:
        # A fresh dict each call: apply_chat_template writes into the one it is given.
        kwargs: dict = {"images_kwargs": {"max_soft_tokens": self.image_budget}}
        if self.video_metadata:
            # Frames are sampled by us (media/decoding.py); the metadata carries their real timestamps.
            kwargs["video_metadata"] = list(self.video_metadata)
            kwargs["do_sample_frames"] = False
        return kwargs


def build_spec(conversation: Conversation, options: ChatOptions, registry: ToolSchemas,
               audio_first: bool = False) -> PromptSpec:
    """Layer 1: the conversation, the system prompt and the enabled tools, as the processor takes them.
    `audio_first`: the model's audio placement (Engine.audio_first)."""
    return PromptSpec(
        messages=to_gemma_messages(conversation, options.system_prompt, audio_first),
        tools=registry.schemas(options.enabled_tools) or None,
        enable_thinking=options.thinking,
        image_budget=options.image_budget,
        video_metadata=video_metadata(conversation.media()),
    )


def template_text(processor, spec: PromptSpec) -> str:
    """The raw prompt text, control tokens written out (layer 2)."""
    return processor.apply_chat_template(spec.messages, tokenize=False, **spec.template_kwargs())


def model_inputs(processor, spec: PromptSpec):
    """The processor's real output for `generate` (layer 3). Control tokens the user typed are
    encoded as plain text, so only the template writes protocol markers."""
    return processor.apply_chat_template(
        spec.messages,
        tokenize=True,
        return_dict=True,
        return_tensors="pt",
        sanitize_control_tokens=True,
        processor_kwargs=spec.processor_kwargs(),
        **spec.template_kwargs(),
    )
