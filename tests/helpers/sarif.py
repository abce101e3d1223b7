"""SARIF 2.1.0 (the OASIS standard code scanning reads), as far as dokimi writes it: a JSON Schema of the
objects a scan's SARIF holds, each with the standard's required properties, its closed set of properties
(every SARIF object refuses a property it does not define, except a property bag) and its enumerations.

Written from the standard's schema (sarif-schema-2.1.0.json), not copied: only the objects dokimi emits are
spelt out, so an object dokimi starts to write has to be added here before a test accepts it.
"""

from __future__ import annotations

from typing import Any

import jsonschema


def _object(properties: dict[str, Any], required: list[str] | None = None, **more: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        **({"required": required} if required else {}),
        **more,
    }


_BAG = {"$ref": "#/definitions/propertyBag"}
_MESSAGE = {"$ref": "#/definitions/message"}
_TEXT = {"$ref": "#/definitions/multiformatMessageString"}
_STR = {"type": "string"}

SARIF_2_1_0: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    **_object(
        {
            "$schema": _STR,
            "version": {"enum": ["2.1.0"]},
            "runs": {"type": "array", "items": {"$ref": "#/definitions/run"}},
            "properties": _BAG,
        },
        ["version", "runs"],
    ),
    "definitions": {
        "propertyBag": {
            "type": "object",
            "properties": {"tags": {"type": "array", "uniqueItems": True, "items": _STR}},
        },
        "message": _object(
            {"text": _STR, "markdown": _STR, "id": _STR, "arguments": {"type": "array"}, "properties": _BAG},
            anyOf=[{"required": ["text"]}, {"required": ["id"]}],
        ),
        "multiformatMessageString": _object({"text": _STR, "markdown": _STR, "properties": _BAG}, ["text"]),
        "run": _object(
            {
                "tool": {"$ref": "#/definitions/tool"},
                "results": {"type": "array", "items": {"$ref": "#/definitions/result"}},
                "originalUriBaseIds": {
                    "type": "object",
                    "additionalProperties": {"$ref": "#/definitions/artifactLocation"},
                },
                "properties": _BAG,
            },
            ["tool"],
        ),
        "tool": _object(
            {"driver": {"$ref": "#/definitions/toolComponent"}, "properties": _BAG},
            ["driver"],
        ),
        "toolComponent": _object(
            {
                "name": _STR,
                "version": _STR,
                "semanticVersion": _STR,
                "informationUri": _STR,
                "rules": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"$ref": "#/definitions/reportingDescriptor"},
                },
                "properties": _BAG,
            },
            ["name"],
        ),
        "reportingDescriptor": _object(
            {
                "id": _STR,
                "name": _STR,
                "shortDescription": _TEXT,
                "fullDescription": _TEXT,
                "help": _TEXT,
                "helpUri": _STR,
                "properties": _BAG,
            },
            ["id"],
        ),
        "result": _object(
            {
                "ruleId": _STR,
                "ruleIndex": {"type": "integer", "minimum": -1},
                "level": {"enum": ["none", "note", "warning", "error"]},
                "kind": {"enum": ["notApplicable", "pass", "fail", "review", "open", "informational"]},
                "message": _MESSAGE,
                "locations": {"type": "array", "items": {"$ref": "#/definitions/location"}},
                "partialFingerprints": {"type": "object", "additionalProperties": _STR},
                "fingerprints": {"type": "object", "additionalProperties": _STR},
                "suppressions": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"$ref": "#/definitions/suppression"},
                },
                "properties": _BAG,
            },
            ["message"],
        ),
        "location": _object(
            {
                "id": {"type": "integer", "minimum": -1},
                "physicalLocation": {"$ref": "#/definitions/physicalLocation"},
                "message": _MESSAGE,
                "properties": _BAG,
            }
        ),
        "physicalLocation": _object(
            {
                "artifactLocation": {"$ref": "#/definitions/artifactLocation"},
                "region": {"$ref": "#/definitions/region"},
                "properties": _BAG,
            },
            anyOf=[{"required": ["address"]}, {"required": ["artifactLocation"]}],
        ),
        "artifactLocation": _object(
            {
                "uri": _STR,
                "uriBaseId": _STR,
                "index": {"type": "integer", "minimum": -1},
                "description": _MESSAGE,
                "properties": _BAG,
            }
        ),
        "region": _object(
            {
                "startLine": {"type": "integer", "minimum": 1},
                "startColumn": {"type": "integer", "minimum": 1},
                "endLine": {"type": "integer", "minimum": 1},
                "endColumn": {"type": "integer", "minimum": 1},
                "message": _MESSAGE,
                "properties": _BAG,
            }
        ),
        "suppression": _object(
            {
                "guid": _STR,
                "kind": {"enum": ["inSource", "external"]},
                "status": {"enum": ["accepted", "underReview", "rejected"]},
                "justification": _STR,
                "properties": _BAG,
            },
            ["kind"],
        ),
    },
}


def sarif_errors(document: Any) -> list[str]:
    """Where ``document`` breaks SARIF 2.1.0 (as far as :data:`SARIF_2_1_0` spells it out); [] if valid."""
    validator = jsonschema.Draft7Validator(SARIF_2_1_0)
    return sorted(
        f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
        for error in validator.iter_errors(document)
    )
