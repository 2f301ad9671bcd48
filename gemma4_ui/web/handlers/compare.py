"""Compare: the same turn answered under two settings, side by side, and what differed in what
the model received (inspector/prompt_diff.py).

Side A runs with the chat's settings, side B with the same settings but for what the user
changed (`SideB`). The two run one after the other through the same turn loop as a chat turn
(ChatTurns._turn), under one request: so with --gpu-concurrency 1 they queue behind each
other and B says that it waits, and Stop (which stops every turn submitted before it) stops
both. Each answer settles into the tree of versions (core/branches.py) as a version of the
reply, A chosen: the chat continues with A, and "Keep B" chooses B's version.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, replace

import gradio as gr

from gemma4_ui.config import IMAGE_BUDGETS
from gemma4_ui.core.branches import BranchError
from gemma4_ui.core.conversation import Conversation, UserTurn
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.core.prompt import build_spec
from gemma4_ui.core.reply_data import reply_data
from gemma4_ui.engines.base import Engine
from gemma4_ui.inspector import prompt_diff
from gemma4_ui.inspector.layers import counting_processor
from gemma4_ui.media.decoding import MediaError, check_conversation_media
from gemma4_ui.web.display import render, settled
from gemma4_ui.web.handlers.branches import COMPARE_LAST as LAST
from gemma4_ui.web.handlers.common import Shared, without_waiting_call
from gemma4_ui.web.handlers.turns import ChatTurns, Step
from gemma4_ui.web.outputs import CompareOutputs, KeepOutputs, skipped
from gemma4_ui.web.safe_markdown import toast_text
from gemma4_ui.web.session import Draft, UserSession

SAME = "same"
THINKING_CHOICES = (SAME, "on", "off")
BUDGET_CHOICES = (SAME, *map(str, IMAGE_BUDGETS))
TOOLS_CHOICES = ("none", "all")  # or tool names; none picked: A's tools
TEMPERATURE_CHOICES = (SAME, "0", "0.3", "0.7", "1", "1.5")  # or any other number typed in
# The inputs of side B, by the name the API shows.
SIDE_B = ("b_thinking", "b_image_budget", "b_temperature", "b_system_prompt", "b_tools", "b_seed", "b_model",
          "b_no_system_prompt")
# Which message both sides answer: LAST, or the index (from 0, as /choose_branch counts) of a
# message already sent.
MESSAGE = "answer_message"


@dataclass(frozen=True)
class SideB:
    """What side B changes; "same" (or empty) keeps side A's setting."""

    thinking: str = SAME
    image_budget: str = SAME
    temperature: float | None = None
    system_prompt: str = ""
    tools: tuple[str, ...] = ()  # "none", "all", or tool names; empty: A's
    seed: int | None = None
    model: str = SAME  # or the name of the app's other model (--compare-model)
    no_system_prompt: bool = False

    def options(self, a: ChatOptions, every_tool: list[str]) -> ChatOptions:
        b = replace(a, enabled_tools=list(a.enabled_tools))
        if self.thinking in ("on", "off"):
            b.thinking = self.thinking == "on"
        if str(self.image_budget) in BUDGET_CHOICES[1:]:
            b.image_budget = int(self.image_budget)
        if self.temperature is not None:
            b.temperature = max(0.0, float(self.temperature))
        if self.no_system_prompt:
            b.system_prompt = ""
        elif self.system_prompt.strip():
            b.system_prompt = self.system_prompt
        if "none" in self.tools:
            b.enabled_tools = []
        elif "all" in self.tools:
            b.enabled_tools = list(every_tool)
        elif self.tools:
            unknown = [name for name in self.tools if name not in every_tool]
            if unknown:
                gr.Warning(toast_text(f"B: no tool named {', '.join(map(repr, unknown))} (tools: "
                                      f"{', '.join(every_tool) or 'none'}); B goes without it."))
            b.enabled_tools = [name for name in every_tool if name in self.tools]
        if self.seed is not None:
            b.seed = self.seed
        return b


def what_differs(a: ChatOptions, b: ChatOptions, models: tuple[str, str] = ("", "")) -> list[str]:
    """The settings B changes, in words, for the columns' headings and the data."""
    out = []
    if models[0] != models[1]:
        out.append(f"model {models[1]}")
    if a.thinking != b.thinking:
        out.append(f"thinking {'on' if b.thinking else 'off'}")
    if a.image_budget != b.image_budget:
        out.append(f"image budget {b.image_budget}")
    if a.temperature != b.temperature:
        out.append(f"temperature {b.temperature:g}")
    if a.system_prompt != b.system_prompt:
        out.append("another system prompt" if b.system_prompt else "no system prompt")
    if sorted(a.enabled_tools) != sorted(b.enabled_tools):
        out.append(f"tools: {', '.join(b.enabled_tools) or 'none'}")
    if a.seed != b.seed:
        out.append(f"seed {b.seed}" if b.seed >= 0 else "a fresh seed")
    return out


def _describe(options: ChatOptions, model: str = "") -> str:
    return (f"{f'{model} · ' if model else ''}thinking {'on' if options.thinking else 'off'} · image budget "
            f"{options.image_budget} · temperature {options.temperature:g}"
            f"{f' · seed {options.seed}' if options.seed >= 0 else ''} · "
            f"tools: {', '.join(options.enabled_tools) or 'none'}")


@dataclass(frozen=True)
class CompareStep:
    """One point of a comparison: which side moved (`side`: "a" or "b"), its step, and the
    prompt's difference once both prompts are known."""

    side: str
    step: Step
    start: int  # where the compared reply starts in the conversation
    a: ChatOptions
    b: ChatOptions
    prompt: dict | None = None
    models: tuple[str, str] = ("", "")  # the model of each side
    used_draft: bool = False  # the message in the box was the one answered

    def headings(self) -> dict[str, str]:
        two_models = len(set(self.models)) > 1
        differs = what_differs(self.a, self.b, self.models)
        return {"a": f"**A** — {_describe(self.a, self.models[0] if two_models else '')}",
                "b": f"**B** — {', '.join(differs) or 'the same settings'}"}


class CompareHandlers:
    def __init__(self, shared: Shared, turns: ChatTurns):
        self.shared = shared
        self.turns = turns
        self._counting: dict[int, tuple] = {}  # id(processor) -> (processor, its counting copy)

    def compare(self, message, b_thinking, b_image_budget, b_temperature, b_system_prompt, b_tools, b_seed, b_model,
                b_no_system_prompt, answer_message, conversation: Conversation, session: UserSession,
                options: ChatOptions, request: gr.Request = None) -> Iterator[CompareOutputs]:
        """The page's Compare: both columns stream; the chat shows A's version at the end."""
        side_b = _side_b(b_thinking, b_image_budget, b_temperature, b_system_prompt, b_tools, b_seed, b_model,
                         b_no_system_prompt)
        columns = {"a": [], "b": []}
        headings = {}
        last = None
        steps = self._steps(message, side_b, answer_message, conversation, session, options)
        with closing(steps):
            for point in steps:
                if point.step.kind == "skip":
                    yield skipped(CompareOutputs)
                    return
                last = point
                headings = point.headings()
                conv = point.step.conversation
                shown = render(conv, point.step.live, point.step.notice, start=point.start)
                columns[point.side] = shown
                waiting = ("\n\n⏳ Waiting: B starts when A has finished (one generation at a time)."
                           if point.side == "a" and point.step.kind == "streaming" else "")
                counts = diff = ""
                if point.prompt:
                    counts = prompt_diff.counts_table_html(point.prompt["counts"]["a"], point.prompt["counts"]["b"])
                    diff = prompt_diff.diff_html(point.prompt["template_diff"])
                yield CompareOutputs(panel=gr.update(visible=True), a_heading=headings["a"], a_chat=columns["a"],
                                     b_heading=headings["b"] + waiting, b_chat=columns["b"], counts=counts, diff=diff,
                                     history=gr.skip(), live=gr.skip(), conversation=gr.skip(), composer=gr.skip())
        if last is None:  # nothing to answer (the warning says so)
            yield skipped(CompareOutputs)._replace(panel=gr.update(visible=False))
            return
        if last.step.kind == "refused":
            yield CompareOutputs(panel=gr.update(visible=False), a_heading=gr.skip(), a_chat=gr.skip(), b_heading=gr.skip(),
                                 b_chat=gr.skip(), counts=gr.skip(), diff=gr.skip(), history=gr.skip(),
                                 live=gr.skip(), conversation=gr.skip(), composer=gr.update(value=last.step.restore))
            return
        final = session.branches.conversation()
        history, live = settled(final, versions=session.branches.versions())
        yield CompareOutputs(panel=gr.update(visible=True), a_heading=headings["a"], a_chat=columns["a"],
                             b_heading=headings["b"], b_chat=columns["b"], counts=gr.skip(), diff=gr.skip(),
                             history=history, live=live, conversation=final,
                             composer=gr.update(value=None) if last.used_draft else gr.skip())

    def compare_data(self, message, b_thinking, b_image_budget, b_temperature, b_system_prompt, b_tools, b_seed,
                     b_model, b_no_system_prompt, answer_message, conversation: Conversation, session: UserSession,
                     options: ChatOptions, request: gr.Request = None):
        """The /compare endpoint: both replies as data, like /reply ({"a", "b"}), with what B
        changed (`differs`), what differed in the prompt (`prompt`: counts per modality and
        the template diff), each side's model (`models`) and where the replies are among the
        versions (`message_index`, `versions`: give them to /choose_branch to continue with B).
        `answer_message`: "last" (the message given, or without one the last message sent), or
        the index of a message already sent, answered again (its later messages stay as they
        were, on the branch the answers fork from)."""
        side_b = _side_b(b_thinking, b_image_budget, b_temperature, b_system_prompt, b_tools, b_seed, b_model,
                         b_no_system_prompt)
        data = {"a": None, "b": None, "differs": [], "models": None, "prompt": None, "message_index": None,
                "versions": None}
        steps = self._steps(message, side_b, answer_message, conversation, session, options)
        sent = None
        with closing(steps):
            for point in steps:
                if point.step.kind == "skip":
                    yield gr.skip(), gr.skip()
                    return
                if point.step.kind == "ended":
                    continue
                data = {**data, point.side: reply_data(point.step.conversation, point.step.live, point.step.notice),
                        "differs": what_differs(point.a, point.b, point.models),
                        "models": {"a": point.models[0], "b": point.models[1]}, "prompt": point.prompt or data["prompt"]}
                if data != sent:
                    sent = data
                    yield data, gr.skip()
        final = session.branches.conversation()
        if session.compared is not None:
            position, versions = session.compared
            data = {**data, "message_index": position, "versions": versions}
        yield data, final

    # -- the comparison itself ------------------------------------------------------------------

    def _steps(self, message, side_b: SideB, answer_message, conversation: Conversation, session: UserSession,
               a: ChatOptions) -> Iterator[CompareStep]:
        """A's turn, then B's, as CompareSteps. With a draft, both answer it as a new message;
        without one, both answer the last message sent again; `answer_message` names an
        earlier one to answer again instead."""
        session.compared = None
        every_tool = [spec.name for spec in session.tools().specs()]
        b = side_b.options(a, every_tool)
        names, engine_b = self.shared.models(), self._engine_b(side_b.model)
        engines = (self.shared.engine, engine_b)
        models = (names[0], names[0] if engine_b is self.shared.engine else names[1])
        tree = session.branches_of(conversation)
        draft = Draft.from_value(message)
        earlier = _message_index(answer_message, conversation)
        used_draft = earlier is None and not draft.empty
        if earlier is not None or draft.empty:
            index = conversation.last_user_index if earlier is None else earlier
            if index is None:
                gr.Warning("Type a message to compare two answers to, or send one first.")
                return
            base, fork_at = Conversation(conversation.turns[: index + 1]), index + 1
        else:
            try:
                turn = self.shared.user_turn(draft, session)
                check_conversation_media(conversation.media(), turn.media, self.shared.settings.limits)
            except MediaError as err:
                gr.Warning(toast_text(err))
                yield CompareStep("a", Step(conversation, kind="refused", notice=str(err), restore=draft.as_value()),
                                  0, a, b, models=models, used_draft=True)
                return
            session.uploads.sent(turn.media)
            base = Conversation(without_waiting_call(conversation).turns + [turn])
            fork_at = None  # A appends the message and its reply; B's reply forks beside A's
        start, reply = len(base.turns) - 1, len(base.turns)  # the message, and where its replies go
        prompt = self._prompt_difference(base, (a, b), engines, session)
        made = {}
        for side, options, fork, engine in (("a", a, fork_at, engines[0]), ("b", b, reply, engines[1])):
            unheard = sorted({item.kind for item in base.media()} - engine.modalities)
            if unheard:  # the other model cannot take this conversation's media
                notice = f"{engine.status.name} does not take {' or '.join(unheard)} input, so it cannot answer here."
                yield CompareStep(side, Step(base, kind="settled", notice=notice), start, a, b, prompt, models, used_draft)
                continue
            for step in self.turns._turn(base, options, session, fork_at=fork, engine=engine):
                yield CompareStep(side, step, start, a, b, prompt, models, used_draft)
                if step.kind == "skip":
                    return
            versions = tree.versions()
            if len(versions) > reply:  # the side made a reply (nothing, if it failed at once)
                made[side] = versions[reply][0]
        # The chat continues with A; B stays a version beside it ("Keep B" chooses it).
        if "a" in made:
            tree.choose(reply, made["a"])
        session.compared = (reply, made)

    def _engine_b(self, model: str) -> Engine:
        names = self.shared.models()
        if model in (SAME, "", None) or model == names[0]:
            return self.shared.engine
        if model in names[1:]:
            return self.shared.second
        gr.Warning(toast_text(f"B: no model named {model!r} runs here ({', '.join(names)}); "
                              "B uses A's."))
        return self.shared.engine

    def _prompt_difference(self, base: Conversation, options: tuple[ChatOptions, ChatOptions],
                           engines: tuple[Engine, Engine], session: UserSession) -> dict:
        media = base.media()
        sides = []
        for side_options, engine in zip(options, engines, strict=True):
            processor = engine.processor
            if processor is not None and id(processor) not in self._counting:
                self._counting[id(processor)] = (processor, counting_processor(processor))
            counting = self._counting[id(processor)][1] if processor is not None else None
            spec = build_spec(base, side_options, session.tools(), engine.audio_first)
            try:
                sides.append(prompt_diff.prompt_side(processor, counting, spec, media, side_options.image_budget))
            except Exception as err:  # noqa: BLE001 - the turn itself will say what fails
                sides.append(prompt_diff.PromptSide(f"(the prompt could not be built: {err})", None))
        return prompt_diff.difference(*sides)

    @staticmethod
    def queued() -> tuple:
        """At the click, before the comparison has its turn on the GPU: (Stop, the panel, A's
        heading and column, B's heading and column)."""
        return (gr.update(interactive=True), gr.update(visible=True), "**A** — ⏳ waiting for its turn to generate",
                [], "**B** — ⏳ waiting: B runs after A", [])

    @staticmethod
    def keep(side: str, conversation: Conversation, session: UserSession) -> KeepOutputs:
        """Keep A or B: the chat continues with that side's version; the other stays one."""
        tree = session.branches_of(conversation)
        if session.compared is not None and side in session.compared[1] and session.turns.at_rest:
            position, made = session.compared
            try:
                conversation = tree.choose(position, made[side])
            except BranchError as err:  # the comparison's versions went (Undo, New conversation)
                gr.Warning(toast_text(str(err)))
        session.compared = None
        history, live = settled(conversation, versions=tree.versions())
        return KeepOutputs(history=history, live=live, conversation=conversation, panel=gr.update(visible=False))


def _temperature(value) -> float | None:
    """B's temperature: a number, or "same" (or empty) for A's. Anything else is said and ignored."""
    if value is None or str(value).strip() in ("", SAME):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not 0 <= number <= 2:
        gr.Warning(toast_text(f"B's temperature must be a number from 0 to 2, not {value!r}: B uses A's."))
        return None
    return number


def _side_b(thinking, image_budget, temperature, system_prompt, tools, seed, model, no_system_prompt) -> SideB:
    return SideB(thinking or SAME, str(image_budget or SAME), _temperature(temperature), system_prompt or "",
                 _tools(tools), _seed(seed), str(model or SAME), bool(no_system_prompt))


def _tools(value) -> tuple[str, ...]:
    """B's tools: "none", "all", tool names (a list, or one text with commas), or nothing
    (or "same") for A's."""
    names = value.split(",") if isinstance(value, str) else list(value or ())
    return tuple(name for name in (str(n).strip() for n in names) if name and name != SAME)


def _message_index(value, conversation: Conversation) -> int | None:
    """The message `answer_message` names, if an earlier one: a message the user sent, counted
    from 0 as /choose_branch counts. "last" (or nothing) is None; anything else is said."""
    if value is None or str(value).strip() in ("", LAST):
        return None
    try:
        index = int(float(str(value).strip()))
    except ValueError:
        index = -1
    if 0 <= index < len(conversation.turns) and isinstance(conversation.turns[index], UserTurn):
        return index
    gr.Warning(toast_text(f"There is no message of yours at {value!r} to answer again: both sides answer the last "
                          "one (or the one in the box)."))
    return None


def _seed(value) -> int | None:
    """B's seed: a whole number from 0, -1 for a fresh one each reply, or "same" (empty) for A's."""
    if value is None or str(value).strip() in ("", SAME):
        return None
    try:
        seed = int(str(value).strip())
    except ValueError:
        seed = -2
    if seed < -1:
        gr.Warning(toast_text(f"B's seed must be a whole number (-1: a fresh one), not {value!r}: B uses A's."))
        return None
    return seed
