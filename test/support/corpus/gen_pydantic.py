"""Pydantic v2 tool-argument models as real code writes them; prints [{name, source, schema}].

Run with the provider-check venv's python (pydantic comes with the openai package).
"""

import datetime as dt
import decimal
import enum
import json
import sys
import uuid
from typing import Annotated, Any, Dict, List, Literal, Optional, Set, Tuple, Union

import pydantic
from pydantic import BaseModel, ConfigDict, Field


class Color(str, enum.Enum):
    red = "red"
    green = "green"


class Priority(enum.IntEnum):
    low = 1
    high = 2


class Address(BaseModel):
    street: str
    city: str
    zip: Optional[str] = None


class Person(BaseModel):
    name: str
    age: int = Field(ge=0, le=150)
    manager: Optional["Person"] = None


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    recursive: bool = False


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool = True


class Tree(BaseModel):
    value: int
    children: List["Tree"] = []


MODELS = {
    "read_file": type("ReadFile", (BaseModel,), {"__annotations__": {"path": str, "limit": Optional[int]}, "limit": None}),
    "optional_default": type("OptDefault", (BaseModel,), {"__annotations__": {"q": str, "lang": Optional[str]}, "lang": "en"}),
    "literal_mode": type("LiteralMode", (BaseModel,), {"__annotations__": {"mode": Literal["fast", "full"]}}),
    "literal_bool": type("LiteralBool", (BaseModel,), {"__annotations__": {"flag": Literal[True, False]}}),
    "literal_one": type("LiteralOne", (BaseModel,), {"__annotations__": {"version": Literal[2], "x": int}}),
    "str_enum": type("StrEnum", (BaseModel,), {"__annotations__": {"color": Color}}),
    "int_enum": type("IntEnum", (BaseModel,), {"__annotations__": {"priority": Priority, "note": str}, "note": ""}),
    "nested_model": type("Nested", (BaseModel,), {"__annotations__": {"to": Address, "cc": Optional[Address]}, "cc": None}),
    "recursive_person": type("Recursive", (BaseModel,), {"__annotations__": {"person": Person}}),
    "recursive_tree": type("TreeArgs", (BaseModel,), {"__annotations__": {"tree": Tree}}),
    "tuple_point": type("Point", (BaseModel,), {"__annotations__": {"at": Tuple[float, float]}}),
    "tuple_mixed": type("Mixed", (BaseModel,), {"__annotations__": {"row": Tuple[str, int, bool]}}),
    "tuple_var": type("TupleVar", (BaseModel,), {"__annotations__": {"ids": Tuple[int, ...]}}),
    "dict_str_int": type("Counts", (BaseModel,), {"__annotations__": {"counts": Dict[str, int]}}),
    "dict_str_model": type("Book", (BaseModel,), {"__annotations__": {"people": Dict[str, Address]}}),
    "dict_any": type("Meta", (BaseModel,), {"__annotations__": {"meta": Dict[str, Any]}, "meta": {}}),
    "any_value": type("AnyValue", (BaseModel,), {"__annotations__": {"value": Any}}),
    "union_int_str": type("UnionIS", (BaseModel,), {"__annotations__": {"id": Union[int, str]}}),
    "union_optional_list": type("UOL", (BaseModel,), {"__annotations__": {"tags": Optional[List[str]]}, "tags": None}),
    "discriminated": type("Pet", (BaseModel,), {"__annotations__": {"pet": Annotated[Union[Cat, Dog], Field(discriminator="kind")]}}),
    "plain_union_models": type("PetU", (BaseModel,), {"__annotations__": {"pet": Union[Cat, Dog]}}),
    "constrained_str": type("CStr", (BaseModel,), {"__annotations__": {"code": Annotated[str, Field(min_length=2, max_length=8, pattern=r"^[A-Z]+$")]}}),
    "constrained_num": type("CNum", (BaseModel,), {"__annotations__": {"ratio": Annotated[float, Field(gt=0, lt=1)], "count": Annotated[int, Field(ge=1, multiple_of=5)]}}),
    "constrained_list": type("CList", (BaseModel,), {"__annotations__": {"items": Annotated[List[int], Field(min_length=1, max_length=3)]}}),
    "set_of_str": type("SetS", (BaseModel,), {"__annotations__": {"labels": Set[str]}}),
    "datetime_uuid": type("When", (BaseModel,), {"__annotations__": {"at": dt.datetime, "id": uuid.UUID, "day": Optional[dt.date]}, "day": None}),
    "decimal_amount": type("Money", (BaseModel,), {"__annotations__": {"amount": decimal.Decimal, "currency": str}, "currency": "EUR"}),
    "bytes_field": type("Blob", (BaseModel,), {"__annotations__": {"data": bytes}}),
    "forbid_extra": Strict,
    "defaults_everywhere": type("Defaults", (BaseModel,), {"__annotations__": {"n": int, "verbose": bool, "sep": str, "ratio": Optional[float]}, "n": 10, "verbose": False, "sep": ",", "ratio": 0.5}),
    "list_of_models": type("Batch", (BaseModel,), {"__annotations__": {"addresses": List[Address]}}),
    "optional_model_default_none": type("MaybeAddr", (BaseModel,), {"__annotations__": {"address": Optional[Address]}, "address": None}),
    "field_descriptions": type("Described", (BaseModel,), {"__annotations__": {"query": Annotated[str, Field(description="Search text", examples=["elixir"])], "k": Annotated[int, Field(description="How many", ge=1)]}, "k": 5}),
    "nested_optional_default": type("Outer", (BaseModel,), {"__annotations__": {"inner": Address, "page": Optional[int]}, "page": 1}),
    "list_of_tuples": type("Pairs", (BaseModel,), {"__annotations__": {"pairs": List[Tuple[str, int]]}}),
    "nullable_no_default": type("NullNoDefault", (BaseModel,), {"__annotations__": {"x": Optional[int]}}),
    "frozen_open": type("Open", (BaseModel,), {"__annotations__": {"a": int}, "model_config": ConfigDict(extra="allow")}),
    "literal_mixed": type("LitMixed", (BaseModel,), {"__annotations__": {"v": Literal["a", 1, None]}, "v": None}),
    "dict_int_keys": type("ByNumber", (BaseModel,), {"__annotations__": {"m": Dict[int, str]}}),
    "list_of_enums": type("Colors", (BaseModel,), {"__annotations__": {"colors": List[Color]}, "colors": []}),
}


def main():
    out = []
    for name, model in MODELS.items():
        model.model_rebuild(_types_namespace={"Person": Person, "Tree": Tree})
        out.append({"name": f"pydantic_{name}", "source": f"pydantic {pydantic.VERSION}",
                    "schema": model.model_json_schema()})
    json.dump(out, sys.stdout)


main()
