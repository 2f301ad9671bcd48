"""One assistant turn: generate, run the tools the model calls, feed the results back, and
generate again until the model answers, as a stream of snapshots.

Engine-agnostic: local and remote engines both yield the typed events of `core/events.py`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from gemma4_ui.core import repetition
from gemma4_ui.core.conversation import AssistantTurn, Conversation, ToolRound, UserTurn
from gemma4_ui.core.events import (
    Done,
    EngineError,
    ReplyStats,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallStarted,
    ToolResult,
)
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.core.prompt import build_spec
from gemma4_ui.core.streaming import Live
from gemma4_ui.engines.base import Engine, GenerationRequest
from gemma4_ui.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


@dataclass
class Snapshot:
    conversation: Conversation
    live: Live | None  # None once the turn is settled
    error: str = ""  # an engine error to show; the conversation is as it was before the turn


class TurnRunner:
    def __init__(self, engine: Engine, registry: ToolRegistry):
        self.engine = engine
        self.registry = registry

    def run(self, conversation: Conversation, options: ChatOptions, cancel: threading.Event) -> Iterator[Snapshot]:
        """`conversation` ends with the user's turn (a new reply) or with an assistant turn
        whose last round has just been answered (resuming after a client tool). Yields
        snapshots; the last one is settled (`live` is None)."""
        conv = conversation.copy()
        if isinstance(conv.turns[-1], UserTurn):
            conv.turns.append(AssistantTurn())
        turn = conv.turns[-1]
        assert isinstance(turn, AssistantTurn), "a turn continues from a user message or an assistant turn"
        enabled = set(options.enabled_tools)
        if turn.rounds and not turn.rounds[-1].answered:  # resuming: finish the round's other calls
            yield from self._run_calls(conv, Live(), turn.rounds[-1], enabled, options)
            if not turn.rounds[-1].answered:
                yield Snapshot(conv, None)
                return

        while True:
            live = Live()
            # 1. One generation round. The assistant turn being built is part of the prompt,
            #    so a resumed exchange continues the open model turn.
            spec = build_spec(conv, options, self.registry, self.engine.audio_first)
            request = GenerationRequest(spec, options.max_new_tokens, options.temperature, options.top_p, options.top_k,
                                        media=conv.media(), token_probabilities=options.token_probabilities,
                                        repetition_guard=options.repetition_guard,
                                        seed=options.seed if options.seed >= 0 else None)
            done: Done | None = None
            # A turn stopped before it started (Stop while it was queued) never reaches the engine.
            events = self.engine.stream(request, cancel) if not cancel.is_set() else iter(
                [Done(ReplyStats(stop_reason="cancelled"))])
            for event in _reported(events):
                if isinstance(event, ThinkingDelta):
                    if live.thinking_started is None:
                        live.thinking_started = time.perf_counter()
                    live.reasoning += event.text
                elif isinstance(event, (TextDelta, ToolCallStarted)):
                    _close_thinking(live)
                    if isinstance(event, TextDelta):
                        live.content += event.text
                    else:
                        live.calls_started += 1
                elif isinstance(event, ToolCall):
                    live.calls.append(event)
                elif isinstance(event, EngineError):
                    yield from self._fail(conversation, conv, turn, live, event.message)
                    return
                elif isinstance(event, Done):
                    done = event
                    break
                yield Snapshot(conv, live)
            _close_thinking(live)
            assert done is not None, "an engine stream ends with Done or EngineError"

            # 2. Settle the round: an answer ends the turn; calls are run and fed back.
            calls = done.tool_calls if done.stats.stop_reason not in ("cancelled", "repetition") else []
            over_limit = bool(calls) and len(turn.rounds) >= options.max_tool_rounds
            if not calls or over_limit:
                _settle(turn, done, live)
                if over_limit:
                    turn.notice = (f"The model asked for more tools after {len(turn.rounds)} rounds, the limit; "
                                   "its calls were not run. Raise the limit in the settings, or ask again.")
                yield Snapshot(conv, None)
                return
            round_ = ToolRound(
                calls=calls, reasoning=done.reasoning, content=done.content, raw=done.raw, stats=done.stats,
                thinking_seconds=live.thinking_seconds, token_probabilities=done.token_probabilities,
            )
            turn.rounds.append(round_)
            # The round is part of the turn now; a fresh Live only marks the call running.
            yield from self._run_calls(conv, Live(), round_, enabled, options)
            if not round_.answered:  # a client tool waits for the user
                yield Snapshot(conv, None)
                return
            if cancel.is_set():
                turn.notice = "Stopped after the tool calls; the model did not answer."
                yield Snapshot(conv, None)
                return

    def _run_calls(self, conv: Conversation, live: Live, round_: ToolRound, enabled: set[str],
                   options: ChatOptions) -> Iterator[Snapshot]:
        """Run the calls in order; a client tool stops the line (the user answers it, then
        the remaining calls run on resume)."""
        for index, call in enumerate(round_.calls):
            if index < len(round_.results):
                continue
            live.running_call = index
            yield Snapshot(conv, live)
            result = self.registry.execute(call, enabled, timeout=options.tool_timeout)
            round_.results.append(result)
            if result.status == "client":
                break
        live.running_call = None

    def answer_client_tool(self, conversation: Conversation, response, cancelled: bool = False) -> Conversation:
        """Record the user's answer to a pending client-tool call."""
        conv = conversation.copy()
        turn = conv.turns[-1]
        assert isinstance(turn, AssistantTurn) and turn.rounds, "no tool call is waiting for a result"
        round_ = turn.rounds[-1]
        pending = round_.results[-1]
        assert pending.status == "client", "no tool call is waiting for a result"
        if cancelled:
            answer = ToolResult(pending.name, pending.call_id, "cancelled",
                                {"error": "The user cancelled this call."}, 0.0, "The user cancelled this call.")
        else:
            answer = ToolResult(pending.name, pending.call_id, "ok", response, 0.0)
        round_.results[-1] = answer
        return conv

    @staticmethod
    def abandon_client_calls(conversation: Conversation, reason: str) -> Conversation:
        """The user moved on without answering a client tool: the waiting call, and any calls
        of its round not run yet, are cancelled with `reason` (the model reads it, the panel
        shows it)."""
        conv = conversation.copy()
        round_ = conv.turns[-1].rounds[-1]
        if round_.results and round_.results[-1].status == "client":
            round_.results.pop()
        for call in round_.calls[len(round_.results):]:
            round_.results.append(ToolResult(call.name, call.id, "cancelled", {"error": reason}, 0.0, reason))
        return conv

    def _fail(self, original: Conversation, conv: Conversation, turn: AssistantTurn, live: Live,
              message: str) -> Iterator[Snapshot]:
        """An engine error. With nothing produced yet the conversation goes back to how it
        was; otherwise the turn keeps what was produced (e.g. a stream cut mid-reply) and
        says what happened."""
        if not turn.rounds and not live.content.strip() and not live.reasoning.strip():
            yield Snapshot(original, None, error=message)
            return
        _close_thinking(live)
        turn.reasoning, turn.content = live.reasoning.strip(), live.content.strip()
        turn.thinking_seconds = live.thinking_seconds
        turn.notice = message
        yield Snapshot(conv, None, error=message)


def _reported(events: Iterator) -> Iterator:
    """An engine's events, a failure of any engine (the template rejecting the messages, the
    processor a medium, a bug) ending them as an EngineError: the turn says what happened,
    the conversation stays, and the next message is answered."""
    try:
        yield from events
    except Exception as err:  # noqa: BLE001 - whatever it is, the user sees it and the app serves on
        log.exception("the engine failed")
        yield EngineError(f"The model could not take this turn ({type(err).__name__}: {err}). "
                          "The conversation is kept; try again, or change what you sent.")


def _settle(turn: AssistantTurn, done: Done, live: Live) -> None:
    """The round that answers ends the turn."""
    turn.reasoning, turn.content, turn.raw, turn.stats = done.reasoning, done.content, done.raw, done.stats
    turn.thinking_seconds = live.thinking_seconds
    turn.token_probabilities = done.token_probabilities
    turn.notice = _notice(done)
    if done.stats.stop_reason == "repetition":  # the loop shows as a line; the raw output keeps it all
        turn.reasoning, turn.content = repetition.trimmed_loop(turn.reasoning), repetition.trimmed_loop(turn.content)
    if not turn.rounds and not turn.content and not turn.reasoning and done.stats.stop_reason == "cancelled":
        turn.notice = "Stopped before the model wrote anything."


def _close_thinking(live: Live) -> None:
    if live.thinking_started is not None and live.thinking_seconds is None:
        live.thinking_seconds = time.perf_counter() - live.thinking_started


def _notice(done: Done) -> str:
    if done.stats.stop_reason == "cancelled":
        return "Stopped."
    if done.stats.stop_reason == "repetition":
        return ("Stopped: the reply kept repeating itself. Ask again in other words, or change the repetition "
                "guard in Settings (0 turns it off).")
    if done.incomplete == "thought":
        return "The reply ended inside its thought (token limit?), so there is no answer. Raise max new tokens."
    if done.incomplete == "tool call":
        return "The reply ended in the middle of a tool call, so the call was not run."
    if done.incomplete == "parse":
        return "The model's output could not be parsed; it is shown as plain text."
    if done.stats.stop_reason == "tool_call":  # the call is gone: _settle runs only without calls
        return "The model handed over to a tool without calling one, so the reply ends here."
    if done.stats.stop_reason == "length":
        return "Cut off at the max new tokens limit."
    return ""
