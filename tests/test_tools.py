"""The tool layer: built-in tools, schema generation and checking, whitelisted execution.
Real functions throughout, no mocks."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
import zoneinfo
from pathlib import Path

import pytest
from transformers.utils import get_json_schema

from gemma4_ui.core.events import ToolCall
from gemma4_ui.tools import builtin as builtin_tools
from gemma4_ui.tools import registry as tools
from gemma4_ui.tools.builtin import calculator, convert_units, current_time, get_current_weather
from gemma4_ui.tools.registry import ToolRegistry, ToolSchemaError, default_registry

BUILTIN_NAMES = {"calculator", "convert_units", "current_time", "get_current_weather"}


def call(name: str, arguments: dict | None, **fields) -> ToolCall:
    return ToolCall(name=name, arguments=arguments, id="call_0", **fields)


# --- schemas from functions ----------------------------------------------------------


def test_weather_schema_matches_seed_003_with_enum_from_choices():
    assert get_json_schema(get_current_weather)["function"]["parameters"] == {
        "type": "object",
        "properties": {
            "location": {
                "type": "string",
                "description": 'The city and state, e.g. "San Francisco, CA" or "Tokyo, JP"',
            },
            "unit": {
                "type": "string",
                "enum": ["celsius", "fahrenheit"],
                "description": "The unit to return the temperature in.",
            },
        },
        "required": ["location"],
    }


def test_registry_schemas_leave_out_the_return_annotation():
    registry = default_registry()
    weather = registry.get("get_current_weather").schema
    assert weather["type"] == "function"
    assert set(weather["function"]) == {"name", "description", "parameters"}
    assert weather["function"]["description"] == "Gets the current weather in a given location."


def test_builtin_schemas_describe_every_argument_on_one_line():
    for spec in default_registry().specs():
        declaration = spec.schema["function"]
        assert declaration["description"] and "\n" not in declaration["description"]
        for name, argument in declaration["parameters"]["properties"].items():
            assert argument["description"], f"{spec.name}.{name} has no description"


def test_default_registry_labels_and_sources():
    specs = default_registry().specs()
    assert [spec.label for spec in specs] == [
        "Calculator",
        "Unit conversion",
        "Date & time",
        "Weather (demo, sample data)",
    ]
    assert {spec.source for spec in specs} == {"builtin"}
    assert [spec.name for spec in specs if spec.demo] == ["get_current_weather"]


# --- calculator ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("what's 17.5% of 2,340", 409.5),
        ("17.5% of 2,340", 409.5),
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("2 ** 3 ** 2", 512),
        ("-3 ** 2", -9),
        ("7 // 2 + 7 % 2", 4),
        ("10 % 3", 1),
        ("200 * 15%", 30),
        ("0.1 + 0.2", 0.3),
        ("sqrt(16) + abs(-2)", 6),
        ("round(2.567, 2)", 2.57),
        ("max(1, 234) - min(5, 3)", 231),
        ("max(1,234)", 234),  # inside a call the comma separates arguments
        ("1,234,567.5 / 2", 617283.75),
        ("log(8, 2) + log10(1000)", 6),
        ("exp(0) + sin(0) + cos(0) + tan(0)", 2),
        ("2^10", 1024),
        ("What is 6 × 7?", 42),
    ],
)
def test_calculator_results(expression, result):
    assert calculator(expression)["result"] == pytest.approx(result)


def test_calculator_reports_the_expression_as_read():
    assert calculator("what's 17.5% of 2,340") == {"expression": "17.5 / 100 * 2340", "result": 409.5}
    assert calculator("pi")["result"] == pytest.approx(3.141592653589793)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "unknown function '__import__'"),
        ("().__class__", "attribute access"),
        ("(1).__class__.__bases__", "attribute access"),
        ("open('x')", "unknown function 'open'"),
        ("x + 1", "unknown name 'x'"),
        ("[1][0]", "indexing"),
        ("1 < 2", "comparisons"),
        ("lambda: 1", "lambda"),
        ("'a' * 3", "is not a number"),
        ("True + 1", "is not a number"),
        ("abs(x=1)", "positional arguments only"),
        ("1 / 0", "division by zero"),
        ("sqrt(-1)", "sqrt()"),
        ("(-8) ** (1 / 3)", "not a real number"),
        ("1,5", "a tuple"),
        ("2 +", "could not read"),
        ("", "empty"),
    ],
)
def test_calculator_refuses_what_is_not_arithmetic(expression, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        calculator(expression)


@pytest.mark.parametrize(
    "expression", ["9**9**9", "10 ** 400", "2 ** 2 ** 2 ** 2 ** 2", "1e308 * 10", "exp(1000)", "round(1, 10 ** 9)"]
)
def test_calculator_refuses_huge_results_quickly(expression):
    started = time.perf_counter()
    with pytest.raises(ValueError):
        calculator(expression)
    assert time.perf_counter() - started < 0.5


def test_calculator_limits_length_and_nesting():
    with pytest.raises(ValueError, match="longer than"):
        calculator("1+" * 300 + "1")
    with pytest.raises(ValueError, match="nested too deeply|could not read"):
        calculator("-" * 498 + "1")


# --- unit conversion -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "from_unit", "to_unit", "result"),
    [
        (5, "km", "mi", 3.10685596119),
        (1, "mile", "kilometers", 1.609344),
        (12, "inches", "ft", 1),
        (1, "lbs", "kg", 0.45359237),
        (1, "kg", "pounds", 2.20462262185),
        (3, "cups", "mL", 709.7647095),
        (1, "gallon", "L", 3.785411784),
        (60, "mph", "km/h", 96.56064),
        (36, "kph", "m/s", 10),
        (2, "hours", "minutes", 120),
        (1, "yr", "days", 365.25),
        (1, "GiB", "MB", 1073.741824),
        (8, "bits", "bytes", 1),
        (100, "°C", "°F", 212),
        (32, "fahrenheit", "celsius", 0),
        (98.6, "degrees Fahrenheit", "C", 37),
        (0, "K", "celsius", -273.15),
        (-40, "C", "F", -40),
        (25, "Celsius", "kelvin", 298.15),
    ],
)
def test_convert_units(value, from_unit, to_unit, result):
    assert convert_units(value, from_unit, to_unit)["result"] == pytest.approx(result)


def test_convert_units_names_units_by_symbol():
    assert convert_units(5, "kilometres", "miles") == {
        "value": 5,
        "from_unit": "km",
        "to_unit": "mi",
        "result": 3.10685596119,
    }


@pytest.mark.parametrize(
    ("from_unit", "to_unit", "message"),
    [
        ("km", "kg", "cannot convert km (length) to kg (mass)"),
        ("°C", "m", "cannot convert °C (temperature) to m (length)"),
        ("furlong", "m", "unknown unit 'furlong'; known units: length:"),
    ],
)
def test_convert_units_errors(from_unit, to_unit, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        convert_units(1, from_unit, to_unit)


def test_convert_units_refuses_below_absolute_zero():
    with pytest.raises(ValueError, match="below absolute zero"):
        convert_units(-300, "celsius", "kelvin")


# --- date and time ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timezone", "name", "offset"),
    [("Asia/Tokyo", "Asia/Tokyo", "+09:00"), ("Asia/Kolkata", "Asia/Kolkata", "+05:30"), ("UTC", "UTC", "+00:00")],
)
def test_current_time_in_fixed_offset_zones(timezone, name, offset):
    before = dt.datetime.now(dt.UTC)
    now = current_time(timezone)
    after = dt.datetime.now(dt.UTC)
    moment = dt.datetime.fromisoformat(now["iso"])
    assert now["timezone"] == name and now["utc_offset"] == offset
    assert before.replace(microsecond=0) <= moment <= after
    assert now["iso"] == f"{now['date']}T{now['time']}{offset}"
    assert now["weekday"] == moment.strftime("%A")


def test_current_time_accepts_cities_any_case_and_offsets():
    paris = current_time("paris")
    assert paris["timezone"] == "Europe/Paris"
    expected = dt.datetime.now(zoneinfo.ZoneInfo("Europe/Paris")).strftime("%z")
    assert paris["utc_offset"].replace(":", "") == expected
    assert current_time("New York")["timezone"] == "America/New_York"
    assert current_time("america/new_york")["timezone"] == "America/New_York"
    assert current_time("UTC+05:30")["utc_offset"] == "+05:30"


@pytest.mark.parametrize("timezone", ["Mars/Olympus_Mons", "Springfield, XY", "../../etc/passwd", "UTC+15"])
def test_current_time_bad_zone_says_how_to_write_it(timezone):
    with pytest.raises(ValueError, match="IANA|offset"):
        current_time(timezone)


# --- weather demo ----------------------------------------------------------------------


@pytest.mark.parametrize(("written", "place"), [
    ("Oslo kindly", "Oslo"), ("Nouakchott this very minute?", "Nouakchott"), ("Port Moresby for my mum", "Port Moresby"),
    ("Las Palmas de Gran Canaria if that's ok", "Las Palmas de Gran Canaria"), ("Dar es Salaam", "Dar es Salaam"),
    ("Frankfurt am Main", "Frankfurt am Main"), ("Đà Nẵng at this hour", "Đà Nẵng"), ("Xi'an right now", "Xi'an"),
    ("lisbon today", "lisbon"), ("phnom penh", "phnom penh"), ("San Francisco, CA", "San Francisco, CA"),
    ("New york", "New york"), ("Buenos aires today", "Buenos aires"), ("Dar es salaam", "Dar es salaam"),
])
def test_the_weather_reads_the_place_in_what_follows_it(written, place):
    assert get_current_weather(written) == get_current_weather(place)
    assert get_current_weather(written)["location"] == place


def test_the_time_tool_reads_a_city_with_words_after_it():
    assert current_time("Reykjavik presently")["timezone"] == current_time("Atlantic/Reykjavik")["timezone"]


def test_weather_demo_is_deterministic_sample_data():
    tokyo = get_current_weather("Tokyo, JP")
    assert (
        tokyo == get_current_weather("Tokyo, JP") == {**get_current_weather("  tokyo,   jp "), "location": "Tokyo, JP"}
    )
    assert tokyo["note"] == "sample data" and tokyo["unit"] == "celsius"
    assert isinstance(tokyo["temperature"], int) and -10 <= tokyo["temperature"] <= 35
    assert tokyo["weather"] in {weather for weather, _, _ in builtin_tools._SAMPLE_WEATHER}
    fahrenheit = get_current_weather("Tokyo, JP", "fahrenheit")
    assert fahrenheit["temperature"] == round(tokyo["temperature"] * 9 / 5 + 32)
    cities = ["Tokyo, JP", "Paris, FR", "Lagos, NG", "Lima, PE", "Oslo, NO", "Cairo, EG", "Seoul, KR", "Quito, EC"]
    assert len({get_current_weather(city)["weather"] for city in cities}) > 1


# --- registry: whitelist, validation, execution -----------------------------------------


def test_execute_runs_an_enabled_builtin():
    result = default_registry().execute(call("calculator", {"expression": "2 + 2"}), BUILTIN_NAMES)
    assert (result.status, result.response, result.error, result.call_id) == (
        "ok",
        {"expression": "2 + 2", "result": 4},
        None,
        "call_0",
    )
    assert result.duration >= 0


def _recording_registry() -> tuple[ToolRegistry, list]:
    runs: list = []

    def record(note: str) -> str:
        """Records a note.

        Args:
            note: What to record
        """
        runs.append(note)
        return "recorded"

    registry = ToolRegistry()
    registry.register(record)
    return registry, runs


def test_whitelist_unknown_and_disabled_tools_never_run():
    registry, runs = _recording_registry()
    unknown = registry.execute(call("os.system", {"note": "x"}), {"record", "os.system"})
    disabled = registry.execute(call("record", {"note": "x"}), set())
    assert unknown.status == disabled.status == "error"
    assert unknown.error == "There is no tool named 'os.system'. Available tools: record."
    assert disabled.error == "The tool 'record' is not enabled in this conversation. No tools are available."
    assert disabled.response == {"error": disabled.error}
    assert runs == []
    assert registry.execute(call("record", {"note": "x"}), {"record"}).response == "recorded"
    assert runs == ["x"]


@pytest.mark.parametrize(
    ("tool_call", "message"),
    [
        (
            call("convert_units", {"value": "7", "from_unit": "km", "to_unit": "mi"}),
            "argument 'value' must be a number, not a string \"7\"",
        ),
        (
            call("convert_units", {"value": True, "from_unit": "km", "to_unit": "mi"}),
            "argument 'value' must be a number, not a boolean true",
        ),
        (call("calculator", {"expression": 7}), "argument 'expression' must be a string, not an integer 7"),
        (call("convert_units", {"value": 1, "from_unit": "km"}), "missing required argument 'to_unit'"),
        (call("calculator", {}), "missing required argument 'expression'"),
        (
            call("get_current_weather", {"location": "Oslo", "unit": "kelvin"}),
            'argument \'unit\' must be one of "celsius", "fahrenheit", not "kelvin"',
        ),
        (
            call("calculator", None, raw='calculator{expression:<|"|>1+', error="unterminated string"),
            "The arguments of the call to 'calculator' could not be read (unterminated string)",
        ),
    ],
)
def test_validation_messages(tool_call, message):
    registry = default_registry()
    problem = registry.validate(tool_call, BUILTIN_NAMES)
    assert problem is not None and message in problem
    result = registry.execute(tool_call, BUILTIN_NAMES)
    assert result.status == "error" and result.error == problem and result.response == {"error": problem}


def test_validation_accepts_valid_arguments_and_integers_for_numbers():
    registry = default_registry()
    assert (
        registry.validate(call("convert_units", {"value": 3, "from_unit": "km", "to_unit": "mi"}), BUILTIN_NAMES)
        is None
    )
    assert registry.validate(call("get_current_weather", {"location": "Oslo"}), BUILTIN_NAMES) is None


def test_integer_argument_rejects_a_numeric_string():
    def repeat(text: str, times: int) -> str:
        """Repeats a text.

        Args:
            text: The text
            times: How many times
        """
        return text * times

    registry = ToolRegistry()
    registry.register(repeat)
    problem = registry.validate(call("repeat", {"text": "a", "times": "7"}), {"repeat"})
    assert "argument 'times' must be an integer, not a string \"7\"" in problem


def test_optional_arguments_accept_null():
    def greet(name: str | None = None) -> str:
        """Greets someone.

        Args:
            name: Who to greet
        """
        return f"hello {name or 'you'}"

    registry = ToolRegistry()
    spec = registry.register(greet)
    assert spec.schema["function"]["parameters"]["properties"]["name"]["nullable"] is True
    assert registry.execute(call("greet", {"name": None}), {"greet"}).response == "hello you"
    assert "must be a string or null" in registry.validate(call("greet", {"name": 3}), {"greet"})


def test_additional_properties_are_refused_only_when_the_schema_says_so():
    registry = ToolRegistry()
    registry.declare(
        {
            "name": "strict_tool",
            "description": "A tool",
            "parameters": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
        }
    )
    registry.declare(
        {"name": "loose_tool", "description": "A tool", "parameters": {"type": "object", "properties": {}}}
    )
    enabled = {"strict_tool", "loose_tool"}
    assert "'b' was unexpected" in registry.validate(call("strict_tool", {"a": "x", "b": 1}), enabled)
    assert registry.validate(call("loose_tool", {"b": 1}), enabled) is None


def test_an_exception_becomes_an_error_result():
    result = default_registry().execute(call("calculator", {"expression": "1 / 0"}), BUILTIN_NAMES)
    assert result.status == "error"
    assert result.error == "ValueError: division by zero"
    assert result.response == {"error": "ValueError: division by zero"}


def test_a_hung_tool_times_out_and_is_abandoned():
    release = threading.Event()

    def hang(seconds: float) -> str:
        """Sleeps.

        Args:
            seconds: How long
        """
        release.wait(seconds)
        return "woke up"

    registry = ToolRegistry()
    registry.register(hang)
    try:
        started = time.perf_counter()
        result = registry.execute(call("hang", {"seconds": 30}), {"hang"}, timeout=0.3)
        elapsed = time.perf_counter() - started
    finally:
        release.set()
    assert result.status == "timeout"
    assert elapsed < 0.3 + 0.5
    assert result.error == "The tool 'hang' did not finish within 0.3 seconds."
    assert result.response == {"error": result.error}


def test_return_values_that_json_cannot_hold_become_text():
    moment = dt.datetime(2025, 1, 2, 3, 4, 5)

    def when() -> dict:
        """Says when."""
        return {"at": moment, "ok": True}

    def thing() -> object:
        """Returns an object."""
        return {(1, 2): "tuple keys"}

    registry = ToolRegistry()
    registry.register(when)
    registry.register(thing)
    assert registry.execute(call("when", {}), {"when"}).response == {"at": str(moment), "ok": True}
    assert registry.execute(call("thing", {}), {"thing"}).response == str({(1, 2): "tuple keys"})


def test_tools_cannot_change_the_callers_arguments():
    def scribble(items: list[str]) -> int:
        """Scribbles on its input.

        Args:
            items: Some items
        """
        items.append("scribble")
        return len(items)

    registry = ToolRegistry()
    registry.register(scribble)
    tool_call = call("scribble", {"items": ["a"]})
    assert registry.execute(tool_call, {"scribble"}).response == 2
    assert tool_call.arguments == {"items": ["a"]}


def test_a_client_tool_waits_for_the_user():
    registry = default_registry()
    registry.declare({"name": "ask_user", "description": "Ask", "parameters": {"type": "object", "properties": {}}})
    result = registry.execute(call("ask_user", {}), {"ask_user"})
    assert (result.status, result.response, result.error) == ("client", None, None)
    assert registry.execute(call("ask_user", {"x": 1}), set()).status == "error"


# --- registering and declaring ---------------------------------------------------------


def test_register_refuses_a_taken_name_and_a_function_without_a_docstring():
    registry = default_registry()
    with pytest.raises(ToolSchemaError, match="already registered"):
        registry.register(calculator)

    def undocumented(x: int) -> int:
        return x

    with pytest.raises(ToolSchemaError, match="Cannot build a schema for 'undocumented'"):
        registry.register(undocumented)


def test_register_with_a_name_and_a_hand_written_schema():
    registry = ToolRegistry()
    schema = {
        "name": "ignored",
        "description": "Adds one",
        "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
    }
    spec = registry.register(lambda x: x + 1, name="add_one", schema=schema, label="Add one")
    assert (spec.name, spec.label, spec.source) == ("add_one", "Add one", "python")
    assert spec.schema["function"]["name"] == "add_one"
    assert schema["name"] == "ignored"  # the caller's dict is not changed
    assert registry.execute(call("add_one", {"x": 41}), {"add_one"}).response == 42


OPENAI_STYLE = json.dumps(
    {
        "type": "function",
        "function": {
            "name": "get_stock_price",
            "description": "Gets the latest price of a stock.",
            "parameters": {
                "type": "object",
                "properties": {
                    "ticker": {"type": "string", "description": "The ticker, e.g. GOOG"},
                    "currency": {"type": "string", "enum": ["USD", "EUR"]},
                    "days": {"type": "integer", "minimum": 1},
                    "fields": {"type": "array", "items": {"type": "string"}},
                    "options": {
                        "type": "object",
                        "properties": {"adjusted": {"type": "boolean"}},
                        "required": ["adjusted"],
                    },
                },
                "required": ["ticker"],
            },
        },
    }
)


def test_declare_openai_style_and_bare_schemas():
    registry = ToolRegistry()
    spec = registry.declare(OPENAI_STYLE)
    assert (spec.name, spec.label, spec.source, spec.function, spec.demo) == (
        "get_stock_price",
        "get_stock_price",
        "declared",
        None,
        False,
    )
    assert spec.schema == json.loads(OPENAI_STYLE)
    bare = registry.declare({"name": "ping", "description": "Checks that the user is there."})
    assert bare.schema == {
        "type": "function",
        "function": {"name": "ping", "description": "Checks that the user is there."},
    }
    assert registry.validate(call("get_stock_price", {"ticker": "GOOG", "days": 0}), {"get_stock_price"}) == (
        "Invalid arguments for 'get_stock_price': argument 'days': 0 is less than the minimum of 1. "
        "Fix them and call the tool again."
    )


def test_declaring_a_name_again_replaces_the_earlier_declaration_in_place():
    registry = ToolRegistry()
    registry.declare({"name": "first", "description": "v1"})
    registry.declare({"name": "second", "description": "x"})
    registry.declare({"name": "first", "description": "v2"})
    assert [spec.name for spec in registry.specs()] == ["first", "second"]
    assert registry.get("first").schema["function"]["description"] == "v2"


def _properties(**properties) -> dict:
    return {"name": "t", "description": "d", "parameters": {"type": "object", "properties": properties}}


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ('{"name": "t", ', "Invalid JSON at line 1, column 15"),
        ("[1]", "A tool schema must be a JSON object, not an array"),
        ({"description": "no name"}, 'neither "function" nor "name"'),
        ({"name": "1st_tool"}, "name: '1st_tool' is not a valid function name"),
        ({"name": "get weather"}, "name: 'get weather' is not a valid function name"),
        ({"name": "a" * 65}, "is longer than 64 characters"),
        ({"name": "t", "paramters": {}}, "Unknown key(s) 'paramters'"),
        ({"name": "t", "parameters": {"type": "array"}}, "parameters: must be a JSON Schema object"),
        (_properties(unit={"type": "text"}), "parameters.properties.unit.type: 'text' is not a JSON Schema type"),
        (
            _properties(n={"type": "number", "enum": [1, 2]}),
            "parameters.properties.n.enum: Gemma shows enum only for strings",
        ),
        (
            _properties(n={"type": "string", "enum": []}),
            "parameters.properties.n.enum: must be a non-empty list of strings",
        ),
        (_properties(n={"type": ["string", "null"]}), "parameters.properties.n.type: a list of types cannot be shown"),
        (_properties(n={"anyOf": [{"type": "string"}]}), "parameters.properties.n: 'anyOf' cannot be shown to Gemma"),
        (_properties(n={"description": "untyped"}), "parameters.properties.n: missing 'type'"),
        (
            _properties(n={"type": "string", "items": {"type": "string"}}),
            "parameters.properties.n.items: only an array",
        ),
        (_properties(n={"type": "array", "items": {"type": "text"}}), "parameters.properties.n.items.type: 'text'"),
        (
            _properties(n={"type": "number", "minimum": "five"}),
            "parameters.properties.n.minimum: 'five' is not of type",
        ),
        (_properties(**{"my key": {"type": "string"}}), "'my key' is not a valid argument name"),
        (
            {"name": "t", "parameters": {"type": "object", "properties": {}, "required": ["m"]}},
            "parameters.required: 'm' is not one of the properties",
        ),
        ({"name": "calculator"}, "name: 'calculator' is already the name of the built-in tool 'Calculator'"),
    ],
)
def test_declare_errors_say_what_and_where(schema, message):
    registry = default_registry()
    with pytest.raises(ToolSchemaError) as caught:
        registry.declare(schema)
    assert message in str(caught.value)
    assert len(registry.specs()) == 4


CATASTROPHIC = "^(a+)+$"


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (_properties(s={"type": "string", "pattern": CATASTROPHIC}), "parameters.properties.s.pattern: regular expressions"),
        ({"name": "t", "parameters": {"type": "object", "patternProperties": {CATASTROPHIC: {"type": "string"}}}},
         "parameters.patternProperties: regular expressions"),
        (_properties(a={"type": "array", "items": {"type": "object", "properties": {
            "s": {"type": "string", "pattern": CATASTROPHIC}}}}),
         "parameters.properties.a.items.properties.s.pattern"),
        ({"name": "t", "parameters": {"type": "object", "additionalProperties": {"type": "string", "pattern": "x"}}},
         "parameters.additionalProperties.pattern"),
        ({"name": "t", "parameters": {"type": "object", "propertyNames": {"pattern": CATASTROPHIC}}},
         "parameters.propertyNames.pattern"),
        ({"name": "t", "parameters": {"type": "object"}, "response": {"type": "string", "pattern": CATASTROPHIC}},
         "response.pattern: regular expressions"),
    ],
)
def test_a_declared_schema_holds_no_regular_expression(schema, message):
    """jsonschema would run the pattern on the model's arguments, and "^(a+)+$" on
    "aaa...a!" takes exponential time: refused at declaration, saying which keyword."""
    registry = default_registry()
    with pytest.raises(ValueError) as caught:
        registry.declare(schema)
    assert message in str(caught.value) and "not accepted" in str(caught.value)
    with pytest.raises(ToolSchemaError, match="pattern"):
        registry.register(lambda s: s, schema=schema)
    assert len(registry.specs()) == 4


def test_a_schema_nested_too_deeply_is_refused_with_a_message():
    deep = {"type": "string"}
    for _ in range(3000):
        deep = {"type": "array", "items": deep}
    registry = default_registry()
    with pytest.raises(ToolSchemaError, match="nested too deeply"):
        registry.declare(_properties(a=deep))
    with pytest.raises(ToolSchemaError, match="nested too deeply"):
        registry.declare("[" * 100_000 + "]" * 100_000)
    assert len(registry.specs()) == 4


def test_a_property_or_value_named_pattern_is_not_a_regular_expression():
    schema = _properties(pattern={"type": "string", "description": "the pattern", "enum": ["pattern"]})
    assert default_registry().declare(schema).name == "t"


def test_argument_validation_runs_no_format_checker():
    """A "format" is an annotation only: "regex" does not compile the model's argument."""
    registry = ToolRegistry()
    registry.declare(_properties(r={"type": "string", "format": "regex"}, d={"type": "string", "format": "date"}))
    call = ToolCall(name="t", arguments={"r": "(" * 10_000 + "(a+)+$", "d": "not a date"}, raw="", id="c")
    assert registry.validate(call, {"t"}) is None


def test_schemas_follow_registry_order_and_filter_by_enabled():
    registry = default_registry()
    registry.declare(OPENAI_STYLE)
    schemas = registry.schemas(["get_stock_price", "get_current_weather", "calculator", "not_a_tool"])
    assert [schema["function"]["name"] for schema in schemas] == [
        "calculator",
        "get_current_weather",
        "get_stock_price",
    ]
    assert registry.schemas([]) == []
    schemas[0]["function"]["name"] = "changed"
    assert registry.schemas(["calculator"])[0]["function"]["name"] == "calculator"


def test_adopt_shares_checked_specs_with_a_per_session_registry():
    shared = default_registry()
    session = ToolRegistry()
    for spec in shared.specs():
        session.adopt(spec)
    session.declare({"name": "ask_user", "description": "Ask"})
    assert [spec.name for spec in session.specs()] == [*[spec.name for spec in shared.specs()], "ask_user"]
    assert shared.get("ask_user") is None
    with pytest.raises(ToolSchemaError, match="already registered"):
        session.adopt(shared.get("calculator"))


def test_remove_and_get():
    registry = default_registry()
    registry.remove("calculator")
    registry.remove("not_there")
    assert registry.get("calculator") is None
    assert [spec.name for spec in registry.specs()] == ["convert_units", "current_time", "get_current_weather"]


# --- nothing is ever evaluated -----------------------------------------------------------


def test_tool_modules_never_evaluate_code_or_reach_a_shell():
    forbidden = re.compile(r"\beval\(|\bexec\(|globals\(\)|subprocess|os\.system|__import__\(")
    for module in (tools, builtin_tools):
        source = Path(module.__file__).read_text(encoding="utf-8")
        assert not forbidden.findall(source), f"{module.__name__} contains {forbidden.findall(source)}"


# -- meeting people half-way: arithmetic in words, unit spellings, cities for zones ----------------

@pytest.mark.parametrize("expression, result", [
    ("3,217 times 48", 154416), ("What is 3,217 times 48?", 154416), ("19 minus 7", 12), ("Add 256 and 512.", 768),
    ("add 256 to 512", 768), ("12 squared", 144), ("5 cubed", 125), ("15% of 80", 12), ("15 percent of 80", 12),
    ("100 divided by 8", 12.5), ("12 multiplied by 4", 48), ("2 to the power of 10", 1024), ("7 x 8", 56),
    ("the square root of 81", 9), ("subtract 7 from 19", 12), ("multiply 6 by 7", 42), ("divide 100 by 4", 25),
    ("the sum of 3 and 4", 7), ("the product of 6 and 7", 42), ("half of 90", 45), ("twice 21", 42),
    ("twelve times seven", 84), ("three hundred and twelve plus 8", 320), ("add two and twelve", 14),
    ("a hundred times 3", 300), ("Sqrt(16) + 1", 5), ("10 mod 3", 1), ("the difference between 10 and 4", 6),
])
def test_calculator_reads_arithmetic_in_words(expression, result):
    assert calculator(expression)["result"] == result


@pytest.mark.parametrize("from_unit, to_unit, result", [
    ("miles", "kilometers", 16.09344), ("Fahrenheit", "Celsius", -12.2222222222), ("lbs", "kg", 4.5359237),
    ("kms", "mi", 6.21371192237), ("degrees F", "°C", -12.2222222222), ("celcius", "farenheit", 50),
    ("kilomters", "miles", 6.21371192237), ("hrs", "mins", 600), ("cups", "litres", 2.365882365), ("gigs", "MB", 10000),
])
def test_convert_units_knows_common_spellings_and_slips(from_unit, to_unit, result):
    assert convert_units(10, from_unit, to_unit)["result"] == pytest.approx(result)


@pytest.mark.parametrize("text, zone", [
    ("Tegucigalpa", "America/Tegucigalpa"), ("America/Tegucigalpa please", "America/Tegucigalpa"),
    ("Asia/Kathmandu now", "Asia/Kathmandu"), ("Lima, Peru", "America/Lima"), ("San Francisco", "America/Los_Angeles"),
    ("new york city", "America/New_York"), ("Mumbai", "Asia/Kolkata"), ("Wagga Wagga", "Australia/Sydney"),
    ("Paris this morning", "Europe/Paris"), ("Tokyo?", "Asia/Tokyo"),
])
def test_current_time_takes_a_city_as_well_as_a_zone_name(text, zone):
    assert current_time(text)["timezone"] == zone


def test_lenient_tools_still_refuse_what_they_cannot_read():
    with pytest.raises(ValueError, match="unknown unit"):
        convert_units(1, "parsecs of joy", "km")
    with pytest.raises(ValueError, match="unknown time zone"):
        current_time("Atlantis")
    with pytest.raises(ValueError, match="at most 100 characters"):
        current_time("Paris " * 40)
    with pytest.raises(ValueError):
        calculator("add the apples and the pears")
