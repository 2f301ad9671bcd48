"""Fixes from newer transformers releases, applied only to the releases that lack them
(web/workarounds.py lists them with the app's other workarounds)."""

from __future__ import annotations

import functools

# The transformers release that fixes what backport_mtp_kv_sharing backports.
MTP_KV_SHARING_FIXED_IN = "5.24.0"


def mtp_kv_sharing_needed() -> bool:
    """Whether this transformers lacks 5.24's `kv_sharing_modes` (the backport then applies)."""
    import transformers
    from packaging.version import Version

    return Version(transformers.__version__) < Version(MTP_KV_SHARING_FIXED_IN)


def _kv_sharing_modes(config) -> list[str | None]:
    """transformers 5.24's rule: a layer "reuse"s the cache of the last earlier layer of its
    type, and that layer "store"s its keys and values, also when no layer of the model reuses
    them (an MTP drafter reads them from the target's output). A model whose every layer
    reuses (a drafter) stores nothing itself."""
    layers, shared = config.num_hidden_layers, config.num_kv_shared_layers
    if shared == layers:
        return ["reuse"] * layers
    first_shared = layers - shared
    modes: list[str | None] = [None if i < first_shared else "reuse" for i in range(layers)]
    producers = config.layer_types[:first_shared][::-1]
    if sorted(set(producers)) != sorted(set(config.layer_types)):
        raise ValueError("The set of layer types producing a cache is different than the set of layer types using them")
    for kind in set(config.layer_types):
        modes[first_shared - 1 - producers.index(kind)] = "store"
    return modes


@functools.cache
def backport_mtp_kv_sharing() -> None:
    """transformers 5.23 raises when it builds a Gemma 4 MTP drafter (every layer of a drafter
    reads the target's cache), and a target with no shared layers (26B-A4B, 31B, 12B Unified)
    keeps no key/value states for a drafter to read. 5.24 fixes both in `kv_sharing_modes`."""
    if not mtp_kv_sharing_needed():
        return
    from transformers import Gemma4TextConfig, Gemma4UnifiedTextConfig

    for config_class in (Gemma4TextConfig, Gemma4UnifiedTextConfig):
        config_class.kv_sharing_modes = property(_kv_sharing_modes)
