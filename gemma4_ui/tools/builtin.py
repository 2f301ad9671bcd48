"""Built-in tools: plain functions that work offline.

Each has type hints and a Google-style docstring, because `get_json_schema` turns those into
the declaration the model reads: the first docstring line is the tool's description (keep it
on one line: it is copied verbatim), each `Args:` entry describes an argument. A tool
reports a problem by raising ValueError with a sentence the model can act on; the registry
sends "ValueError: <sentence>" back as the tool's response.
"""

from __future__ import annotations

import ast
import datetime as dt
import difflib
import functools
import hashlib
import math
import operator
import re
import zoneinfo
from collections.abc import Callable

# --- calculator ------------------------------------------------------------------------

_MAX_EXPRESSION_LENGTH = 500
# Results beyond float range are refused: they are not useful answers, and big integer
# powers are the one way plain arithmetic could run for minutes ("9**9**9").
_MAX_MAGNITUDE = 10**308
_MAX_ROUND_DIGITS = 308
_MAX_NAME_LENGTH = 100  # a unit, a time zone or a city


def _power(base: int | float, exponent: int | float) -> int | float:
    # Estimate the size before computing: int ** int is exact and can take forever.
    if abs(base) > 1 and exponent > 0 and exponent * math.log10(abs(base)) > math.log10(_MAX_MAGNITUDE):
        raise ValueError(f"{base} ** {exponent} is too large (the limit is about 1e308)")
    return base**exponent


def _round(number: int | float, digits: int | float | None = None) -> int | float:
    if digits is not None and (not isinstance(digits, int) or abs(digits) > _MAX_ROUND_DIGITS):
        limit = _MAX_ROUND_DIGITS
        raise ValueError(f"the number of digits must be a whole number from -{limit} to {limit}")
    return round(number, digits)


# The whitelists: nothing else in an expression is evaluated.
_BINARY_OPERATORS: dict[type, Callable] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}
_UNARY_OPERATORS: dict[type, Callable] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_CONSTANTS = {"pi": math.pi, "e": math.e}
_FUNCTIONS: dict[str, Callable] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}
# Names for the syntax people most often try, so the error says what was refused.
_SYNTAX_NAMES = {
    ast.Attribute: "attribute access ('.')",
    ast.Subscript: "indexing ('[...]')",
    ast.Tuple: "a tuple (a comma outside a function call)",
    ast.Compare: "comparisons",
    ast.BoolOp: "'and' / 'or'",
    ast.Lambda: "lambda",
    ast.List: "lists",
    ast.Dict: "dicts",
}

_LEAD_IN = re.compile(r"^\s*(?:what\s*['’]?\s*s|what\s+is|calculate|compute|evaluate|how\s+much\s+is|work\s+out|"
                      r"solve)\s+", re.IGNORECASE)
_TRAILER = re.compile(r"[\s=?.!]+$")
_FUNCTION_CALL = re.compile(r"[A-Za-z_]\w*\s*\(")
# "2,340" or "1,234,567.5": groups of exactly three digits after the first comma.
_THOUSANDS = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?![\d,])")
_PERCENT_OF = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*%\s*of\b", re.IGNORECASE)
# A "%" with no operand after it is a percent sign; "10 % 3" stays a modulo.
_PERCENT = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*%(?!\s*[\w.(])")
_SYMBOLS = {"×": "*", "÷": "/", "−": "-", "^": "**"}


def calculator(expression: str) -> dict:
    """Evaluates an arithmetic expression exactly; use it for any arithmetic instead of calculating in your head.

    Args:
        expression: The expression, e.g. "(3 + 4) * 2", "sqrt(2) / 3", "2 ** 10" or "17.5% of 2,340".
            Supports + - * / // % ** and parentheses, the functions sqrt, abs, round, min, max,
            log (natural, or log(x, base)), log10, exp, sin, cos, tan (radians), and the constants pi and e.

    Returns:
        expression: The expression as it was read
        result: The value
    """
    if len(expression) > _MAX_EXPRESSION_LENGTH:
        raise ValueError(f"the expression is longer than {_MAX_EXPRESSION_LENGTH} characters")
    text = _normalize_expression(expression)
    if not text:
        raise ValueError("the expression is empty")
    try:
        tree = ast.parse(text, mode="eval")
        return {"expression": ast.unparse(tree), "result": _tidy(_evaluate(tree.body))}
    except SyntaxError as exc:
        raise ValueError(f"could not read {text!r} as arithmetic ({exc.msg})") from None
    except RecursionError:  # "-------...1": the parser and the walker both recurse
        raise ValueError("the expression is nested too deeply") from None


def _normalize_expression(expression: str) -> str:
    """Accept how people write arithmetic: a lead-in ("what's"), "×", "^", "17.5% of 2,340",
    and words ("3,217 times 48", "add 256 and 512", "the square root of 81", "twelve squared")."""
    text = _TRAILER.sub("", _LEAD_IN.sub("", expression.strip()))
    for symbol, python in _SYMBOLS.items():
        text = text.replace(symbol, python)
    # Inside a function call a comma separates arguments ("max(1,234)"), so thousands
    # separators are only unambiguous in expressions without calls.
    if not _FUNCTION_CALL.search(text):
        text = _THOUSANDS.sub(lambda match: match.group().replace(",", ""), text)
    if _A_WORD.search(text):
        text = _arithmetic_words(text)
    text = _PERCENT_OF.sub(r"(\1/100)*", text)
    return _PERCENT.sub(r"(\1/100)", text)


# Arithmetic in words. Every pattern is a fixed sequence of words around plain numbers, so
# each substitution is one linear scan, whatever the text.
_A_WORD = re.compile(r"[A-Za-z]")
_NUMBER = r"(-?\d+(?:\.\d+)?|-?\.\d+)"
_SMALL_NUMBERS = {word: value for value, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {word: 10 * (i + 2) for i, word in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_NUMBER_WORD = "|".join([*_SMALL_NUMBERS, *_TENS, *_SCALES, "a"])
# "and" joins number words only after a scale ("three hundred and twelve"; "two and twelve" is a sum).
_NUMBER_JOIN = r"(?:[\s-]+|(?<=hundred)\s+and\s+|(?<=thousand)\s+and\s+|(?<=million)\s+and\s+)"
_NUMBER_WORDS = re.compile(rf"\b(?:{_NUMBER_WORD})(?:{_NUMBER_JOIN}(?:{_NUMBER_WORD}))*\b", re.IGNORECASE)
# (pattern, replacement), applied in order: forms that wrap their operands first, then infix words.
_WORD_FORMS = [(re.compile(pattern, re.IGNORECASE), replacement) for pattern, replacement in (
    (rf"\b(?:what\s+is\s+|what's\s+)?(?:the\s+)?square\s+root\s+of\s+{_NUMBER}", r"sqrt(\1)"),
    (rf"\b(?:the\s+)?cube\s+root\s+of\s+{_NUMBER}", r"(\1)**(1/3)"),
    (rf"\b(?:the\s+)?sum\s+of\s+{_NUMBER}\s+and\s+{_NUMBER}", r"(\1 + \2)"),
    (rf"\b(?:the\s+)?product\s+of\s+{_NUMBER}\s+and\s+{_NUMBER}", r"(\1 * \2)"),
    (rf"\b(?:the\s+)?difference\s+between\s+{_NUMBER}\s+and\s+{_NUMBER}", r"(\1 - \2)"),
    (rf"\b(?:the\s+)?quotient\s+of\s+{_NUMBER}\s+and\s+{_NUMBER}", r"(\1 / \2)"),
    (rf"\badd\s+{_NUMBER}\s+(?:and|to|plus)\s+{_NUMBER}", r"(\1 + \2)"),
    (rf"\bsubtract\s+{_NUMBER}\s+from\s+{_NUMBER}", r"(\2 - \1)"),
    (rf"\btake\s+{_NUMBER}\s+(?:away\s+)?from\s+{_NUMBER}", r"(\2 - \1)"),
    (rf"\bmultiply\s+{_NUMBER}\s+(?:by|and|times|with)\s+{_NUMBER}", r"(\1 * \2)"),
    (rf"\bdivide\s+{_NUMBER}\s+(?:by|into)\s+{_NUMBER}", r"(\1 / \2)"),
    (rf"\bhalf\s+of\s+{_NUMBER}", r"(\1 / 2)"),
    (rf"\b(?:twice|double)\s+{_NUMBER}", r"(2 * \1)"),
    (rf"{_NUMBER}\s*(?:percent|per\s+cent|pct)\b", r"\1%"),
    (r"\b(?:multiplied\s+by|times)\b", "*"),
    (r"(?<=[\d)])\s*x\s*(?=[\d(])", " * "),  # "7 x 8", not the name in "x + 1"
    (r"\b(?:divided\s+by|over)\b", "/"),
    (r"\b(?:plus|added\s+to|and)\b", "+"),
    (r"\b(?:minus|less)\b", "-"),
    (r"\b(?:raised\s+)?to\s+the\s+(?:power\s+of|power)\b", "**"),
    (r"\bsquared\b", "**2"),
    (r"\bcubed\b", "**3"),
    (r"\b(?:mod|modulo)\b", "%"),
    (r"\b(?:what\s+is|what's|how\s+much\s+is|is|equals|the|please)\b", " "),
)]


def _arithmetic_words(text: str) -> str:
    """Numbers and operations written in words, as symbols ("twelve times 3" -> "12 * 3")."""
    text = _NUMBER_WORDS.sub(lambda match: _number_from_words(match.group()), text)
    for pattern, replacement in _WORD_FORMS:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


def _number_from_words(words: str) -> str:
    """'three hundred and twelve' -> '312'; a lone 'a' (as in 'a hundred') counts as one."""
    parts = [w for w in re.split(r"[\s-]+", words.lower()) if w and w != "and"]
    if parts == ["a"]:
        return words  # the article, not a number
    total, current = 0, 0
    for word in parts:
        if word in _SCALES:
            scale = _SCALES[word]
            if scale == 100:
                current = max(current, 1) * 100
            else:
                total, current = total + max(current, 1) * scale, 0
        else:
            current += 1 if word == "a" else _SMALL_NUMBERS.get(word, _TENS.get(word, 0))
    return str(total + current)


def _evaluate(node: ast.AST) -> int | float:
    """Walk the syntax tree, allowing only the nodes in the whitelists above."""
    if isinstance(node, ast.Constant):
        if type(node.value) not in (int, float):  # bool is an int subclass: refused too
            raise ValueError(f"{node.value!r} is not a number")
        return _checked(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        return _checked(_apply(_BINARY_OPERATORS[type(node.op)], left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPERATORS:
        return _UNARY_OPERATORS[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.Name):
        if node.id not in _CONSTANTS:
            raise ValueError(f"unknown name '{node.id}'; the constants are {', '.join(_CONSTANTS)}")
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call):
        return _checked(_call_function(node))
    refused = _SYNTAX_NAMES.get(type(node), type(node).__name__)
    raise ValueError(f"{refused} cannot be used; only numbers, + - * / // % **, parentheses and the listed functions")


def _call_function(node: ast.Call) -> int | float:
    name = node.func.id.lower() if isinstance(node.func, ast.Name) else None  # "Sqrt(2)" at a sentence's start
    if name not in _FUNCTIONS:
        shown = name or ast.unparse(node.func)
        raise ValueError(f"unknown function '{shown}'; the functions are {', '.join(_FUNCTIONS)}")
    if node.keywords or any(isinstance(argument, ast.Starred) for argument in node.args):
        raise ValueError(f"{name}() takes plain positional arguments only")
    arguments = [_evaluate(argument) for argument in node.args]
    return _apply(_FUNCTIONS[name], *arguments, label=f"{name}()")


def _apply(function: Callable, *arguments: int | float, label: str = "") -> int | float:
    """Run one operation, turning Python's errors into sentences about the expression."""
    prefix = f"{label}: " if label else ""
    try:
        return function(*arguments)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError(f"{prefix}the result is too large") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{prefix}{exc}") from None


def _checked(value: object) -> int | float:
    if isinstance(value, complex):
        raise ValueError("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("the result is too large or undefined")
    if isinstance(value, int) and abs(value) > _MAX_MAGNITUDE:
        raise ValueError("the result is too large (the limit is about 1e308)")
    return value


def _tidy(number: int | float) -> int | float:
    """Drop binary noise (0.1 + 0.2 -> 0.3) and write whole floats as integers (sqrt(16) -> 4)."""
    if isinstance(number, int):
        return number
    number = float(f"{number:.15g}")
    return int(number) if number.is_integer() and abs(number) < 1e15 else number


# --- unit conversion -------------------------------------------------------------------

# symbol: (quantity, size in the quantity's base unit, aliases). Bases: meter, kilogram,
# liter, meter per second, second, byte. Aliases are matched case-insensitively; a plural
# "s" is tried off as well, so "kilometers" finds "kilometer".
_LINEAR_UNITS: dict[str, tuple[str, float, tuple[str, ...]]] = {
    "mm": ("length", 0.001, ("millimeter",)),
    "cm": ("length", 0.01, ("centimeter",)),
    "m": ("length", 1.0, ("meter",)),
    "km": ("length", 1000.0, ("kilometer",)),
    "in": ("length", 0.0254, ("inch", "inches")),
    "ft": ("length", 0.3048, ("foot", "feet")),
    "yd": ("length", 0.9144, ("yard",)),
    "mi": ("length", 1609.344, ("mile",)),
    "nmi": ("length", 1852.0, ("nautical mile",)),
    "mg": ("mass", 1e-6, ("milligram",)),
    "g": ("mass", 0.001, ("gram",)),
    "kg": ("mass", 1.0, ("kilogram", "kilo")),
    "t": ("mass", 1000.0, ("tonne", "metric ton")),
    "oz": ("mass", 0.028349523125, ("ounce",)),
    "lb": ("mass", 0.45359237, ("pound",)),
    "st": ("mass", 6.35029318, ("stone",)),
    "mL": ("volume", 0.001, ("milliliter", "ml")),
    "L": ("volume", 1.0, ("liter", "l")),
    "m³": ("volume", 1000.0, ("m3", "cubic meter")),
    "tsp": ("volume", 0.00492892159375, ("teaspoon",)),
    "tbsp": ("volume", 0.01478676478125, ("tablespoon",)),
    "fl oz": ("volume", 0.0295735295625, ("fluid ounce", "floz")),
    "cup": ("volume", 0.2365882365, ("us cup",)),
    "pt": ("volume", 0.473176473, ("pint", "us pint")),
    "qt": ("volume", 0.946352946, ("quart", "us quart")),
    "gal": ("volume", 3.785411784, ("gallon", "us gallon")),
    "imp gal": ("volume", 4.54609, ("imperial gallon", "uk gallon")),
    "m/s": ("speed", 1.0, ("mps", "meter per second", "meters per second")),
    "km/h": ("speed", 1 / 3.6, ("kph", "kmh", "kilometer per hour", "kilometers per hour")),
    "mph": ("speed", 0.44704, ("mi/h", "mile per hour", "miles per hour")),
    "kn": ("speed", 1852 / 3600, ("knot", "kt")),
    "ft/s": ("speed", 0.3048, ("foot per second", "feet per second")),
    "ms": ("time", 0.001, ("millisecond",)),
    "s": ("time", 1.0, ("second", "sec")),
    "min": ("time", 60.0, ("minute",)),
    "h": ("time", 3600.0, ("hour", "hr")),
    "d": ("time", 86400.0, ("day",)),
    "wk": ("time", 604800.0, ("week",)),
    "yr": ("time", 31557600.0, ("year",)),  # a Julian year, 365.25 days
    "bit": ("data", 0.125, ()),
    "byte": ("data", 1.0, ()),
    "kB": ("data", 1e3, ("kilobyte", "kb")),
    "MB": ("data", 1e6, ("megabyte", "mb")),
    "GB": ("data", 1e9, ("gigabyte", "gb", "gig")),
    "TB": ("data", 1e12, ("terabyte", "tb")),
    "PB": ("data", 1e15, ("petabyte", "pb")),
    "KiB": ("data", 2.0**10, ("kibibyte",)),
    "MiB": ("data", 2.0**20, ("mebibyte",)),
    "GiB": ("data", 2.0**30, ("gibibyte",)),
    "TiB": ("data", 2.0**40, ("tebibyte",)),
    "kbit": ("data", 125.0, ("kilobit",)),
    "Mbit": ("data", 125e3, ("megabit",)),
    "Gbit": ("data", 125e6, ("gigabit",)),
}
# Temperatures are not proportional, so they convert through kelvin with offsets.
_TO_KELVIN: dict[str, Callable[[float], float]] = {
    "°C": lambda celsius: celsius + 273.15,
    "°F": lambda fahrenheit: (fahrenheit - 32) * 5 / 9 + 273.15,
    "K": lambda kelvin: kelvin,
}
_FROM_KELVIN: dict[str, Callable[[float], float]] = {
    "°C": lambda kelvin: kelvin - 273.15,
    "°F": lambda kelvin: (kelvin - 273.15) * 9 / 5 + 32,
    "K": lambda kelvin: kelvin,
}
_TEMPERATURE_ALIASES = {"°C": ("c", "celsius", "centigrade"), "°F": ("f", "fahrenheit"), "K": ("k", "kelvin")}


def convert_units(value: float, from_unit: str, to_unit: str) -> dict:
    """Converts a quantity between units of length, mass, volume, speed, temperature, time or data size.

    Args:
        value: The quantity to convert, in from_unit
        from_unit: The unit of value, as a symbol or a name, e.g. "km", "miles", "lb", "°F", "celsius",
            "mph", "cup", "GiB"
        to_unit: The unit to convert to, of the same kind as from_unit, e.g. "mi", "kilograms", "°C", "km/h",
            "mL", "MB"

    Returns:
        value: The quantity given
        from_unit: The unit converted from
        to_unit: The unit converted to
        result: The quantity in to_unit
    """
    source, target = _unit_symbol(from_unit), _unit_symbol(to_unit)
    source_quantity, target_quantity = _quantity_of(source), _quantity_of(target)
    if source_quantity != target_quantity:
        raise ValueError(
            f"cannot convert {source} ({source_quantity}) to {target} ({target_quantity}): "
            "they measure different things"
        )
    if source_quantity == "temperature":
        kelvin = _TO_KELVIN[source](value)
        if kelvin < 0:
            raise ValueError(f"{value} {source} is below absolute zero")
        result = _FROM_KELVIN[target](kelvin)
    else:
        result = value * _LINEAR_UNITS[source][1] / _LINEAR_UNITS[target][1]
    return {"value": value, "from_unit": source, "to_unit": target, "result": _significant(result, 12)}


@functools.lru_cache(maxsize=1)
def _unit_aliases() -> dict[str, str]:
    """Every accepted spelling, lower-cased, mapped to its symbol."""
    aliases: dict[str, str] = {}
    for symbol, (_, _, names) in _LINEAR_UNITS.items():
        aliases.update({name.lower(): symbol for name in (symbol, *names)})
    for symbol, names in _TEMPERATURE_ALIASES.items():
        aliases.update({name: symbol for name in names})
    return aliases


# Misspellings common enough to name; other slips are caught by the closest-spelling match.
_MISSPELLINGS = {"celcius": "celsius", "farenheit": "fahrenheit", "fahrenheight": "fahrenheit",
                 "farenheight": "fahrenheit", "faranheit": "fahrenheit", "kilometter": "kilometer",
                 "kilogramme": "kilogram", "gramme": "gram", "tonn": "tonne", "lbs.": "lb", "oz.": "oz"}


def _unit_symbol(unit: str) -> str:
    if len(unit) > _MAX_NAME_LENGTH:
        raise ValueError(f"a unit name is at most {_MAX_NAME_LENGTH} characters")
    text = " ".join(unit.lower().replace("°", "").replace("º", "").split()).strip(" .")
    text = re.sub(r"^(?:deg(?:ree)?s?|in)\s+", "", text).replace("metre", "meter").replace("litre", "liter")
    text = _MISSPELLINGS.get(text, text)
    aliases = _unit_aliases()
    symbol = aliases.get(text) or (aliases.get(text[:-1]) if text.endswith("s") else None)
    if symbol is None and len(text) >= 5:  # a slip of the keyboard: "kilomters", "gallns"
        close = difflib.get_close_matches(text, [a for a in aliases if len(a) >= 4], n=1, cutoff=0.84)
        symbol = aliases[close[0]] if close else None
    if symbol is None:
        raise ValueError(f"unknown unit {unit!r}; known units: {_known_units()}")
    return symbol


def _quantity_of(symbol: str) -> str:
    return "temperature" if symbol in _TO_KELVIN else _LINEAR_UNITS[symbol][0]


def _known_units() -> str:
    by_quantity: dict[str, list[str]] = {}
    for symbol in (*_LINEAR_UNITS, *_TO_KELVIN):
        by_quantity.setdefault(_quantity_of(symbol), []).append(symbol)
    return "; ".join(f"{quantity}: {', '.join(symbols)}" for quantity, symbols in by_quantity.items())


def _significant(number: float, digits: int) -> int | float:
    rounded = float(f"{number:.{digits}g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 1e15 else rounded


# --- date and time ---------------------------------------------------------------------

_UTC_NAMES = {"utc", "gmt", "z", "zulu"}
_UTC_OFFSET = re.compile(r"(?:utc|gmt)?\s*([+-])\s*(\d{1,2})(?::?(\d{2}))?", re.IGNORECASE)


def current_time(timezone: str) -> dict:
    """Gets the current date and time in a time zone; use it whenever the answer depends on the date or time.

    Args:
        timezone: An IANA time zone name such as "Europe/Paris", "America/New_York" or "Asia/Tokyo";
            "UTC", a city that names a zone ("Paris") or an offset ("UTC+05:30") also work

    Returns:
        timezone: The time zone used
        iso: The date and time in ISO 8601 format
        date: The date, YYYY-MM-DD
        time: The time, HH:MM:SS (24-hour clock)
        weekday: The day of the week
        utc_offset: The offset from UTC, e.g. +02:00
    """
    if len(timezone) > _MAX_NAME_LENGTH:
        raise ValueError(f"a time zone or city name is at most {_MAX_NAME_LENGTH} characters")
    name, zone = _resolve_time_zone(timezone)
    now = dt.datetime.now(zone)
    offset = now.strftime("%z")
    return {
        "timezone": name,
        "iso": now.isoformat(timespec="seconds"),
        "date": now.strftime("%Y-%m-%d"),
        "time": now.strftime("%H:%M:%S"),
        "weekday": now.strftime("%A"),
        "utc_offset": f"{offset[:3]}:{offset[3:]}",
    }


# Cities people ask about that have no zone of their own name: each keeps its country's zone.
_CITY_ZONES = {
    "america/los_angeles": ("san francisco", "san diego", "seattle", "portland", "las vegas", "san jose",
                            "sacramento", "vancouver"),
    "america/new_york": ("new york city", "nyc", "boston", "washington", "washington dc", "washington d.c.",
                         "philadelphia", "miami", "atlanta", "pittsburgh", "baltimore", "orlando", "montreal",
                         "ottawa", "toronto"),
    "america/chicago": ("houston", "dallas", "austin", "san antonio", "new orleans", "minneapolis",
                        "kansas city", "st. louis", "st louis", "nashville", "memphis"),
    "america/denver": ("salt lake city", "albuquerque", "calgary", "edmonton"),
    "america/sao_paulo": ("rio de janeiro", "rio", "brasilia", "brasília", "porto alegre"),
    "america/argentina/buenos_aires": ("córdoba", "rosario"),
    "europe/paris": ("lyon", "marseille", "nice", "toulouse", "bordeaux"),
    "europe/berlin": ("munich", "münchen", "hamburg", "frankfurt", "cologne", "köln", "stuttgart", "düsseldorf"),
    "europe/madrid": ("barcelona", "valencia", "seville", "sevilla", "bilbao"),
    "europe/rome": ("milan", "milano", "naples", "napoli", "florence", "firenze", "venice", "venezia", "turin"),
    "europe/london": ("manchester", "birmingham", "liverpool", "edinburgh", "glasgow", "leeds", "bristol",
                      "cardiff", "oxford", "cambridge"),
    "europe/amsterdam": ("rotterdam", "the hague", "utrecht", "eindhoven"),
    "europe/zurich": ("geneva", "genève", "basel", "bern", "lausanne"),
    "europe/warsaw": ("kraków", "krakow", "gdańsk", "gdansk", "wrocław", "wroclaw", "łódź", "lodz"),
    "europe/moscow": ("saint petersburg", "st. petersburg", "st petersburg", "kazan"),
    "europe/istanbul": ("ankara", "izmir", "antalya"),
    "asia/shanghai": ("beijing", "peking", "shenzhen", "guangzhou", "chengdu", "wuhan", "xi'an", "hangzhou",
                      "nanjing", "tianjin", "chongqing"),
    "asia/kolkata": ("mumbai", "bombay", "delhi", "new delhi", "bangalore", "bengaluru", "chennai", "madras",
                     "hyderabad", "pune", "ahmedabad", "calcutta", "goa"),
    "asia/tokyo": ("osaka", "kyoto", "yokohama", "nagoya", "sapporo", "fukuoka", "kobe", "hiroshima"),
    "asia/seoul": ("busan", "incheon", "daegu"),
    "asia/dubai": ("abu dhabi", "sharjah"),
    "asia/riyadh": ("jeddah", "mecca", "medina"),
    "asia/jerusalem": ("tel aviv", "haifa"),
    "asia/ho_chi_minh": ("saigon", "hanoi", "da nang", "đà nẵng"),
    "asia/jakarta": ("bandung", "surabaya", "bali", "denpasar"),
    "asia/karachi": ("lahore", "islamabad"),
    "australia/sydney": ("canberra", "newcastle", "wagga wagga"),
    "australia/brisbane": ("gold coast", "cairns"),
    "australia/darwin": ("alice springs",),
    "pacific/auckland": ("wellington", "christchurch", "queenstown"),
    "africa/johannesburg": ("cape town", "durban", "pretoria"),
    "africa/lagos": ("abuja", "ibadan"),
    "africa/nairobi": ("mombasa",),
    "africa/cairo": ("alexandria", "giza"),
}
# Words a time question puts after the place ("Asia/Kathmandu now", "Lima please").
_TRAILING_WORDS = re.compile(
    r"(?:[\s,]+(?:right|now|today|tonight|currently|please|pls|thanks|thank|you|at|the|moment|this|morning|"
    r"afternoon|evening|for|me|time|local|there|exactly))+[\s?.!]*$", re.IGNORECASE)


def place_name(text: str) -> str:
    """The place in what was written after it ("Oslo right now", "Port Moresby kindly",
    "Nuuk presently?"): the words of time and politeness a question puts after the place, and,
    in a name written with capitals, the lower-case words after its last capitalised one
    ("Dar es Salaam" keeps its particles; a name typed all in lower case, or one the time zone
    tables know, keeps its words)."""
    bare = _TRAILING_WORDS.sub("", text.strip().strip("?.!,;:")).strip("?.!,;: ")
    if _is_known_city(bare):  # "New york", "Dar es salaam": a city the zone tables name, as written
        return bare
    words = bare.split()
    capitalised = [i for i, word in enumerate(words) if word[:1].isupper()]
    if capitalised and all(word.islower() for word in words[capitalised[-1] + 1:]):
        words = words[: capitalised[-1] + 1]
    return " ".join(words).rstrip(",;:") or text.strip()


def _resolve_time_zone(text: str) -> tuple[str, dt.tzinfo]:
    """(name, zone) for an IANA name (any case), UTC, a fixed offset or a city with its own zone
    (or one of `_CITY_ZONES`), also with words after it ("Asia/Kathmandu now") or a country
    ("Lima, Peru"). User text only ever selects from the installed zone names; it is never used
    as a path."""
    text = text.strip()
    bare = text.strip("?.!")
    for candidate in dict.fromkeys((bare, place_name(bare), bare.split(",")[0])):
        if candidate and candidate != text:
            try:
                return _resolve_time_zone_exactly(candidate)
            except ValueError:
                continue
    return _resolve_time_zone_exactly(text)


def _resolve_time_zone_exactly(text: str) -> tuple[str, dt.tzinfo]:
    key = "_".join(text.strip().split()).lower()
    if key in _UTC_NAMES:
        return "UTC", dt.UTC
    offset = _UTC_OFFSET.fullmatch(text.strip())
    if offset:
        return _fixed_offset(*offset.groups())
    zones = _zones_by_key()
    if key in zones:
        return zones[key], zoneinfo.ZoneInfo(zones[key])
    if key in _zones_by_city():
        name = _zones_by_city()[key]
        return name, zoneinfo.ZoneInfo(name)
    if key in _other_cities() and _other_cities()[key].lower() in zones:
        name = zones[_other_cities()[key].lower()]
        return name, zoneinfo.ZoneInfo(name)
    if not zones:
        raise ValueError("no time zone data is installed (pip install tzdata); only UTC and offsets work")
    raise ValueError(
        f"unknown time zone {text!r}; write an IANA name such as 'Europe/Paris', 'America/New_York' or "
        "'Asia/Tokyo', a city that names a zone such as 'Paris', 'UTC', or an offset such as 'UTC+05:30'"
    )


def _fixed_offset(sign: str, hours: str, minutes: str | None) -> tuple[str, dt.tzinfo]:
    delta = dt.timedelta(hours=int(hours), minutes=int(minutes or 0))
    if delta > dt.timedelta(hours=14) or int(minutes or 0) >= 60:
        raise ValueError(f"UTC{sign}{hours}:{minutes or '00'} is not a valid UTC offset (at most 14:00 either way)")
    name = f"UTC{sign}{int(hours):02d}:{int(minutes or 0):02d}"
    return name, dt.timezone(-delta if sign == "-" else delta, name)


@functools.lru_cache(maxsize=1)
def _zones_by_key() -> dict[str, str]:
    return {name.lower(): name for name in zoneinfo.available_timezones()}


@functools.lru_cache(maxsize=1)
def _other_cities() -> dict[str, str]:
    return {"_".join(city.split()): zone for zone, cities in _CITY_ZONES.items() for city in cities}


def _is_known_city(text: str) -> bool:
    key = "_".join(text.split()).lower()
    return key in _zones_by_city() or key in _other_cities()


@functools.lru_cache(maxsize=1)
def _zones_by_city() -> dict[str, str]:
    """'paris' -> 'Europe/Paris'. Sorted so that when a city appears twice (old names kept
    as links, e.g. America/Buenos_Aires and America/Argentina/Buenos_Aires) the choice is
    stable; such duplicates are the same zone."""
    cities: dict[str, str] = {}
    for name in sorted(zoneinfo.available_timezones()):
        if "/" in name and not name.startswith("Etc/"):
            cities.setdefault(name.rsplit("/", 1)[1].lower(), name)
    return cities


# --- weather (demo) --------------------------------------------------------------------

# (weather, lowest °C, highest °C): the temperature is drawn within the weather's range,
# so the sample never says "snow, 30 degrees".
_SAMPLE_WEATHER = (
    ("sunny", 14, 33),
    ("partly cloudy", 9, 27),
    ("cloudy", 4, 21),
    ("light rain", 6, 19),
    ("thunderstorms", 19, 31),
    ("fog", 1, 13),
    ("snow", -9, 1),
)
_TEMPERATURE_UNITS = ("celsius", "fahrenheit")


def get_current_weather(location: str, unit: str = "celsius") -> dict:
    """
    Gets the current weather in a given location.

    Args:
        location: The city and state, e.g. "San Francisco, CA" or "Tokyo, JP"
        unit: The unit to return the temperature in. (choices: ["celsius", "fahrenheit"])

    Returns:
        temperature: The current temperature in the given location
        weather: The current weather in the given location
    """
    # A demo: no network. The numbers are SAMPLE data derived from the location's name, so
    # the same place always gets the same answer and conversations are reproducible.
    if unit not in _TEMPERATURE_UNITS:
        raise ValueError(f"unit must be one of {', '.join(_TEMPERATURE_UNITS)}, not {unit!r}")
    if len(location) > _MAX_NAME_LENGTH:
        raise ValueError(f"the location is longer than {_MAX_NAME_LENGTH} characters")
    location = place_name(location)
    digest = hashlib.sha256(" ".join(location.lower().split()).encode("utf-8")).digest()
    weather, lowest, highest = _SAMPLE_WEATHER[digest[0] % len(_SAMPLE_WEATHER)]
    celsius = lowest + digest[1] % (highest - lowest + 1)
    temperature = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32)
    return {"temperature": temperature, "weather": weather, "unit": unit, "location": location, "note": "sample data"}
