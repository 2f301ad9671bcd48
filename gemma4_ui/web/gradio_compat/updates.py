"""Two costs Gradio (written for 6.31.0) pays on every streamed update for what does not
change; each waits for a Gradio that skips the work itself. What the page receives and what
the session holds stay exactly as Gradio makes them.

- An output left as it is (`gr.skip()`: an update with no property) is rebuilt: Gradio builds
  a new component from the old one's arguments (for the chat's history, a Chatbot's whole
  __init__), stores it in the session, recomputes its config, and then sends
  `{"__type__": "update"}`, which changes nothing on the page. Here that update is sent
  without the rebuild.
- A State's new value makes Gradio recompute the State component's config, which does not
  hold the value (the value lives in the session's state data). Here the config the session
  made when it started is kept.
"""

from __future__ import annotations

import datetime
import types

import gradio as gr

_SKIP = {"__type__": "update"}


def skip_rebuilds_unchanged_outputs() -> bool:
    """Whether Gradio's postprocessing rebuilds a component for an update (what the first fix
    avoids), and marks the outputs it passes over as this fix does."""
    from gradio import blocks, components

    return (hasattr(components._Keywords, "FINISHED_ITERATING")
            and "postprocess_update_dict" in blocks.Blocks.postprocess_data.__code__.co_names)


def state_set_recomputes_config() -> bool:
    """Whether Gradio's SessionState.__setitem__ recomputes a State's config (what the second
    fix avoids); true too once the fix has replaced it in this process."""
    from gradio.state_holder import SessionState

    if getattr(SessionState.__setitem__, "_keeps_state_configs", False):
        return True
    names = SessionState.__setitem__.__code__.co_names
    return "config_for_block" in names and "_state_ttl" in names and "state_data" in names


def send_skips_as_they_are(demo: gr.Blocks) -> None:
    """`demo` sends an output a handler left as it is (gr.skip()) without rebuilding its
    component; Gradio's own postprocessing does everything else."""
    if not skip_rebuilds_unchanged_outputs():
        return
    from gradio import components

    postprocess = demo.postprocess_data

    async def postprocess_data(self, block_fn, predictions, state):
        passed_over = []
        if isinstance(predictions, (list, tuple)) and len(predictions) == len(block_fn.outputs) > 1:
            predictions = list(predictions)
            for i, (block, value) in enumerate(zip(block_fn.outputs, predictions)):
                if not block.stateful and isinstance(value, dict) and value == _SKIP:
                    # Gradio passes this marker over (output None) without touching the
                    # component; the skip itself is put back below, as Gradio would send it.
                    predictions[i] = components._Keywords.FINISHED_ITERATING
                    passed_over.append(i)
        output = await postprocess(block_fn, predictions, state)
        for i in passed_over:
            output[i] = dict(_SKIP)
        return output

    demo.postprocess_data = types.MethodType(postprocess_data, demo)


def keep_state_configs() -> None:
    """A State's new value is stored as Gradio stores it (its value and time to live), without
    recomputing the State's config when the session has it already (it does not hold the value).
    Applies to every session of the process; anything but a State is Gradio's own code."""
    from gradio.state_holder import SessionState

    if getattr(SessionState.__setitem__, "_keeps_state_configs", False) or not state_set_recomputes_config():
        return  # replaced already, or not the code this was written for
    setitem = SessionState.__setitem__

    def __setitem__(self, key, value):
        block = self.blocks_config.blocks.get(key)
        if isinstance(block, gr.State) and key in self.config_values:
            self._state_ttl[key] = (block.time_to_live, datetime.datetime.now())
            self.state_data[key] = value
            return
        setitem(self, key, value)

    __setitem__._keeps_state_configs = True
    SessionState.__setitem__ = __setitem__
