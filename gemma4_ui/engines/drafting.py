"""Speculative decoding with Gemma 4's MTP drafters (`google/gemma-4-E2B-it-assistant` and its
siblings): which drafter to load, loading it, and counting what it drafted.

transformers does the decoding itself: `generate(assistant_model=drafter)` picks its
multi-token-prediction candidate generator for a Gemma 4 assistant. The drafter reads the
target's key/value states and last hidden state, so it must be made for that target (same
width, same vocabulary); with greedy decoding the output is exactly the target's own.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass

from gemma4_ui.config import ASSISTANT_AUTO, ASSISTANT_OFF
from gemma4_ui.engines.backports import backport_mtp_kv_sharing
from gemma4_ui.engines.base import ModelLoadError, ModelStatus
from gemma4_ui.engines.loading import ResolvedModel, explain_load_error, hub_reachable, is_cached, resolve_model

log = logging.getLogger(__name__)

DRAFTER_CLASSES = ("Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM")
# google/gemma-4-E2B-it → google/gemma-4-E2B-it-assistant (every instruction-tuned size has one).
_OFFICIAL = re.compile(r"^google/gemma-4-[\w.-]+-it$")


def matching_drafter(model_id: str) -> str | None:
    """The Hub id of the drafter Google ships for `model_id`, or None when there is none."""
    return f"{model_id}-assistant" if _OFFICIAL.match(model_id) else None


def resolve_drafter(setting: str, model: ModelStatus) -> ResolvedModel | None:
    """Where the drafter comes from, or None to decode without one.

    `setting` is --assistant: an explicit id or path is always loaded (a failure is an error);
    "auto" loads the model's own drafter only for a Hub checkpoint on CUDA whose drafter is
    cached or downloadable: on the CPU drafting costs more than it saves."""
    if setting == ASSISTANT_OFF:
        return None
    if setting != ASSISTANT_AUTO:
        resolved = resolve_model(setting)
        if resolved.status.is_bundled:
            raise ModelLoadError(f"The assistant {setting} is not cached here and the Hub is unreachable.")
        return resolved
    drafter = matching_drafter(model.requested) if model.source in ("hub", "cache") else None
    if drafter is None or not model.device.startswith("cuda"):
        return None
    if is_cached(drafter):
        return ResolvedModel(drafter, ModelStatus(drafter, drafter, "cache"), True)
    if hub_reachable():
        return ResolvedModel(drafter, ModelStatus(drafter, drafter, "hub"), False)
    return None


def load_drafter(resolved: ResolvedModel, target, explicit: bool):
    """The drafter on the target's device and dtype, checked against the target. With
    `explicit` False (the automatic choice) a failure is logged and None returned."""
    from transformers import AutoModelForCausalLM


    backport_mtp_kv_sharing()
    name = resolved.status.requested
    try:
        drafter = AutoModelForCausalLM.from_pretrained(
            resolved.path, dtype=target.dtype, device_map=str(target.device),
            local_files_only=resolved.local_files_only)
        check_pairing(drafter, target, name)
    except Exception as err:  # noqa: BLE001 - every cause is reported, with the drafter named
        message = str(err) if isinstance(err, ModelLoadError) else explain_load_error(name, err)
        if explicit:
            raise ModelLoadError(message) from err
        log.warning("decoding without a drafter: %s", message)
        return None
    return drafter.eval()


def check_pairing(drafter, target, name: str) -> None:
    """A drafter reads the target's hidden states and embeddings: their sizes must agree."""
    kind = type(drafter).__name__
    if kind not in DRAFTER_CLASSES:
        raise ModelLoadError(f"{name} is a {kind}, not a Gemma 4 MTP drafter ({' or '.join(DRAFTER_CLASSES)}).")
    target_text = target.config.get_text_config()
    width, vocab = drafter.config.backbone_hidden_size, drafter.config.get_text_config().vocab_size
    if width != target_text.hidden_size or vocab != target_text.vocab_size:
        raise ModelLoadError(
            f"{name} drafts for a model {width} wide with {vocab} tokens, but this model is "
            f"{target_text.hidden_size} wide with {target_text.vocab_size} tokens: use the drafter made for it.")


# -- counting ---------------------------------------------------------------------------------------

@dataclass
class DraftCounts:
    """What the drafter proposed and the target kept, over one generation."""

    drafted: int = 0
    accepted: int = 0


class CountingDrafter:
    """A drafter that counts its forward passes (one drafted token each) per generating
    thread, so generations running at once in several threads keep separate counts."""

    def __init__(self, model):
        self.model = model
        self._drafted: dict[int, int] = {}
        model.register_forward_hook(self._count)

    def _count(self, module, args, output) -> None:
        thread = threading.get_ident()
        if thread in self._drafted:
            self._drafted[thread] += int(output.logits.shape[1])

    def start(self) -> None:
        self._drafted[threading.get_ident()] = 0

    def stop(self) -> int:
        return self._drafted.pop(threading.get_ident(), 0)
