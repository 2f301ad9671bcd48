"""The inspector's handlers: what the model will see of the conversation and the draft, kept
up to date as the user types (each layer sent as far as the page lacks it), the soft-token
maps of a picked message, and the token probabilities of the last reply."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import gradio as gr

from gemma4_ui.core.conversation import Conversation, UserTurn
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.core.prompt import build_spec, model_inputs, template_text
from gemma4_ui.inspector import expanded_view, probabilities_view, soft_token_map
from gemma4_ui.inspector import layers as inspector
from gemma4_ui.media.decoding import MediaError, MediaItem
from gemma4_ui.web.display import turn_of_message
from gemma4_ui.web.handlers.common import Shared, without_waiting_call
from gemma4_ui.web.outputs import InspectorLayers
from gemma4_ui.web.safe_markdown import literal
from gemma4_ui.web.session import Draft, UserSession

log = logging.getLogger(__name__)

EMPTY_INSPECTOR = ("<p class='inspector-empty'>Type a message or attach a file: what Gemma 4 will receive, "
                   "and what each part costs in tokens, shows here before you send.</p>")


@dataclass
class InspectorView:
    counts: str  # HTML
    messages_text: str  # JSON
    template: str  # pieces for tail_patched_html
    template_text: str
    expanded: str
    warning: str = ""
    maps: str = ""  # HTML: the soft-token pictures
    expanded_colour: str = ""  # HTML: layer 3 coloured by token kind

    @property
    def messages(self) -> str:
        """Layer 1 as pieces for tail_patched_html."""
        return inspector.messages_html(self.messages_text) if self.messages_text else ""


class InspectorHandlers:
    def __init__(self, shared: Shared):
        self.shared = shared
        self._counting: tuple = (None, None)  # (the engine's processor, its counting copy)

    def refresh(self, value, conversation: Conversation, session: UserSession, show_ids: bool,
                options: ChatOptions) -> InspectorLayers:
        """The inspector's components for the draft `value`, each as far as the page lacks it
        (InspectorShown)."""
        view = self.inspect(value, conversation, session, show_ids, options)
        note = (gr.update(value=literal(f"⚠️ {view.warning}"), visible=True) if view.warning
                else gr.update(visible=False))
        layers = InspectorLayers(counts=view.counts, messages=view.messages, messages_text=view.messages_text,
                                 template=view.template, template_text=view.template_text, expanded=view.expanded,
                                 note=note, maps=view.maps, expanded_colour=view.expanded_colour)
        return session.inspector.updates(layers)

    def refresh_and_keep_session(self, value, conversation: Conversation, session: UserSession,
                                 show_ids: bool, options: ChatOptions) -> tuple:
        """refresh's components, then the session itself, so that its time to live counts from
        now (wiring.wire)."""
        return (*self.refresh(value, conversation, session, show_ids, options), session)

    @staticmethod
    def resend(session: UserSession) -> None:
        """The page could not apply a layer's patch: the next refresh sends the whole inspector."""
        session.inspector.forget()

    @staticmethod
    def show_plain_text(name: str, shown: bool, session: UserSession):
        """A layer's "Plain text (copy)" opened (the refresh that follows fills it) or closed
        (emptied: it is not kept up to date while closed)."""
        session.inspector.show_plain_text(name, shown)
        return gr.skip() if shown else ""

    def inspect(self, value, conversation: Conversation, session: UserSession, show_ids: bool,
                options: ChatOptions) -> InspectorView:
        """Layers and counts for the conversation plus the draft, before it is sent."""
        engine = self.shared.engine
        processor = engine.processor
        if processor is None:
            return InspectorView("", "", "", "", "", warning=(
                "The model's processor is not available here, so the prompt layers and exact counts "
                "cannot be shown. The server-reported usage appears with each reply."))
        draft = Draft.from_value(value)
        warning = ""
        preview = conversation
        if draft.empty and session.in_flight is not None:  # a message sent, its reply on its way
            preview = session.in_flight[1]
        elif not draft.empty:
            try:
                preview = Conversation(without_waiting_call(conversation).turns
                                       + [self.shared.user_turn(draft, session)])
            except MediaError as err:
                warning = str(err)
        spec = build_spec(preview, options, session.tools(), engine.audio_first)
        if not spec.messages:
            return InspectorView(EMPTY_INSPECTOR, inspector.messages_layer(spec, []), "", "", "", warning,
                                 maps=soft_token_map.NO_MEDIA)
        try:
            raw = template_text(processor, spec)
            inputs = model_inputs(self._counting_processor(processor), spec)
        except Exception as err:  # noqa: BLE001 - the same failure reaches the chat when sent
            log.warning("the inspector could not build the prompt", exc_info=True)
            return InspectorView(EMPTY_INSPECTOR, inspector.messages_layer(spec, preview.media()), "", "", "",
                                 f"The prompt could not be built ({type(err).__name__}: {err}).",
                                 maps=soft_token_map.NO_MEDIA)
        media = preview.media()
        counts = inspector.count_tokens(processor, inputs, media, options.image_budget, engine.context_length,
                                        engine.prompt_limit)
        return InspectorView(
            counts=inspector.counts_html(counts),
            messages_text=inspector.messages_layer(spec, media),
            template=inspector.template_html(inspector.template_spans(processor, spec, raw)),
            template_text=raw,
            expanded=inspector.expanded_layer(processor, inputs, show_ids),
            warning=warning,
            maps=_maps(processor, preview, media, counts, options, session, draft),
            expanded_colour=expanded_view.expanded_html(processor, inputs),
        )

    def _counting_processor(self, processor):
        """The inspector runs on every keystroke: it counts with a copy of the processor that
        expands each medium once (exact counts, without re-processing the history's media)."""
        if self._counting[0] is not processor:
            self._counting = (processor, inspector.counting_processor(processor))
        return self._counting[1]

    # -- the soft-token maps and the token probabilities -------------------------------------------

    @staticmethod
    def pick_message(evt: gr.SelectData, conversation: Conversation, session: UserSession) -> None:
        """A click on a chat message: the soft-token map shows the media of that message's user
        turn (a reply's: the message it answers). A turn without media changes nothing."""
        turn = turn_of_message(conversation, evt.index if isinstance(evt.index, int) else evt.index[0])
        while turn is not None and turn >= 0 and not isinstance(conversation.turns[turn], UserTurn):
            turn -= 1
        if turn is not None and turn >= 0 and conversation.turns[turn].media:
            session.mapped_turn = turn

    def show_probabilities(self, shown: bool, conversation: Conversation, session: UserSession) -> str:
        """The token-probability view opened or closed: replies record them only while it is
        open. Returns the view of the last reply."""
        session.probabilities_shown = shown
        return self.probabilities_html(conversation)

    def probabilities_html(self, conversation: Conversation) -> str:
        return probabilities_view.last_reply_html(conversation, self.shared.engine.token_probabilities_note)


def _maps(processor, preview: Conversation, media, counts, options: ChatOptions, session: UserSession,
          draft: Draft) -> str:
    """The soft-token maps of the draft's media; without any, of the message picked in the
    chat, or else of the latest message with media."""
    picked = session.mapped_turn
    if draft.files or picked is None or picked >= len(preview.turns) \
            or not isinstance(preview.turns[picked], UserTurn) or not preview.turns[picked].media:
        return soft_token_map.maps_html(processor, media, counts, options.image_budget, _newest_media(preview))
    note = ("<p class='stm-source'>The media of the message picked in the chat. Attach a file to see the "
            "draft's, or pick another message.</p>")
    return note + soft_token_map.maps_html(processor, media, counts, options.image_budget,
                                           list(preview.turns[picked].media))


def _newest_media(conversation: Conversation) -> list[MediaItem]:
    """The media of the draft, or else of the latest message that has any."""
    for turn in reversed(conversation.turns):
        if isinstance(turn, UserTurn) and turn.media:
            return list(turn.media)
    return []
