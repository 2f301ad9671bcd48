"""The tool layer: a whitelisted registry of functions the model may call.

Nothing outside the registry ever runs. A call from the model is checked in this order:
its name must be registered *and* enabled, its arguments must have parsed, and they must
validate against the tool's JSON Schema (Draft 2020-12). Only then is the function called,
with the arguments as keyword arguments, on a worker thread with a time limit. Arguments are
data: they never reach an evaluator, a shell or a namespace lookup.

Schemas are kept OpenAI-style (`{"type": "function", "function": {...}}`), which is what
`apply_chat_template(tools=...)` and OpenAI-compatible servers both take. Every schema is
also checked against the subset that Gemma 4's chat template can render (see
`docs/gemma4-protocol.md`, Tools): a schema the model cannot read is refused up front rather
than silently shown wrong.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from transformers.utils import get_json_schema

from gemma4_ui.core.events import ToolCall, ToolResult
from gemma4_ui.tools import builtin

# OpenAI's rule for function names, plus dots (our stream parser accepts them too).
_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_MAX_FUNCTION_NAME_LENGTH = 64
# Gemma writes argument keys bare (`location:<|"|>Tokyo<|"|>`), so they must be identifiers.
_PROPERTY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_FUNCTION_KEYS = {"name", "description", "parameters", "response", "strict"}
_JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")
# Gemma's template renders a property from `type` alone; these would be dropped from the
# prompt, so the model would never learn the real type.
_UNRENDERABLE_KEYWORDS = ("anyOf", "oneOf", "allOf", "not", "$ref", "if", "prefixItems")
# A schema's regular expressions would run on every call's arguments, and Python's `re` can
# take exponential time on a pattern like "^(a+)+$": a declared schema holds none.
_REGEX_KEYWORDS = ("pattern", "patternProperties")
# Keywords whose values are data, not schemas: a key named "pattern" inside them is a value.
_DATA_KEYWORDS = {"enum", "const", "default", "examples", "required", "dependentRequired", "type", "description",
                  "title", "$comment", "format", "nullable"}
# Keywords whose values map names to schemas: the names are not keywords.
_SCHEMA_MAPS = {"properties", "$defs", "definitions", "dependentSchemas"}

_SOURCE_WORDS = {"builtin": "built-in", "python": "Python"}
_TYPE_PHRASES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


_TOO_DEEP = "The schema is nested too deeply (more levels than Python's recursion limit allows)"


class ToolSchemaError(ValueError):
    """A schema that cannot be used; the message is shown to the user verbatim."""


@dataclass
class ToolSpec:
    name: str
    schema: dict  # OpenAI-style {"type": "function", "function": {...}}
    function: Callable | None  # None: a client tool, whose result the user supplies in the UI
    label: str  # short human label for a tools panel
    source: str  # "builtin" | "python" | "declared"
    demo: bool = False  # returns sample data (the weather demo); the UI says so


class ToolRegistry:
    """Tools by name, in registration order."""

    def __init__(self) -> None:
        self._specs: dict[str, ToolSpec] = {}

    def register(
        self,
        function: Callable,
        *,
        name: str | None = None,
        label: str | None = None,
        demo: bool = False,
        schema: dict | None = None,
        source: str = "python",
    ) -> ToolSpec:
        """Register a Python function. Its schema comes from `get_json_schema` (type hints and
        a Google-style docstring) unless `schema` is given. `source` is "python", or
        "builtin" for the tools `default_registry` ships."""
        if not callable(function):
            raise TypeError(f"register() needs a callable, got {type(function).__name__}")
        if source not in ("builtin", "python"):
            raise ValueError(f"source must be 'builtin' or 'python', not {source!r}")
        declaration = _declaration_of(schema if schema is not None else _schema_of_function(function))
        if name is not None:
            declaration["name"] = name
        _check_declaration(declaration)
        if declaration["name"] in self._specs:
            raise ToolSchemaError(f"name: a tool named '{declaration['name']}' is already registered")
        spec = ToolSpec(
            name=declaration["name"],
            schema={"type": "function", "function": declaration},
            function=function,
            label=label or _label_from_name(declaration["name"]),
            source=source,
            demo=demo,
        )
        self._specs[spec.name] = spec
        return spec

    def declare(self, schema: dict | str) -> ToolSpec:
        """Add a client tool from a user-pasted JSON schema (text or dict), OpenAI-style or
        bare `{"name", "description", "parameters"}`. Declaring a name again replaces the
        earlier declaration (the user edited it); names of registered functions are refused."""
        declaration = _declaration_of(_parse_json(schema) if isinstance(schema, str) else schema)
        _check_declaration(declaration)
        existing = self._specs.get(declaration["name"])
        if existing is not None and existing.source != "declared":
            raise ToolSchemaError(
                f"name: '{existing.name}' is already the name of the {_SOURCE_WORDS[existing.source]} tool "
                f"'{existing.label}'; choose another name"
            )
        spec = ToolSpec(
            name=declaration["name"],
            schema={"type": "function", "function": declaration},
            function=None,
            label=declaration["name"],
            source="declared",
        )
        self._specs[spec.name] = spec
        return spec

    def adopt(self, spec: ToolSpec) -> ToolSpec:
        """Add a spec that another registry already checked (e.g. the shared built-ins, into
        a per-session registry). The spec object is shared, not copied."""
        if spec.name in self._specs:
            raise ToolSchemaError(f"name: a tool named '{spec.name}' is already registered")
        self._specs[spec.name] = spec
        return spec

    def remove(self, name: str) -> None:
        """Forget a tool; does nothing if there is none by that name."""
        self._specs.pop(name, None)

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def specs(self) -> list[ToolSpec]:
        return list(self._specs.values())

    def schemas(self, enabled: Iterable[str]) -> list[dict]:
        """OpenAI-style schemas of the enabled tools, in registration order (copies)."""
        enabled = set(enabled)
        return [copy.deepcopy(spec.schema) for spec in self._specs.values() if spec.name in enabled]

    def validate(self, call: ToolCall, enabled: set[str]) -> str | None:
        """None when the call may run, else a sentence saying what is wrong, for the model."""
        spec = self._specs.get(call.name)
        if spec is None or call.name not in enabled:
            return _unavailable_tool_message(call.name, spec is not None, self._enabled_names(enabled))
        if call.arguments is None:
            reason = call.error or "they are not an argument object"
            return (
                f"The arguments of the call to '{call.name}' could not be read ({reason}). "
                f"Call '{call.name}' again with well-formed arguments."
            )
        problems = _argument_problems(spec.schema["function"], call.arguments)
        if problems:
            return f"Invalid arguments for '{call.name}': {'; '.join(problems)}. Fix them and call the tool again."
        return None

    def execute(self, call: ToolCall, enabled: set[str], timeout: float = 10.0) -> ToolResult:
        """Validate the call, then run it. A client tool is not run: its result has status
        "client" and the UI asks the user for the response.

        The function runs on a daemon thread and is given `timeout` seconds. Python cannot
        stop a thread, so a tool that overruns is abandoned: it keeps running in the
        background until it returns (its result is then discarded), and being a daemon it
        does not keep the app from exiting. A return value that is not JSON-serialisable
        is converted with str() (only the offending parts, where possible)."""
        problem = self.validate(call, enabled)
        if problem is not None:
            return _failure(call, "error", problem, duration=0.0)
        spec = self._specs[call.name]
        if spec.function is None:
            return ToolResult(name=call.name, call_id=call.id, status="client", response=None, duration=0.0)

        started = time.perf_counter()
        # A copy, so a tool that mutates its arguments cannot change the call shown in the UI.
        outcome = _run_with_time_limit(spec.function, copy.deepcopy(call.arguments), timeout, call.name)
        duration = time.perf_counter() - started
        if "exception" in outcome:
            exception = outcome["exception"]
            return _failure(call, "error", f"{type(exception).__name__}: {exception}", duration)
        if "value" not in outcome:
            return _failure(
                call, "timeout", f"The tool '{call.name}' did not finish within {timeout:g} seconds.", duration
            )
        return ToolResult(
            name=call.name, call_id=call.id, status="ok", response=_json_safe(outcome["value"]), duration=duration
        )

    def _enabled_names(self, enabled: set[str]) -> list[str]:
        return [name for name in self._specs if name in enabled]


def default_registry() -> ToolRegistry:
    """A fresh registry holding the built-in tools."""
    registry = ToolRegistry()
    registry.register(builtin.calculator, label="Calculator", source="builtin")
    registry.register(builtin.convert_units, label="Unit conversion", source="builtin")
    registry.register(builtin.current_time, label="Date & time", source="builtin")
    registry.register(
        builtin.get_current_weather, label="Weather (demo, sample data)", demo=True, source="builtin"
    )
    return registry


# --- schemas ---------------------------------------------------------------------------


def _schema_of_function(function: Callable) -> dict:
    try:
        schema = get_json_schema(function)
    except Exception as exc:  # transformers raises its own TypeHint/Docstring parsing errors
        raise ToolSchemaError(
            f"Cannot build a schema for '{getattr(function, '__name__', function)}': {exc} "
            "Add type hints and a Google-style docstring, or pass schema=... by hand."
        ) from exc
    # get_json_schema puts the return annotation under "return". Gemma's template only
    # declares a "response", and OpenAI servers reject unknown keys; the model never needs
    # it to call the tool, so it is left out.
    schema["function"].pop("return", None)
    return schema


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolSchemaError(f"Invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from exc
    except RecursionError:
        raise ToolSchemaError(_TOO_DEEP) from None


def _declaration_of(schema: Any) -> dict:
    """The inner `{"name", "description", "parameters", ...}` of an OpenAI-style or bare
    schema, as a copy."""
    if not isinstance(schema, dict):
        raise ToolSchemaError(f"A tool schema must be a JSON object, not {_json_type_of(schema)}")
    if schema.get("type") == "function" and "function" in schema:
        if set(schema) != {"type", "function"}:
            extra = ", ".join(sorted(set(schema) - {"type", "function"}))
            raise ToolSchemaError(f"Unexpected key(s) next to 'function': {extra}")
        schema = schema["function"]
        if not isinstance(schema, dict):
            raise ToolSchemaError("function: must be a JSON object with 'name', 'description' and 'parameters'")
    elif "name" not in schema:
        raise ToolSchemaError(
            'Expected {"type": "function", "function": {...}} or {"name": ..., "description": ..., '
            '"parameters": {...}}; this object has neither "function" nor "name"'
        )
    try:
        return copy.deepcopy(schema)
    except RecursionError:
        raise ToolSchemaError(_TOO_DEEP) from None


def _check_declaration(declaration: dict) -> None:
    try:
        _check_declaration_parts(declaration)
    except RecursionError:  # every check walks the schema recursively
        raise ToolSchemaError(_TOO_DEEP) from None


def _check_declaration_parts(declaration: dict) -> None:
    unknown = sorted(set(declaration) - _FUNCTION_KEYS)
    if unknown:
        raise ToolSchemaError(
            f"Unknown key(s) {', '.join(map(repr, unknown))}; a function has {', '.join(sorted(_FUNCTION_KEYS))}"
        )
    _check_function_name(declaration.get("name"))
    if not isinstance(declaration.get("description", ""), str):
        raise ToolSchemaError("description: must be a string")
    if "parameters" in declaration:
        parameters = declaration["parameters"]
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            raise ToolSchemaError(
                'parameters: must be a JSON Schema object, i.e. {"type": "object", "properties": {...}}'
            )
        _check_no_regex(parameters, "parameters")
        _check_renderable(parameters, "parameters")
        _check_meta_schema(parameters, "parameters")
    if "response" in declaration:
        if not isinstance(declaration["response"], dict):
            raise ToolSchemaError("response: must be a JSON Schema (an object)")
        _check_no_regex(declaration["response"], "response")
        _check_meta_schema(declaration["response"], "response")


def _check_function_name(name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise ToolSchemaError("name: a tool needs a name (a non-empty string)")
    if len(name) > _MAX_FUNCTION_NAME_LENGTH:
        raise ToolSchemaError(f"name: '{name}' is longer than {_MAX_FUNCTION_NAME_LENGTH} characters")
    if not _FUNCTION_NAME.fullmatch(name):
        raise ToolSchemaError(
            f"name: '{name}' is not a valid function name (use letters, digits, '_', '.' or '-', "
            "starting with a letter or '_')"
        )


def _check_renderable(schema: Any, path: str) -> None:
    """Refuse what Gemma's declaration format cannot show: one `type` per property, `enum`
    only on strings, `items` only on arrays, `properties`/`required` only on objects."""
    if not isinstance(schema, dict):
        raise ToolSchemaError(f"{path}: must be a JSON Schema (an object), not {_json_type_of(schema)}")
    for keyword in _UNRENDERABLE_KEYWORDS:
        if keyword in schema:
            raise ToolSchemaError(f"{path}: '{keyword}' cannot be shown to Gemma; give this value a single 'type'")
    kind = schema.get("type")
    if kind is None:
        raise ToolSchemaError(f"{path}: missing 'type' (one of {', '.join(_JSON_TYPES)})")
    if isinstance(kind, list):
        raise ToolSchemaError(
            f'{path}.type: a list of types cannot be shown to Gemma; use one type (and "nullable": true to allow null)'
        )
    if kind not in _JSON_TYPES:
        raise ToolSchemaError(f"{path}.type: {kind!r} is not a JSON Schema type (use one of {', '.join(_JSON_TYPES)})")
    if not isinstance(schema.get("description", ""), str):
        raise ToolSchemaError(f"{path}.description: must be a string")
    if not isinstance(schema.get("nullable", False), bool):
        raise ToolSchemaError(f"{path}.nullable: must be true or false")
    if "enum" in schema:
        _check_enum(schema["enum"], kind, f"{path}.enum")
    if "items" in schema:
        if kind != "array":
            raise ToolSchemaError(f"{path}.items: only an array has items; this value's type is {kind!r}")
        _check_renderable(schema["items"], f"{path}.items")
    if "properties" in schema or "required" in schema:
        if kind != "object":
            raise ToolSchemaError(
                f"{path}: only an object has 'properties' or 'required'; this value's type is {kind!r}"
            )
        _check_properties(schema.get("properties", {}), schema.get("required", []), path)


def _check_no_regex(schema: Any, path: str) -> None:
    """Refuse a regular expression anywhere in `schema`, however deeply nested."""
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            _check_no_regex(item, f"{path}[{index}]")
        return
    if not isinstance(schema, dict):
        return
    for keyword in _REGEX_KEYWORDS:
        if keyword in schema:
            raise ToolSchemaError(
                f"{path}.{keyword}: regular expressions are not accepted in a declared tool's schema "
                "(one can take the server minutes to check); describe the format in 'description' instead"
            )
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, item in value.items():
                _check_no_regex(item, f"{path}.{key}.{name}")
        elif key not in _DATA_KEYWORDS:
            _check_no_regex(value, f"{path}.{key}")


def _check_enum(values: Any, kind: str, path: str) -> None:
    if kind != "string":
        raise ToolSchemaError(f"{path}: Gemma shows enum only for strings; this value's type is {kind!r}")
    if not isinstance(values, list) or not values or not all(isinstance(value, str) for value in values):
        raise ToolSchemaError(f"{path}: must be a non-empty list of strings")


def _check_properties(properties: Any, required: Any, path: str) -> None:
    if not isinstance(properties, dict):
        raise ToolSchemaError(f"{path}.properties: must be an object mapping names to schemas")
    for name, schema in properties.items():
        if not _PROPERTY_NAME.fullmatch(name):
            raise ToolSchemaError(
                f"{path}.properties: {name!r} is not a valid argument name (letters, digits and '_', "
                "starting with a letter or '_')"
            )
        _check_renderable(schema, f"{path}.properties.{name}")
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise ToolSchemaError(f"{path}.required: must be a list of argument names")
    for name in required:
        if name not in properties:
            raise ToolSchemaError(f"{path}.required: {name!r} is not one of the properties")


def _check_meta_schema(schema: dict, path: str) -> None:
    """Everything else (`minimum`, `pattern`, ...) must still be valid JSON Schema."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ToolSchemaError(f"{_dotted(path, exc.absolute_path)}: {exc.message}") from exc


def _label_from_name(name: str) -> str:
    return name.replace("_", " ").strip().capitalize() or name


# --- calls -----------------------------------------------------------------------------


def _unavailable_tool_message(name: str, registered: bool, available: list[str]) -> str:
    if registered:
        reason = f"The tool '{name}' is not enabled in this conversation."
    else:
        reason = f"There is no tool named '{name}'."
    choices = f"Available tools: {', '.join(available)}." if available else "No tools are available."
    return f"{reason} {choices}"


def _argument_problems(declaration: dict, arguments: dict) -> list[str]:
    # No format_checker: "format" stays an annotation, so no argument is ever compiled as a
    # regular expression ("format": "regex") or run through another checker.
    validator = Draft202012Validator(_nullable_as_null_type(declaration.get("parameters", {"type": "object"})))
    errors = sorted(validator.iter_errors(arguments), key=lambda error: list(map(str, error.absolute_path)))
    # dict.fromkeys: keep order, drop repeats (one "missing" sentence per missing argument)
    return list(dict.fromkeys(_describe_argument_error(error) for error in errors))


def _nullable_as_null_type(schema: Any) -> Any:
    """`"nullable": true` (what get_json_schema writes for Optional[...]) is not JSON Schema;
    spell it as a type that also allows null, so validation accepts None."""
    if not isinstance(schema, dict):
        return schema
    schema = dict(schema)
    if schema.get("nullable") is True and isinstance(schema.get("type"), str):
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
    if isinstance(schema.get("properties"), dict):
        schema["properties"] = {name: _nullable_as_null_type(value) for name, value in schema["properties"].items()}
    if "items" in schema:
        schema["items"] = _nullable_as_null_type(schema["items"])
    return schema


def _describe_argument_error(error: ValidationError) -> str:
    where = f"argument '{_dotted('', error.absolute_path)}'" if error.absolute_path else "the arguments"
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        return f"missing required argument{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}"
    if error.validator == "type":
        expected = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        wanted = " or ".join(_TYPE_PHRASES.get(kind, kind) for kind in expected)
        return f"{where} must be {wanted}, not {_json_type_of(error.instance)} {_json_text(error.instance)}"
    if error.validator == "enum":
        choices = ", ".join(_json_text(value) for value in error.validator_value)
        return f"{where} must be one of {choices}, not {_json_text(error.instance)}"
    return f"{where}: {error.message}"


def _run_with_time_limit(function: Callable, arguments: dict, timeout: float, name: str) -> dict:
    """{"value": ...} or {"exception": ...}; empty if the function overran `timeout`."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = function(**arguments)
        except BaseException as exception:  # a thread's exception would otherwise be lost
            outcome["exception"] = exception

    worker = threading.Thread(target=run, name=f"tool-{name}", daemon=True)
    worker.start()
    worker.join(timeout)
    # An abandoned worker may still write into `outcome` later; hand back a snapshot.
    return dict(outcome) if not worker.is_alive() else {}


def _json_safe(value: Any) -> Any:
    """The value as JSON would carry it; what JSON cannot hold becomes its str()."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):  # e.g. dict keys that are tuples
        return str(value)


def _failure(call: ToolCall, status: str, message: str, duration: float) -> ToolResult:
    return ToolResult(
        name=call.name, call_id=call.id, status=status, response={"error": message}, duration=duration, error=message
    )


# --- small helpers ---------------------------------------------------------------------


def _dotted(prefix: str, path: Iterable[Any]) -> str:
    """'parameters' + ['properties', 'unit', 'type'] -> 'parameters.properties.unit.type';
    list indices are written [i]."""
    text = prefix
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _json_type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    phrases = ((int, "an integer"), (float, "a number"), (str, "a string"), (list, "an array"), (dict, "an object"))
    return next((phrase for python_type, phrase in phrases if isinstance(value, python_type)), type(value).__name__)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
