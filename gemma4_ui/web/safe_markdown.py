"""Untrusted text made safe for the Chatbot's markdown renderer: it still reads as markdown
(emphasis, lists, tables, links, code), but nothing in it can become live markup.

Gradio's own sanitiser lets SVG links through (`<svg><a href="javascript:...">`), and a
model's reply, a tool's result or a loaded file can hold anything, so this does not rely on
it. It works by allow-list rather than by spotting bad input:

- outside code, every `<` and `&` is written as an entity, so no tag, comment or entity
  (which could decode into a tag or a `javascript:` URL) can form, whatever the input;
- code is passed verbatim only where the renderer is certain to treat it as code: fenced
  blocks are re-emitted with a fence longer than any backtick run inside them, after a
  blank line, so nothing in them can close the fence or continue an earlier block; inline
  code that holds markup characters becomes a `<code>` element of entities;
- links keep working, but the schemes that run code (`javascript:`, `data:`...) are broken
  by a zero-width space, and images become links, so no reply loads a remote URL on its own
  (a classic way to leak a conversation).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

ZERO_WIDTH_SPACE = "\u200b"

_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_BACKTICKS = re.compile(r"`+")
# A backslash run is only matched from its first backslash: a run followed by neither `<`,
# `&` nor `![` would otherwise be retried from each of its positions (quadratic).
_ESCAPED_MARKUP = re.compile(r"(?<!\\)(\\*)([<&])")
_IMAGE = re.compile(r"(?<!\\)(\\*)!\[")
# Schemes a browser runs or renders as a document. Each is broken only where a URL could
# start (the colon is followed by something), so "Data: ..." in prose is left alone.
_UNSAFE_SCHEME = re.compile(r"(?i)(javascript|vbscript|livescript|data)(\s*\\?:)(?=\S)")
_SCHEME_BEFORE_CODE = re.compile(_UNSAFE_SCHEME.pattern.removesuffix(r"(?=\S)") + r"(?=\S|$)")
_MARKED_SCHEME = re.compile(r"(?i)(?<=[jvld])" + ZERO_WIDTH_SPACE + r"(?=(avascript|bscript|ivescript|ata)\s*\\?:)")
_INFO_WORD = re.compile(r"[\w+#.-]+")
# Fences that would make the renderer run a library over untrusted input.
_EXECUTED_LANGUAGES = {"mermaid"}
# Inside a `<code>` element every character that markdown or the LaTeX renderer reads.
_CODE_ENTITIES = {c: f"&#{ord(c)};" for c in "\\`*_~[]()!|$#+-.{}:"}


def safe_markdown(text: str) -> str:
    """Markdown that renders like `text` and cannot execute anything."""
    # Leading blank lines show nothing; dropped, a leading fence's own blank line (below) is
    # the only one, and the text the editor restores (unescape_markdown) shows the same.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\n").split("\n")
    out: list[str] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        opened = _FENCE_OPEN.match(lines[i])
        if opened and not (opened[2][0] == "`" and "`" in opened[3]):
            end = _fence_end(lines, i + 1, opened[2])
            indent = len(opened[1])
            body = [_dedent(line, indent) for line in lines[i + 1:end]]
            out.extend(_escape_prose(line) for line in prose)
            prose = []
            # The fence brings its own blank lines around it: one the text had there is
            # dropped, so that the restored text (unescape_markdown) shows just the same.
            if out and out[-1] == "":
                out.pop()
            out.append(_fenced(body, _language(opened[3])))
            i = end + 1
            if i < len(lines) and lines[i] == "":
                i += 1
            continue
        prose.append(lines[i])
        i += 1
    out.extend(_escape_prose(line) for line in prose)
    # A leading fence keeps its blank line: text put before the result on the same line
    # (a "⚠️ " prefix, say) then cannot turn the fence into prose.
    return "\n".join(out).rstrip("\n")


def code_block(text: str, language: str = "") -> str:
    """`text` as one fenced code block that nothing inside it can close."""
    return _fenced(text.replace("\r\n", "\n").split("\n"), language).strip("\n")


def literal(text: str) -> str:
    """One line of text shown exactly as written (a tool name in a title, say): what
    markdown would read is escaped; an underscore inside a word (`get_weather`) reads as
    text already, and stays as it is so the value stays readable."""
    one_line = " ".join(text.split())
    out = []
    for k, c in enumerate(one_line):
        if c in "<>&\"'":
            out.append(html.escape(c))
        elif c == "_" and 0 < k < len(one_line) - 1 and one_line[k - 1].isalnum() and one_line[k + 1].isalnum():
            out.append(c)
        elif c.isascii() and not c.isalnum() and not c.isspace():
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def toast_text(text: str) -> str:
    """Gradio shows toast messages as HTML through the same sanitiser: plain text only."""
    return html.escape(str(text), quote=False)


def _fence_end(lines: list[str], start: int, fence: str) -> int:
    """Index of the closing fence line (same character, at least as long), or len(lines)."""
    closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    for j in range(start, len(lines)):
        if closing.match(lines[j]):
            return j
    return len(lines)


def _dedent(line: str, indent: int) -> str:
    stripped = len(line) - len(line.lstrip(" "))
    return line[min(indent, stripped):]


def _language(info: str) -> str:
    word = _INFO_WORD.match(info.strip())
    language = word.group(0) if word else ""
    return "text" if language.lower() in _EXECUTED_LANGUAGES else language


def _fenced(body: list[str], language: str) -> str:
    longest = max((len(run) for line in body for run in _BACKTICKS.findall(line)), default=0)
    fence = "`" * max(3, longest + 1)
    # Blank lines around: the fence can neither be read as part of an earlier paragraph,
    # list or quote, nor glue what follows to itself.
    return "\n" + fence + language + "\n" + "\n".join(body) + ("\n" if body else "") + fence + "\n"


def _escape_prose(line: str) -> str:
    """One line outside fenced code: code spans kept, markup characters escaped around them."""
    out: list[str] = []
    position = 0
    for start, end, run in _code_spans(line):
        # A scheme just before a code span is a scheme too: `[x](javascript:`...`)` is a link.
        out.append(_escape_text(line[position:start], before_code=True))
        content = line[start + run:end - run]
        if _UNSAFE_SCHEME.search(content) or any(c in content for c in "<&") or "![" in content:
            out.append("<code>" + "".join(_CODE_ENTITIES.get(c) or html.escape(c) for c in _span_text(content))
                       + "</code>")
        else:
            out.append(line[start:end])
        position = end
    out.append(_escape_text(line[position:]))
    return "".join(out)


def _code_spans(line: str) -> list[tuple[int, int, int]]:
    """(start, end, backtick count) of the code spans in one line: a run of n backticks up to
    the next run of exactly n (CommonMark)."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(line)]
    # The next run of the same length, for each run: looked up, not searched for, so that
    # many runs that close nothing do not make the line quadratic.
    next_same: list[int | None] = [None] * len(runs)
    last_of_length: dict[int, int] = {}
    for j in range(len(runs) - 1, -1, -1):
        length = runs[j][1] - runs[j][0]
        next_same[j] = last_of_length.get(length)
        last_of_length[length] = j
    spans, k = [], 0
    while k < len(runs):
        start, stop = runs[k]
        length = stop - start
        closer = next_same[k]
        if closer is None or (start > 0 and line[start - 1] == "\\"):
            k += 1
            continue
        spans.append((start, runs[closer][1], length))
        k = closer + 1
    return spans


def _span_text(content: str) -> str:
    """What a code span shows: one leading and trailing space go when both are there."""
    if len(content) >= 2 and content[0] == content[-1] == " " and content.strip():
        return content[1:-1]
    return content


def _escape_text(text: str, before_code: bool = False) -> str:
    def markup(match: re.Match) -> str:
        slashes = match[1]
        if len(slashes) % 2:  # `\<` already meant a literal `<`: the entity says the same
            slashes = slashes[:-1]
        return slashes + ("&lt;" if match[2] == "<" else "&amp;")

    def image(match: re.Match) -> str:
        slashes = match[1]
        return match[0] if len(slashes) % 2 else slashes + "&#33;["

    text = _ESCAPED_MARKUP.sub(markup, text)
    text = _IMAGE.sub(image, text)
    scheme = _SCHEME_BEFORE_CODE if before_code else _UNSAFE_SCHEME
    return scheme.sub(lambda m: m[1][0] + ZERO_WIDTH_SPACE + m[1][1:] + m[2], text)


def _replace_code_elements(text: str, replace: Callable[[str], str],
                           prose: Callable[[str], str] = lambda part: part) -> str:
    """Each `<code>` element of a line replaced by `replace(its content)`, and the text
    between them by `prose(it)`: what `re.sub(r"<code>(.*?)</code>", ...)` does, by a scan,
    as that pattern retries from every `<code>` that has no close on its line, which is
    quadratic."""
    out, position, search, close = [], 0, 0, -1
    while (start := text.find("<code>", search)) >= 0:
        if close < start + 6:
            close = text.find("</code>", start + 6)
            if close < 0:
                break
        line_end = text.find("\n", start, close)
        if line_end >= 0:  # `.` stops at a newline: no element starts before it
            search = line_end + 1
            continue
        out += [prose(text[position:start]), replace(text[start + 6:close])]
        position = search = close + 7
    out.append(prose(text[position:]))
    return "".join(out)


def unescape_markdown(shown: str) -> str:
    """Undo `safe_markdown` for text the user edits in place (the editor shows what the chat
    shows): entities back to characters, the added marks removed. Fenced code is passed as
    it is (safe_markdown left it verbatim), as is what a `<code>` element restores."""
    def code(content: str) -> str:
        text = html.unescape(content)
        longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
        ticks = "`" * (longest + 1)
        pad = " " if text.startswith("`") or text.endswith("`") else ""
        return f"{ticks}{pad}{text}{pad}{ticks}"

    def prose(text: str) -> str:
        text = text.replace("&#33;[", "![")
        text = re.sub(r"&(lt|amp);", lambda m: "<" if m[1] == "lt" else "&", text)
        return _MARKED_SCHEME.sub("", text)

    lines = shown.split("\n")
    out: list[str] = []
    prose_lines: list[str] = []
    i = 0
    while i < len(lines):
        opened = _FENCE_OPEN.match(lines[i])
        if opened and not (opened[2][0] == "`" and "`" in opened[3]):
            end = _fence_end(lines, i + 1, opened[2])
            if prose_lines:
                out.append(_replace_code_elements("\n".join(prose_lines), code, prose))
            prose_lines = []
            out.append("\n".join(lines[i:end + 1]))
            i = end + 1
            continue
        prose_lines.append(lines[i])
        i += 1
    if prose_lines:
        out.append(_replace_code_elements("\n".join(prose_lines), code, prose))
    return "\n".join(out)
