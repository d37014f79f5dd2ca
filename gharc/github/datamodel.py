"""Dataclasses read from JSON objects: the base of the wire models and the listener config.

Why not pydantic: these are a few dozen flat records, and pydantic with its compiled core
and the schemas it builds for them cost about 12 MiB of RSS in every pod-mode listener
process (about a quarter of it). The rules the records need are few and are all here, in one place:

* a key is found under its wire name (``alias``), else its Python name, else one of the
  ``also`` names; unknown keys are ignored;
* ``str`` takes a string; ``int`` an integer, an integral float or a decimal string;
  ``float`` a number or a numeric string; ``bool`` a bool, 0/1 or the usual words
  (``true``, ``no``...); ``datetime`` an ISO 8601 string (Go's nanoseconds cut to
  microseconds) or Unix seconds; a ``Literal`` one of its values; a record an object (or the
  record itself); ``list[T]`` a list; ``dict[str, T]`` an object; ``T | None`` null or T;
  ``Any`` anything;
* ``Rule`` in a field's metadata adds bounds (``ge``, ``le``, ``gt``), a ``before`` hook
  that adjusts the raw value and a ``check`` that may reject the read value;
* ``NULL_IS_DEFAULT`` records read a ``null`` as a missing key, as Go's ``encoding/json``
  leaves the zero value;
* a record that cannot be read raises :class:`ValidationError` naming the key path and
  what is wrong, never the value: a malformed answer would otherwise put part of a queue
  token or a JIT config into a log line, an event or a status message.

The method names (``model_validate``, ``model_dump``, ``model_copy``) are pydantic's, which
these records used before, so their callers did not change.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Self

__all__ = ["DataModel", "Rule", "ValidationError", "parse_datetime", "to_camel"]

Loc = tuple[str | int, ...]
Read = Callable[[Any, Loc], Any]


class ValidationError(ValueError):
    """A value could not be read. ``errors()`` lists ``{"loc", "msg", "input"}`` entries;
    the text (``str()``, ``repr()``) names the keys and the problems, never an input."""

    def __init__(self, title: str, errors: list[dict[str, Any]]) -> None:
        self.title = title
        self._errors = errors
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"]) or "value"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"{title}: {where}: {first['msg']}{more}")

    def errors(self) -> list[dict[str, Any]]:
        return list(self._errors)

    def __repr__(self) -> str:
        return f"ValidationError({str(self)!r})"


class _Invalid(Exception):
    """One problem while reading; collected into a :class:`ValidationError`."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        self.errors = errors


def _fail(loc: Loc, msg: str, value: Any) -> _Invalid:
    return _Invalid([{"loc": loc, "msg": msg, "input": value}])


@dataclasses.dataclass(frozen=True)
class Rule:
    """How one field is read, beyond its type: ``field(metadata=Rule(...).meta)``."""

    alias: str | None = None
    """The wire name (read first, and written by ``model_dump(by_alias=True)``)."""
    also: tuple[str, ...] = ()
    """More names accepted when reading."""
    ge: float | None = None
    le: float | None = None
    gt: float | None = None
    before: Callable[[Any], Any] | None = None
    """Adjusts the raw value (a present one, ``None`` included) before the type is read."""
    check: Callable[[Any], Any] | None = None
    """Gets the read value; raises ``ValueError`` (its text is the message) or returns it."""
    internal: bool = False
    """Not read, not dumped: state the program sets after reading."""

    @property
    def meta(self) -> dict[str, Rule]:
        return {"rule": self}


_NO_RULE = Rule()
_TRUE = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "off", "0"})


def to_camel(name: str) -> str:
    """``runner_request_id`` -> ``runnerRequestId`` (the Actions service's field names)."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _read_str(value: Any, loc: Loc) -> str:
    if isinstance(value, str):
        return value
    raise _fail(loc, "Input should be a valid string", value)


def _number_text(text: str, kind: type[int] | type[float], loc: Loc) -> Any:
    """A number written as text (environment overrides, GitHub's odd answers)."""
    try:
        return kind(text.strip())
    except ValueError:
        name, article = ("integer", "an integer") if kind is int else ("number", "a number")
        message = f"Input should be a valid {name}, unable to parse string as {article}"
        raise _fail(loc, message, text) from None


def _read_int(value: Any, loc: Loc) -> int:
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise _fail(
            loc, "Input should be a valid integer, got a number with a fractional part", value
        )
    if isinstance(value, str):
        return int(_number_text(value, int, loc))
    raise _fail(loc, "Input should be a valid integer", value)


def _read_float(value: Any, loc: Loc) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return float(_number_text(value, float, loc))
    raise _fail(loc, "Input should be a valid number", value)


def _read_bool(value: Any, loc: Loc) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise _fail(loc, "Input should be a valid boolean", value)


def _read_datetime(value: Any, loc: Loc) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            pass
    elif isinstance(value, str):
        try:
            return parse_datetime(value)
        except ValueError:
            pass
    raise _fail(loc, "Input should be a valid datetime", value)


def parse_datetime(text: str) -> datetime:
    """An RFC 3339 / ISO 8601 time as GitHub writes it (``Z`` or an offset; Go's nanoseconds
    cut to microseconds); ``ValueError`` otherwise. gharc.github's one time parser: the
    package imports nothing of gharc, so not gharc.kube.objects.parse_time."""
    text = text.strip()
    return datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)


def _read_any(value: Any, loc: Loc) -> Any:
    return value


_SCALARS: dict[Any, Read] = {
    str: _read_str,
    int: _read_int,
    float: _read_float,
    bool: _read_bool,
    datetime: _read_datetime,
    Any: _read_any,
    object: _read_any,
}


def _reader_of(tp: Any, where: str) -> Read:
    """How to read a value of type ``tp`` (a field's resolved annotation)."""
    if tp in _SCALARS:
        return _SCALARS[tp]
    if isinstance(tp, type) and issubclass(tp, DataModel):
        model = tp

        def read_model(value: Any, loc: Loc) -> Any:
            if isinstance(value, model):
                return value
            if not isinstance(value, Mapping):
                raise _fail(loc, f"Input should be an object ({model.__name__})", value)
            return model._read(value, loc)

        return read_model
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        allowed = args
        *some, last = [repr(a) for a in allowed]
        said = f"{', '.join(some)} or {last}" if some else last

        def read_literal(value: Any, loc: Loc) -> Any:
            if value in allowed:
                return value
            raise _fail(loc, f"Input should be {said}", value)

        return read_literal
    if origin in (types.UnionType, typing.Union) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            inner = _reader_of(rest[0], where)
            return lambda value, loc: None if value is None else inner(value, loc)
    if origin is list:
        item = _reader_of(args[0], where) if args else _read_any

        def read_list(value: Any, loc: Loc) -> list[Any]:
            if not isinstance(value, list | tuple):
                raise _fail(loc, "Input should be a valid list", value)
            return [v for _, v in _read_each(enumerate(value), item, loc)]

        return read_list
    if origin is dict:
        entry = _reader_of(args[1], where) if args else _read_any

        def read_dict(value: Any, loc: Loc) -> dict[Any, Any]:
            if not isinstance(value, Mapping):
                raise _fail(loc, "Input should be a valid dictionary", value)
            return dict(_read_each(((str(k), v) for k, v in value.items()), entry, loc))

        return read_dict
    raise TypeError(f"{where}: no reading rule for the type {tp!r}")


def _read_each(
    items: Iterable[tuple[str | int, Any]], read: Read, loc: Loc
) -> list[tuple[str | int, Any]]:
    """Every item read at its own key path; the problems of all of them raised together."""
    out: list[tuple[str | int, Any]] = []
    problems: list[dict[str, Any]] = []
    for key, value in items:
        try:
            out.append((key, read(value, (*loc, key))))
        except _Invalid as err:
            problems.extend(err.errors)
    if problems:
        raise _Invalid(problems)
    return out


def _bounded(read: Read, rule: Rule) -> Read:
    """``read`` followed by the rule's bounds and check."""
    if rule.ge is None and rule.le is None and rule.gt is None and rule.check is None:
        return read
    ge, le, gt, check = rule.ge, rule.le, rule.gt, rule.check

    def read_bounded(value: Any, loc: Loc) -> Any:
        out = read(value, loc)
        if out is None:
            return out
        if ge is not None and out < ge:
            raise _fail(loc, f"Input should be greater than or equal to {ge:g}", value)
        if le is not None and out > le:
            raise _fail(loc, f"Input should be less than or equal to {le:g}", value)
        if gt is not None and out <= gt:
            raise _fail(loc, f"Input should be greater than {gt:g}", value)
        if check is not None:
            try:
                out = check(out)
            except ValueError as err:
                raise _fail(loc, f"Value error, {err}", value) from None
        return out

    return read_bounded


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    keys: tuple[str, ...]
    out: str  # the name ``model_dump(by_alias=True)`` writes
    read: Read
    before: Callable[[Any], Any] | None
    required: bool


class DataModel:
    """Base of the records: subclasses are ``@dataclass(kw_only=True)`` classes.

    ``ALIAS`` makes the wire names (``to_camel`` for the Actions service's records);
    ``NULL_IS_DEFAULT`` reads a ``null`` like a missing key.
    """

    ALIAS: ClassVar[Callable[[str], str] | None] = None
    NULL_IS_DEFAULT: ClassVar[bool] = False
    _fields_cache: ClassVar[tuple[_Field, ...] | None] = None

    @classmethod
    def _plan(cls) -> tuple[_Field, ...]:
        """The fields' reading rules, worked out once per class (on first use, so that
        importing the records costs no type resolution)."""
        plan = cls.__dict__.get("_fields_cache")
        if plan is not None:
            return plan
        hints = typing.get_type_hints(cls)
        made: list[_Field] = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            rule: Rule = f.metadata.get("rule", _NO_RULE)
            if rule.internal:
                continue
            out = rule.alias or (cls.ALIAS(f.name) if cls.ALIAS else f.name)
            keys = tuple(dict.fromkeys((out, f.name, *rule.also)))
            read = _bounded(_reader_of(hints[f.name], f"{cls.__name__}.{f.name}"), rule)
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            made.append(_Field(f.name, keys, out, read, rule.before, required))
        plan = tuple(made)
        cls._fields_cache = plan
        return plan

    @classmethod
    def _read(cls, data: Mapping[str, Any], loc: Loc) -> Self:
        values: dict[str, Any] = {}
        problems: list[dict[str, Any]] = []
        null_is_default = cls.NULL_IS_DEFAULT
        for f in cls._plan():
            for key in f.keys:
                if key in data:
                    raw = data[key]
                    break
            else:
                if f.required:
                    problems.append({"loc": (*loc, f.out), "msg": "Field required", "input": None})
                continue
            if raw is None and null_is_default:
                if f.required:
                    problems.append({"loc": (*loc, f.out), "msg": "Field required", "input": None})
                continue
            try:
                if f.before is not None:
                    raw = f.before(raw)
                values[f.name] = f.read(raw, (*loc, f.out))
            except _Invalid as err:
                problems.extend(err.errors)
        if problems:
            raise _Invalid(problems)
        return cls(**values)

    @classmethod
    def model_validate(cls, data: Any) -> Self:
        """Read a record from a JSON object; :class:`ValidationError` when it cannot be."""
        try:
            if isinstance(data, cls):
                return data
            if not isinstance(data, Mapping):
                raise _fail((), f"Input should be an object ({cls.__name__})", data)
            return cls._read(data, ())
        except _Invalid as err:
            raise ValidationError(cls.__name__, err.errors) from None

    def model_dump(self, *, by_alias: bool = False, exclude_none: bool = False) -> dict[str, Any]:
        """The record as JSON-ready data (nested records as objects, times as ISO text)."""
        out: dict[str, Any] = {}
        for f in type(self)._plan():
            value = _dump(getattr(self, f.name), by_alias, exclude_none)
            if value is None and exclude_none:
                continue
            out[f.out if by_alias else f.name] = value
        return out

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A copy with ``update``'s fields replaced (not read again)."""
        return dataclasses.replace(self, **(update or {}))  # type: ignore[type-var]


def _dump(value: Any, by_alias: bool, exclude_none: bool) -> Any:
    if isinstance(value, DataModel):
        return value.model_dump(by_alias=by_alias, exclude_none=exclude_none)
    if isinstance(value, list | tuple):
        return [_dump(v, by_alias, exclude_none) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v, by_alias, exclude_none) for k, v in value.items()}
    if isinstance(value, datetime):
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    return value
