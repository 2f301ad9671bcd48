"""The conversation as a tree of alternatives: Retry and Edit keep every earlier version.

Each message keeps its alternatives (its siblings: the versions of that place in the chat) and
each node remembers which of its children the chat last went on with. The active path, from
the root through the chosen children, is the `Conversation` the rest of the app consumes
(the prompt, the inspector, the counts, the engines); nothing else knows about the tree.

The handlers settle each turn into the tree (`settle`): the turns the active path already
has are brought up to date in place (a reply that streamed, a tool answered), a retry or an
edit forks (`fork_at`): a new sibling at that place, chosen. Choosing another sibling
(`choose`) makes the active path go on with that sibling's last-chosen continuation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gemma4_ui.core.conversation import Conversation, Turn


class BranchError(ValueError):
    """A branch that does not exist was asked for; the message says what exists."""


@dataclass(eq=False)
class Node:
    turn: Turn | None  # None at the root only
    children: list[Node] = field(default_factory=list)
    chosen: int | None = None  # the child the chat goes on with; None: the active path ends here

    @property
    def next(self) -> Node | None:
        return self.children[self.chosen] if self.chosen is not None else None


class Branches:
    """One user's conversation tree. The active path is always the conversation shown."""

    def __init__(self, root: Node | None = None):
        self.root = root if root is not None else Node(None)

    @classmethod
    def linear(cls, conversation: Conversation) -> Branches:
        tree = cls()
        tree.settle(conversation)
        return tree

    def path(self) -> list[Node]:
        nodes, node = [], self.root.next
        while node is not None:
            nodes.append(node)
            node = node.next
        return nodes

    def conversation(self) -> Conversation:
        return Conversation([node.turn for node in self.path()])

    def holds(self, conversation: Conversation) -> bool:
        """Whether the active path is `conversation` (the same turn objects): the tree is the
        one the chat shows, and not one from before the app let the conversation go."""
        path = self.path()
        return len(path) == len(conversation.turns) and all(n.turn is t for n, t in zip(path, conversation.turns))

    def settle(self, conversation: Conversation, fork_at: int | None = None) -> None:
        """Make `conversation` the active path. The places it shares with the path are updated
        in place; at `fork_at` (a retry or an edit of that turn) it becomes a new, chosen
        sibling, and the version it replaces stays as an alternative. When `conversation`
        ends before the path did (Undo), the message it ends before is dropped, with what
        followed it; its siblings stay, and the next message joins them."""
        parent = self.root
        for index, turn in enumerate(conversation.turns):
            child = parent.next
            if child is None or index == fork_at:
                child = Node(turn)
                parent.children.append(child)
                parent.chosen = len(parent.children) - 1
            else:
                child.turn = turn
            parent = child
        if parent.chosen is None:
            return
        if fork_at is None or fork_at > len(conversation.turns):
            del parent.children[parent.chosen]
        # A fork that produced nothing keeps the version it was to replace, out of sight
        # until the next message joins it as a sibling.
        parent.chosen = None

    def versions(self) -> list[tuple[int, int]]:
        """(which, of how many) alternatives, for each turn of the active path."""
        out, parent = [], self.root
        while parent.chosen is not None:
            out.append((parent.chosen, len(parent.children)))
            parent = parent.children[parent.chosen]
        return out

    def choose(self, position: int, index: int) -> Conversation:
        """Show alternative `index` of the turn at `position` of the active path, with the
        continuation last chosen under it; returns the new active path."""
        path = self.path()
        if not 0 <= position < len(path):
            raise BranchError(f"There is no message {position}: the chat has {len(path)} (counted from 0).")
        parent = path[position - 1] if position else self.root
        if not 0 <= index < len(parent.children):
            raise BranchError(f"Message {position} has {len(parent.children)} versions (counted from 0); "
                              f"there is no version {index}.")
        parent.chosen = index
        return self.conversation()

    def forks(self) -> list[int]:
        """The places of the active path that have more than one version."""
        return [position for position, (_, count) in enumerate(self.versions()) if count > 1]

    def nodes(self) -> list[tuple[Node | None, Node]]:
        """Every node but the root, depth first in sibling order, with its parent (None: the root)."""
        out: list[tuple[Node | None, Node]] = []
        stack = [(None, child) for child in reversed(self.root.children)]
        while stack:
            parent, node = stack.pop()
            out.append((parent, node))
            stack.extend((node, child) for child in reversed(node.children))
        return out
