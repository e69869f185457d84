"""An AWM app's tools, read from its OpenAPI schema the way fastapi-mcp exposes routes as MCP tools.

Each operation becomes a tool named by its ``operationId``; its arguments are the path and query
parameters plus the fields of a JSON request body, with ``$ref``s inlined so that every tool
schema stands alone. :class:`Route` remembers where each argument goes when the tool is called.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...tools import Tool

_METHODS = ("get", "post", "put", "patch", "delete")
_MAX_DEPTH = 12


@dataclass(frozen=True)
class Route:
    """Where a tool's arguments go in the HTTP request."""

    method: str
    path: str
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    body_params: tuple[str, ...]
    #: The argument holding the whole body when the body is not an object (e.g. a list).
    body_arg: str | None = None

    @property
    def has_body(self) -> bool:
        """True when the operation takes a JSON body."""
        return bool(self.body_params) or self.body_arg is not None

    def request(self, arguments: Mapping[str, Any]) -> tuple[str, str, dict[str, Any], Any]:
        """``(method, path, query, body)`` for a call with ``arguments``."""
        path = self.path
        for name in self.path_params:
            path = path.replace("{" + name + "}", urllib.parse.quote(str(arguments.get(name, "")), safe=""))
        query = {k: arguments[k] for k in self.query_params if k in arguments and arguments[k] is not None}
        if self.body_arg is not None:
            body = arguments.get(self.body_arg)
        else:
            body = {k: arguments[k] for k in self.body_params if k in arguments}
        return self.method.upper(), path, query, body


def _inline(schema: Any, components: Mapping[str, Any], depth: int = 0) -> Any:
    if isinstance(schema, list):
        return [_inline(s, components, depth) for s in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        target = components.get(ref.rsplit("/", 1)[1])
        if target is None or depth >= _MAX_DEPTH:
            return {"type": "object"}
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return _inline(merged, components, depth + 1)
    # Drop pydantic's "title" annotations (noise for the model), not properties that are named "title".
    return {k: _inline(v, components, depth) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}


def tools_from_openapi(openapi: Mapping[str, Any]) -> tuple[list[Tool], dict[str, Route]]:
    """The tools of an app (in path order, then method order) and the route of each tool."""
    components = (openapi.get("components") or {}).get("schemas") or {}
    tools: list[Tool] = []
    routes: dict[str, Route] = {}
    for path, item in (openapi.get("paths") or {}).items():
        for method in _METHODS:
            op = (item or {}).get(method)
            if not isinstance(op, dict) or not op.get("operationId") or op["operationId"] in routes:
                continue
            properties: dict[str, Any] = {}
            required: list[str] = []
            located: dict[str, list[str]] = {"path": [], "query": []}
            for param in op.get("parameters") or []:
                where, name = param.get("in"), param.get("name")
                if where not in located or not name:
                    continue
                prop = _inline(param.get("schema") or {}, components)
                if param.get("description"):
                    prop = {**prop, "description": param["description"]}
                properties[name] = prop
                located[where].append(name)
                if param.get("required") or where == "path":
                    required.append(name)
            body_params: list[str] = []
            body_arg = None
            content = ((op.get("requestBody") or {}).get("content") or {}).get("application/json")
            if content is not None:
                body = _inline(content.get("schema") or {}, components)
                if body.get("type", "object") == "object" and isinstance(body.get("properties"), dict):
                    for name, prop in body["properties"].items():
                        properties[name] = prop
                        body_params.append(name)
                    required += [r for r in body.get("required") or [] if r in body["properties"]]
                else:
                    body_arg = "body"
                    properties[body_arg] = body
                    if (op.get("requestBody") or {}).get("required"):
                        required.append(body_arg)
            description = "\n\n".join(p for p in (op.get("summary"), op.get("description")) if p)
            parameters: dict[str, Any] = {"type": "object", "properties": properties}
            if required:
                parameters["required"] = list(dict.fromkeys(required))
            name = op["operationId"]
            tools.append(Tool(name, description, parameters))
            routes[name] = Route(method, path, tuple(located["path"]), tuple(located["query"]), tuple(body_params), body_arg)
    return tools, routes
