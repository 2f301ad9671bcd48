"""The conversation tree: Retry and Edit keep every earlier version, switching shows a
version's whole continuation, Undo drops what it takes back."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemma4_ui.core.branches import BranchError, Branches
from gemma4_ui.core.conversation import AssistantTurn, Conversation, UserTurn


def texts(conversation: Conversation) -> list[str]:
    return [t.text if isinstance(t, UserTurn) else t.content for t in conversation.turns]


def send(conversation: Conversation, question: str, answer: str) -> Conversation:
    return Conversation(conversation.turns + [UserTurn(question), AssistantTurn(content=answer)])


def test_retry_keeps_every_answer_and_switching_shows_each():
    tree = Branches()
    first = send(Conversation(), "Hi", "a1")
    tree.settle(first)
    for answer in ("a2", "a3"):  # Retry: the reply forks
        retried = Conversation(tree.conversation().turns[:1] + [AssistantTurn(content=answer)])
        tree.settle(retried, fork_at=1)
    assert texts(tree.conversation()) == ["Hi", "a3"] and tree.versions() == [(0, 1), (2, 3)]
    assert texts(tree.choose(1, 0)) == ["Hi", "a1"]
    assert texts(tree.choose(1, 1)) == ["Hi", "a2"] and tree.forks() == [1]


def test_an_edit_forks_the_question_and_the_first_branch_comes_back_whole():
    tree = Branches()
    tree.settle(send(send(Conversation(), "Q1", "A1"), "Q2", "A2"))
    edited = send(Conversation(tree.conversation().turns[:0]), "Q1 edited", "B1")
    tree.settle(edited, fork_at=0)
    assert texts(tree.conversation()) == ["Q1 edited", "B1"] and tree.versions()[0] == (1, 2)
    tree.settle(send(tree.conversation(), "Q2b", "B2"))  # the next message continues the branch shown
    assert texts(tree.choose(0, 0)) == ["Q1", "A1", "Q2", "A2"]  # the first branch, its whole continuation
    assert texts(tree.choose(0, 1)) == ["Q1 edited", "B1", "Q2b", "B2"]  # the last-chosen continuation


def test_settling_the_same_turn_updates_it_in_place():
    """A streamed reply, a client tool answered: the same place, not a new version."""
    tree = Branches()
    tree.settle(send(Conversation(), "Hi", "partial"))
    tree.settle(Conversation(tree.conversation().turns[:1] + [AssistantTurn(content="whole")]))
    assert texts(tree.conversation()) == ["Hi", "whole"] and tree.versions() == [(0, 1), (0, 1)]


def test_undo_drops_the_message_and_keeps_its_siblings_for_the_next():
    tree = Branches()
    tree.settle(send(send(Conversation(), "Q1", "A1"), "Q2", "A2"))
    tree.settle(send(Conversation(tree.conversation().turns[:2]), "Q2 edited", "B2"), fork_at=2)
    tree.settle(Conversation(tree.conversation().turns[:2]))  # Undo of "Q2 edited"
    assert texts(tree.conversation()) == ["Q1", "A1"]
    tree.settle(send(tree.conversation(), "Q3", "A3"))
    assert tree.versions()[2] == (1, 2) and texts(tree.choose(2, 0)) == ["Q1", "A1", "Q2", "A2"]


def test_a_fork_that_produced_nothing_keeps_the_version_it_was_to_replace():
    tree = Branches()
    tree.settle(send(Conversation(), "Hi", "a1"))
    tree.settle(Conversation(tree.conversation().turns[:1]), fork_at=1)  # the retry failed at once
    assert texts(tree.conversation()) == ["Hi"]
    tree.settle(Conversation(tree.conversation().turns + [AssistantTurn(content="a2")]))
    assert tree.versions()[1] == (1, 2) and texts(tree.choose(1, 0)) == ["Hi", "a1"]


def test_a_branch_that_does_not_exist_is_refused_with_what_exists():
    tree = Branches.linear(send(Conversation(), "Hi", "a1"))
    with pytest.raises(BranchError, match="there is no version 3"):
        tree.choose(1, 3)
    with pytest.raises(BranchError, match="no message 5"):
        tree.choose(5, 0)
    assert texts(tree.conversation()) == ["Hi", "a1"]


def test_holds_tells_the_conversation_shown_from_another():
    conversation = send(Conversation(), "Hi", "a1")
    tree = Branches.linear(conversation)
    assert tree.holds(conversation) and not tree.holds(send(Conversation(), "Hi", "a1"))


# -- properties -------------------------------------------------------------------------------------

ACTIONS = st.lists(st.tuples(st.sampled_from(["send", "retry", "edit", "undo", "choose"]),
                             st.integers(0, 20), st.integers(0, 5)), max_size=30)


@settings(max_examples=200, deadline=timedelta(milliseconds=500), suppress_health_check=[HealthCheck.too_slow])
@given(ACTIONS)
def test_every_version_stays_reachable_and_the_path_is_what_was_settled(actions):
    """Whatever the user does, the active path is the conversation last settled or chosen,
    every version made by a retry or an edit stays in the tree, and the counts agree."""
    tree, made, answers = Branches(), 0, set()
    for kind, where, which in actions:
        conversation = tree.conversation()
        users = [i for i, t in enumerate(conversation.turns) if isinstance(t, UserTurn)]
        if kind == "send" or not users:
            made += 2
            expected = send(conversation, f"q{made}", f"a{made}")
            tree.settle(expected)
            answers.add(f"a{made}")
        elif kind == "retry":
            made += 1
            cut = users[-1] + 1
            expected = Conversation(conversation.turns[:cut] + [AssistantTurn(content=f"a{made}")])
            tree.settle(expected, fork_at=cut)
            answers.add(f"a{made}")
        elif kind == "edit":
            made += 2
            cut = users[where % len(users)]
            expected = send(Conversation(conversation.turns[:cut]), f"q{made}", f"a{made}")
            tree.settle(expected, fork_at=cut)
            answers.add(f"a{made}")
        elif kind == "undo":
            expected = Conversation(conversation.turns[: users[-1]])
            tree.settle(expected)
        else:
            position = where % len(conversation.turns)
            count = tree.versions()[position][1]
            expected = tree.choose(position, which % count)
        assert texts(tree.conversation()) == texts(expected)
        assert [count for _, count in tree.versions()] == [
            len((tree.path()[i - 1] if i else tree.root).children) for i in range(len(tree.path()))]
    kept = {node.turn.content for _, node in tree.nodes() if isinstance(node.turn, AssistantTurn)}
    if not any(kind == "undo" for kind, _, _ in actions):  # nothing was taken back: every answer is kept
        assert kept == answers
