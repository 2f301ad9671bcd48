"""The settings a user chooses for a reply, carried as one typed value.

The UI's settings components, the API's named parameters and the transcript all go
through `ChatOptions`; every default comes from `Settings` (command line, environment,
or the dataclass defaults there), and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from gemma4_ui.config import IMAGE_BUDGETS, Settings

_DEFAULTS = Settings()


@dataclass
class ChatOptions:
    system_prompt: str = _DEFAULTS.system_prompt
    thinking: bool = _DEFAULTS.thinking
    max_new_tokens: int = _DEFAULTS.max_new_tokens
    temperature: float = _DEFAULTS.temperature
    top_p: float = _DEFAULTS.top_p
    top_k: int = _DEFAULTS.top_k
    image_budget: int = _DEFAULTS.image_budget
    enabled_tools: list[str] = field(default_factory=list)
    max_tool_rounds: int = _DEFAULTS.max_tool_rounds
    repetition_guard: int = _DEFAULTS.repetition_guard  # repeats that stop a looping reply; 0: off
    seed: int = _DEFAULTS.seed  # the sampling seed; -1: a fresh one for each reply
    tool_timeout: float = _DEFAULTS.tool_timeout  # set by the operator, not by the user
    # Record each token's probability: set while the session's probability view is open.
    token_probabilities: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> "ChatOptions":
        """The options a new session starts with."""
        return cls(**{name: getattr(settings, name) for name in USER_OPTIONS
                       if getattr(settings, name, None) is not None}, tool_timeout=settings.tool_timeout)

    @classmethod
    def from_inputs(cls, settings: Settings, **values) -> "ChatOptions":
        """Options from the user's inputs (components or API parameters), checked and kept
        within the operator's limits. A missing or empty value takes the configured default."""
        base = cls.from_settings(settings)
        given = {name: value for name, value in values.items() if name in USER_OPTIONS and value is not None}
        unknown = set(values) - set(USER_OPTIONS)
        assert not unknown, f"not chat options: {sorted(unknown)}"
        options = cls(
            system_prompt=str(given.get("system_prompt", base.system_prompt) or ""),
            thinking=bool(given.get("thinking", base.thinking)),
            max_new_tokens=max(1, min(int(given.get("max_new_tokens", base.max_new_tokens)),
                                      settings.max_new_tokens_cap)),
            temperature=max(0.0, float(given.get("temperature", base.temperature))),
            top_p=min(1.0, max(0.0, float(given.get("top_p", base.top_p)))),
            top_k=max(1, int(given.get("top_k", base.top_k))),
            image_budget=_image_budget(given.get("image_budget"), base.image_budget),
            enabled_tools=[str(name) for name in (given.get("enabled_tools", base.enabled_tools) or [])],
            max_tool_rounds=max(1, int(given.get("max_tool_rounds", base.max_tool_rounds))),
            repetition_guard=min(MAX_REPETITION_GUARD, max(0, int(given.get("repetition_guard", base.repetition_guard)))),
            seed=_seed(given.get("seed"), base.seed),
            tool_timeout=settings.tool_timeout,
        )
        return options


MAX_REPETITION_GUARD = 20


def _seed(value, default: int) -> int:
    """A seed is a whole number from 0; anything else (-1, empty) asks for a fresh one each time."""
    if value is None or value == "":
        return default
    try:
        seed = int(value)
    except (TypeError, ValueError):
        return default
    return seed if 0 <= seed < 2**63 else -1


def _image_budget(value, default: int) -> int:
    # The processor takes only the budgets Gemma 4 was trained with.
    try:
        return int(value) if int(value) in IMAGE_BUDGETS else default
    except (TypeError, ValueError):
        return default


# What the user sets, in the order the UI shows them and the API takes them.
USER_OPTIONS: tuple[str, ...] = tuple(f.name for f in fields(ChatOptions)
                                      if f.name not in ("tool_timeout", "token_probabilities"))
