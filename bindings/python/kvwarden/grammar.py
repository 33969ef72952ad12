"""Constrained output, as llama-cpp-python's ``LlamaGrammar``.

A ``LlamaGrammar`` holds a GBNF grammar (llama.cpp's format) or a JSON
Schema; pass it as ``grammar=`` to ``Llama.create_completion``,
``create_chat_completion`` or ``Llama.__call__`` (or the text to
``Engine.stream(grammar=..., json_schema=...)``). The engine compiles it
when the request is submitted and constrains every token to it; a
grammar or schema it cannot use raises ``InvalidArgumentError`` (a
``ValueError``) naming the line and column, or the schema path and
keyword. Unlike llama-cpp-python, a schema is not turned into GBNF in
Python: the engine converts it itself (the supported subset is
docs/GRAMMAR.md's), so an unsupported keyword is an error, never ignored.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Mapping, Optional, Union

__all__ = ["LlamaGrammar", "JSON_OBJECT_SCHEMA"]

#: The schema of ``response_format={"type": "json_object"}``: any object.
JSON_OBJECT_SCHEMA = '{"type":"object"}'


class LlamaGrammar:
    """A grammar for constrained output: GBNF text (``from_string``,
    ``from_file``) or a JSON Schema (``from_json_schema``)."""

    def __init__(self, *, gbnf: Optional[str] = None, json_schema: Optional[str] = None) -> None:
        if (gbnf is None) == (json_schema is None):
            raise ValueError("LlamaGrammar: give exactly one of gbnf and json_schema")
        for name, v in (("gbnf", gbnf), ("json_schema", json_schema)):
            if v is not None and not isinstance(v, str):
                raise TypeError(f"LlamaGrammar: {name} must be str, not {type(v).__name__}")
        self._gbnf = gbnf
        self._json_schema = json_schema

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> "LlamaGrammar":
        """A GBNF grammar (its ``root`` rule is the start). verbose is
        accepted for llama-cpp-python compatibility."""
        if not isinstance(grammar, str):
            raise TypeError(f"grammar must be str, not {type(grammar).__name__}")
        if not grammar.strip():
            raise ValueError("grammar is empty")
        return cls(gbnf=grammar)

    @classmethod
    def from_file(cls, file: Union[str, "os.PathLike[str]"], verbose: bool = True) -> "LlamaGrammar":
        """A GBNF grammar read from file."""
        with open(file, encoding="utf-8") as f:
            return cls.from_string(f.read(), verbose=verbose)

    @classmethod
    def from_json_schema(cls, json_schema: Union[str, Mapping[str, Any]], verbose: bool = True) -> "LlamaGrammar":
        """Output that is JSON valid under json_schema (JSON text, as
        llama-cpp-python takes it, or a dict)."""
        if isinstance(json_schema, Mapping):
            json_schema = json.dumps(json_schema)
        elif not isinstance(json_schema, str):
            raise TypeError(f"json_schema must be str or dict, not {type(json_schema).__name__}")
        return cls(json_schema=json_schema)

    @property
    def gbnf(self) -> Optional[str]:
        """The GBNF text, or None for a JSON Schema grammar."""
        return self._gbnf

    @property
    def json_schema(self) -> Optional[str]:
        """The JSON Schema text, or None for a GBNF grammar."""
        return self._json_schema

    def request_args(self) -> Dict[str, str]:
        """The Engine.stream keyword arguments of this grammar."""
        if self._gbnf is not None:
            return {"grammar": self._gbnf}
        return {"json_schema": self._json_schema}  # type: ignore[dict-item]

    def __repr__(self) -> str:
        kind, text = ("gbnf", self._gbnf) if self._gbnf is not None else ("json_schema", self._json_schema)
        short = text if len(text or "") <= 60 else (text or "")[:57] + "..."
        return f"LlamaGrammar({kind}={short!r})"


def grammar_for_response_format(response_format: Any) -> Optional[LlamaGrammar]:
    """The grammar of an OpenAI / llama-cpp-python response_format:
    {"type": "text"} (none), {"type": "json_object"} (any object, or
    with "schema": that schema, as llama-cpp-python) and {"type":
    "json_schema", "json_schema": {"name", "schema", "strict"}}."""
    if response_format is None:
        return None
    if not isinstance(response_format, Mapping):
        raise TypeError(f"response_format must be a dict, not {type(response_format).__name__}")
    kind = response_format.get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object":
        schema = response_format.get("schema")
        return LlamaGrammar.from_json_schema(schema if schema is not None else JSON_OBJECT_SCHEMA)
    if kind == "json_schema":
        js = response_format.get("json_schema")
        if js is None and "schema" in response_format:
            js = {"schema": response_format["schema"]}
        if not isinstance(js, Mapping):
            raise ValueError('response_format of type "json_schema" needs a "json_schema" dict '
                             'with "name" and "schema"')
        schema = js.get("schema")
        return LlamaGrammar.from_json_schema(schema if schema is not None else "{}")
    raise ValueError(f"response_format type {kind!r} is not supported (text, json_object or json_schema)")
