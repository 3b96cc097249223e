#!/usr/bin/env python3
"""cmdc_tool's Python script worker (standard library only).

Two modes, both speaking length-prefixed frames on a channel of their own:

    python3 cmdc_worker.py describe        # reads script paths, answers their descriptions
    python3 cmdc_worker.py serve SCRIPT    # imports SCRIPT once, then runs calls

Frame: a 4-byte big-endian length N, then N bytes: one kind byte and a UTF-8 JSON payload.
Requests (from cmdc_tool): b"D" + path (describe), b"C" + {"fn": name, "args": {...}} (call).
Answers: b"D" description, b"R" ready (after import), b"O" result, b"P" progress, b"E" error.

The frame channel is the process's original stdin/stdout, duplicated before anything else runs;
file descriptor 0 is then /dev/null and descriptor 1 points at stderr, so neither the script nor
its children can read a frame or write into one. Python-level output (print, sys.stderr) is
captured and returned with each result as "log".

`describe` reads the script with `ast` only: the script is never imported, so a top level that
parses argv, prints or exits cannot affect it.
"""

import ast
import io
import json
import os
import struct
import sys
import threading

LOG_LIMIT = 64 * 1024
# Characters of an exception's text the model gets (a 1 MB message would flood its context).
MESSAGE_LIMIT = 8 * 1024


def cap(text, limit):
    """`text` cut to `limit` characters with a visible marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + " [... %d more characters cut]" % (len(text) - limit)

# ---------------------------------------------------------------------------------------------
# frames


class Channel:
    def __init__(self):
        self.inp = os.fdopen(os.dup(0), "rb", buffering=0)
        self.out = os.fdopen(os.dup(1), "wb", buffering=0)
        self.lock = threading.Lock()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)

    def _read_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.inp.read(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def read(self):
        head = self._read_exact(4)
        if head is None:
            return None, None
        (n,) = struct.unpack(">I", head)
        body = self._read_exact(n)
        if body is None or n < 1:
            return None, None
        return body[:1], body[1:]

    def write(self, kind, payload):
        data = kind + payload
        with self.lock:
            self.out.write(struct.pack(">I", len(data)) + data)

    def send(self, kind, obj):
        self.write(kind, dumps(obj))


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def safe_text(s):
    if not isinstance(s, str):
        s = str(s)
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


# ---------------------------------------------------------------------------------------------
# describe: docstrings


GOOGLE_PARAMS = {
    "args", "arguments", "parameters", "params", "keyword args", "keyword arguments", "kwargs",
    "other parameters", "other params",
}
GOOGLE_OTHER = {
    "returns", "return", "yields", "yield", "raises", "raise", "examples", "example", "notes",
    "note", "attributes", "see also", "warning", "warnings", "todo", "references", "usage",
}
NUMPY_PARAMS = {"parameters", "other parameters", "params", "arguments", "args"}


def _indent(line):
    return len(line) - len(line.lstrip())


def parse_docstring(doc):
    """Returns (description, {param: {"type": str|None, "desc": str}})."""
    import re

    if not doc:
        return "", {}
    lines = doc.expandtabs().splitlines()
    params = {}
    kept = []
    i = 0
    n = len(lines)
    entry_re = re.compile(r"^\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
    numpy_re = re.compile(r"^\*{0,2}([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*\*{0,2}[A-Za-z_][A-Za-z0-9_]*)*)\s*(?::\s*(.*))?$")
    rest_re = re.compile(r"^:(param|parameter|arg|argument|key|keyword|type)\s+([^:]*?)\s*:\s*(.*)$")
    rest_other_re = re.compile(r"^:(returns?|rtype|raises?|except|exception|yields?)\b([^:]*):\s*(.*)$")

    def entry(name):
        return params.setdefault(name, {"type": None, "desc": ""})

    def add_desc(name, text):
        e = entry(name)
        text = text.strip()
        if text:
            e["desc"] = (e["desc"] + " " + text).strip() if e["desc"] else text

    def continuation(start, base):
        """Lines after `start` indented deeper than `base` (blank lines allowed inside)."""
        out = []
        j = start
        while j < n:
            line = lines[j]
            if line.strip() == "":
                k = j
                while k < n and lines[k].strip() == "":
                    k += 1
                if k < n and _indent(lines[k]) > base:
                    j = k
                    continue
                break
            if _indent(line) <= base:
                break
            out.append(line.strip())
            j += 1
        return out, j

    while i < n:
        line = lines[i]
        stripped = line.strip()
        low = stripped.lower()
        # reST fields
        m = rest_re.match(stripped)
        if m:
            field, what, text = m.groups()
            more, j = continuation(i + 1, _indent(line))
            text = " ".join([text] + more)
            if field == "type":
                entry(what.strip())["type"] = text.strip()
            else:
                parts = what.split()
                if parts:
                    name = parts[-1].lstrip("*")
                    if len(parts) > 1:
                        entry(name)["type"] = " ".join(parts[:-1])
                    add_desc(name, text)
            i = j
            continue
        m = rest_other_re.match(stripped)
        if m:
            field, what, text = m.groups()
            more, j = continuation(i + 1, _indent(line))
            text = " ".join([text] + more).strip()
            if field.startswith("return") and text:
                kept.append("Returns: " + text)
            elif field.startswith("raise") or field.startswith("except"):
                kept.append(("Raises " + what.strip() + ": " + text).strip())
            elif field.startswith("yield") and text:
                kept.append("Yields: " + text)
            i = j
            continue
        # NumPy section: header, then a dashes line
        if i + 1 < n and stripped and re.match(r"^-{3,}\s*$", lines[i + 1].strip() or "x"):
            if low in NUMPY_PARAMS:
                base = None
                j = i + 2
                while j < n:
                    l2 = lines[j]
                    s2 = l2.strip()
                    if s2 == "":
                        j += 1
                        continue
                    if j + 1 < n and re.match(r"^-{3,}\s*$", lines[j + 1].strip() or "x"):
                        break
                    if base is None:
                        base = _indent(l2)
                    if _indent(l2) < base:
                        break
                    m2 = numpy_re.match(s2)
                    more, k = continuation(j + 1, _indent(l2))
                    if m2 and _indent(l2) == base:
                        names = [x.strip().lstrip("*") for x in m2.group(1).split(",")]
                        typ = (m2.group(2) or "").strip() or None
                        for name in names:
                            if typ:
                                entry(name)["type"] = typ
                            add_desc(name, " ".join(more))
                    j = k
                i = j
                continue
            kept.append(line)
            i += 1
            continue
        # Google section
        if stripped.endswith(":") and low[:-1].strip() in GOOGLE_PARAMS and _indent(line) == 0:
            base = None
            j = i + 1
            while j < n:
                l2 = lines[j]
                s2 = l2.strip()
                if s2 == "":
                    k = j
                    while k < n and lines[k].strip() == "":
                        k += 1
                    if k < n and base is not None and _indent(lines[k]) >= base > 0:
                        j = k
                        continue
                    break
                if base is None:
                    base = _indent(l2)
                    if base == 0:
                        break
                if _indent(l2) < base:
                    break
                m2 = entry_re.match(s2)
                more, k = continuation(j + 1, _indent(l2))
                if m2:
                    name, typ, text = m2.groups()
                    if typ:
                        entry(name)["type"] = typ
                    add_desc(name, " ".join([text] + more))
                j = k
            i = j
            continue
        kept.append(line)
        i += 1

    # Collapse blank runs and trim.
    text_lines = []
    for line in kept:
        if line.strip() == "" and (not text_lines or text_lines[-1] == ""):
            continue
        text_lines.append(line.rstrip())
    while text_lines and text_lines[-1] == "":
        text_lines.pop()
    for e in params.values():
        if e["type"]:
            e["type"] = re.sub(r",?\s*optional\s*$", "", e["type"].strip()).strip() or None
    return "\n".join(text_lines).strip(), params


# ---------------------------------------------------------------------------------------------
# describe: a docstring's Examples section -> the tool's example arguments

EXAMPLE_HEADS = {"examples", "example"}


def split_examples(doc):
    """(docstring without its Examples section, the section's lines) when the section (Google
    `Examples:` or NumPy `Examples` + dashes) holds example calls (`>>> ` lines or `{` JSON
    lines); else (doc, []): prose examples stay in the description."""
    import re

    lines = (doc or "").expandtabs().splitlines()
    for i, line in enumerate(lines):
        low = line.strip().lower()
        numpy = (low in EXAMPLE_HEADS and i + 1 < len(lines)
                 and re.match(r"^-{3,}\s*$", lines[i + 1].strip()))
        if not (numpy or (_indent(line) == 0 and low.endswith(":") and low[:-1].strip() in EXAMPLE_HEADS)):
            continue
        start = i + 2 if numpy else i + 1
        end = start
        while end < len(lines):
            l2 = lines[end]
            if l2.strip() and _indent(l2) == 0 and not numpy and not l2.lstrip().startswith((">>>", "...", "{")):
                break
            if numpy and end + 1 < len(lines) and re.match(r"^-{3,}\s*$", lines[end + 1].strip() or "x"):
                break
            end += 1
        body = [l.strip() for l in lines[start:end]]
        if any(l.startswith((">>>", "{")) for l in body):
            return "\n".join(lines[:i] + lines[end:]), body
    return doc, []


def parse_examples(body, node):
    """The example argument objects of a section's lines, in one of two forms: doctest calls of
    the function itself (`>>> fn(...)`, `...` lines continue a call; positional arguments take
    the parameters' names; values must be literals; every other line is output), or, in a
    section without `>>>`, one JSON object a line (`{"city": "Paris"}`). Prose is skipped. An
    entry that cannot be read is kept as its text, which the library then rejects naming the
    tool (an example must be an object)."""
    a = node.args
    positional = [x.arg for x in list(getattr(a, "posonlyargs", [])) + list(a.args)]
    calls = []
    doctest = any(line.startswith(">>>") for line in body)
    for line in body:
        if doctest and line.startswith(">>>"):
            calls.append(line[3:].strip())
        elif doctest and line.startswith("...") and calls:
            calls[-1] += " " + line[3:].strip()
        elif not doctest and line.startswith("{"):
            calls.append(line)
    return [example_from(text, node.name, positional) for text in calls]


def example_from(text, name, positional):
    if text.startswith("{"):
        try:
            value = json.loads(text)
            return value if isinstance(value, dict) else text
        except ValueError:
            return text
    try:
        call = ast.parse(text, mode="eval").body
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == name):
            return text
        if len(call.args) > len(positional) or any(k.arg is None for k in call.keywords):
            return text
        args = {positional[i]: ast.literal_eval(v) for i, v in enumerate(call.args)}
        args.update({k.arg: ast.literal_eval(k.value) for k in call.keywords})
        ok, value = jsonable(args)
        return value if ok else text
    except Exception:
        return text


# ---------------------------------------------------------------------------------------------
# describe: type hints -> JSON Schema

SIMPLE = {
    "str": {"type": "string"}, "string": {"type": "string"}, "bytes": {"type": "string"},
    "Path": {"type": "string"}, "PathLike": {"type": "string"}, "AnyStr": {"type": "string"},
    "int": {"type": "integer"}, "integer": {"type": "integer"},
    "float": {"type": "number"}, "number": {"type": "number"}, "Decimal": {"type": "number"},
    "bool": {"type": "boolean"}, "boolean": {"type": "boolean"},
    "dict": {"type": "object"}, "Dict": {"type": "object"}, "Mapping": {"type": "object"},
    "MutableMapping": {"type": "object"}, "object": {}, "Any": {}, "mapping": {"type": "object"},
    "list": {"type": "array"}, "List": {"type": "array"}, "Sequence": {"type": "array"},
    "MutableSequence": {"type": "array"}, "Iterable": {"type": "array"},
    "Collection": {"type": "array"}, "tuple": {"type": "array"}, "Tuple": {"type": "array"},
    "array": {"type": "array"},
    "set": {"type": "array", "uniqueItems": True}, "Set": {"type": "array", "uniqueItems": True},
    "frozenset": {"type": "array", "uniqueItems": True},
    "FrozenSet": {"type": "array", "uniqueItems": True},
    "None": {"type": "null"}, "NoneType": {"type": "null"},
}
ARRAYS = {"list", "List", "Sequence", "MutableSequence", "Iterable", "Collection", "tuple",
          "Tuple", "set", "Set", "frozenset", "FrozenSet", "Iterator"}
MAPS = {"dict", "Dict", "Mapping", "MutableMapping"}
WRAPPERS = {"Required", "NotRequired", "ReadOnly", "Final", "ClassVar"}
ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"}


def tail_name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def is_none(node):
    return (isinstance(node, ast.Constant) and node.value is None) or tail_name(node) in ("None", "NoneType")


class Types:
    def __init__(self, tree):
        self.classes = {}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
        self.stack = []

    def class_kind(self, node):
        bases = {tail_name(b) for b in node.bases}
        if bases & ENUM_BASES:
            return "enum"
        if "TypedDict" in bases:
            return "typeddict"
        for b in bases:
            if b in self.classes and b not in self.stack and self.class_kind(self.classes[b]) == "typeddict":
                return "typeddict"
        for d in node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            if tail_name(target) == "dataclass":
                return "dataclass"
        if "BaseModel" in bases or "NamedTuple" in bases:
            return "dataclass"
        return None

    def schema(self, node):
        """JSON Schema for an annotation node (never raises)."""
        try:
            return self._schema(node)
        except RecursionError:
            return {}

    def _schema(self, node):
        if node is None:
            return {}
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self._schema(ast.parse(node.value.strip(), mode="eval").body)
            except SyntaxError:
                return doc_type_schema(node.value, self)
        if is_none(node):
            return {"type": "null"}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.union(flatten_or(node))
        if isinstance(node, ast.Subscript):
            base = tail_name(node.value)
            args = node.slice
            if isinstance(args, ast.Index):  # Python < 3.9
                args = args.value
            items = list(args.elts) if isinstance(args, ast.Tuple) else [args]
            if base == "Optional":
                return self.union(items + [ast.Constant(value=None)])
            if base == "Union":
                return self.union(items)
            if base == "Literal":
                return literal_schema(items)
            if base == "Annotated":
                s = dict(self._schema(items[0]))
                for meta in items[1:]:
                    if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
                        s["description"] = meta.value
                        break
                return s
            if base in WRAPPERS:
                return self._schema(items[0])
            if base in ARRAYS:
                s = dict(SIMPLE.get(base, {"type": "array"}))
                if base in ("tuple", "Tuple"):
                    if len(items) == 2 and isinstance(items[1], ast.Constant) and items[1].value is Ellipsis:
                        items = items[:1]
                    kinds = [self._schema(x) for x in items]
                    if kinds and all(k == kinds[0] for k in kinds):
                        if kinds[0]:
                            s["items"] = kinds[0]
                    elif kinds:
                        s["items"] = {"anyOf": kinds}
                else:
                    inner = self._schema(items[0])
                    if inner:
                        s["items"] = inner
                return s
            if base in MAPS:
                s = {"type": "object"}
                if len(items) == 2:
                    inner = self._schema(items[1])
                    if inner:
                        s["additionalProperties"] = inner
                return s
            if base == "Type" or base == "type":
                return {"type": "string"}
            return self._schema(node.value)
        name = tail_name(node)
        if name in self.classes and name not in self.stack:
            return self.class_schema(self.classes[name])
        if name in SIMPLE:
            return dict(SIMPLE[name])
        return {}

    def union(self, items):
        flat = []
        for x in items:
            if isinstance(x, ast.BinOp) and isinstance(x.op, ast.BitOr):
                flat.extend(flatten_or(x))
            else:
                flat.append(x)
        nullable = any(is_none(x) for x in flat)
        rest = [x for x in flat if not is_none(x)]
        if not rest:
            return {"type": "null"}
        if len(rest) == 1:
            s = self._schema(rest[0])
            return make_nullable(s) if nullable else s
        kinds = []
        for x in rest:
            k = self._schema(x)
            if k == {}:
                return {}
            if k not in kinds:
                kinds.append(k)
        if nullable:
            kinds.append({"type": "null"})
        return kinds[0] if len(kinds) == 1 else {"anyOf": kinds}

    def class_schema(self, node):
        kind = self.class_kind(node)
        self.stack.append(node.name)
        try:
            if kind == "enum":
                return enum_schema(node)
            if kind in ("typeddict", "dataclass"):
                return self.object_schema(node, kind)
            return {}
        finally:
            self.stack.pop()

    def object_schema(self, node, kind):
        props = {}
        required = []
        total = True
        for kw in node.keywords:
            if kw.arg == "total" and isinstance(kw.value, ast.Constant):
                total = bool(kw.value.value)
        # inherited TypedDict fields
        for b in node.bases:
            bn = tail_name(b)
            if bn in self.classes and bn not in self.stack:
                parent = self.class_schema(self.classes[bn])
                props.update(parent.get("properties", {}))
                required.extend(parent.get("required", []))
        doc, pdocs = parse_docstring(ast.get_docstring(node) or "")
        for stmt in node.body:
            if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
                continue
            fname = stmt.target.id
            ann = stmt.annotation
            head = tail_name(ann.value) if isinstance(ann, ast.Subscript) else None
            s = dict(self._schema(ann))
            if fname in pdocs and pdocs[fname]["desc"]:
                s["description"] = pdocs[fname]["desc"]
            if kind == "typeddict":
                req = head == "Required" or (total and head != "NotRequired")
            else:
                req = stmt.value is None
                if stmt.value is not None:
                    ok, value = literal_default(stmt.value)
                    if ok:
                        s["default"] = value
            props[fname] = s
            if req and fname not in required:
                required.append(fname)
            elif not req and fname in required:
                required.remove(fname)
        s = {"type": "object", "properties": props}
        if required:
            s["required"] = required
        if doc:
            s["description"] = doc
        return s


def flatten_or(node):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return flatten_or(node.left) + flatten_or(node.right)
    return [node]


def make_nullable(s):
    s = dict(s)
    t = s.get("type")
    if "enum" in s:
        if None not in s["enum"]:
            s["enum"] = list(s["enum"]) + [None]
        if isinstance(t, str):
            s["type"] = [t, "null"]
        return s
    if isinstance(t, str) and "anyOf" not in s:
        if t != "null":
            s["type"] = [t, "null"]
        return s
    if isinstance(t, list):
        if "null" not in t:
            s["type"] = t + ["null"]
        return s
    # Words about the value (description, title, ...) stay at the top level, where readers and
    # models look; only the constraints go into the anyOf branch.
    notes = {k: s.pop(k) for k in ("description", "title", "default", "examples") if k in s}
    if not s:
        return dict(notes)  # any value (`Any`) already accepts null
    if "anyOf" in s:
        if {"type": "null"} not in s["anyOf"]:
            s["anyOf"] = list(s["anyOf"]) + [{"type": "null"}]
        s.update(notes)
        return s
    out = {"anyOf": [s, {"type": "null"}]}
    out.update(notes)
    return out


def json_type(values):
    if not values:
        return None
    if all(isinstance(v, bool) for v in values):
        return "boolean"
    if any(isinstance(v, bool) for v in values):
        return None
    if all(isinstance(v, str) for v in values):
        return "string"
    if all(isinstance(v, int) for v in values):
        return "integer"
    if all(isinstance(v, (int, float)) for v in values):
        return "number"
    return None


def literal_schema(items):
    values = []
    for x in items:
        if isinstance(x, ast.Subscript) and tail_name(x.value) == "Literal":
            inner = x.slice.value if isinstance(x.slice, getattr(ast, "Index", ())) else x.slice
            sub = literal_schema(list(inner.elts) if isinstance(inner, ast.Tuple) else [inner])
            values.extend(sub.get("enum", [True, False] if sub.get("type") == "boolean" else []))
            continue
        try:
            values.append(ast.literal_eval(x))
        except Exception:
            continue
    nullable = None in values
    values = [v for v in values if v is not None]
    uniq = []
    for v in values:
        if not any(type(u) is type(v) and u == v for u in uniq):
            uniq.append(v)
    t = json_type(uniq)
    if t == "boolean" and len(uniq) == 2:
        s = {"type": "boolean"}
        return make_nullable(s) if nullable else s
    s = {"enum": uniq}
    if t:
        s = {"type": t, "enum": uniq}
    return make_nullable(s) if nullable else s


def enum_schema(node):
    bases = {tail_name(b) for b in node.bases}
    str_enum = "StrEnum" in bases or "str" in bases
    values = []
    counter = 0
    for stmt in node.body:
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            continue
        t = stmt.targets[0]
        if not isinstance(t, ast.Name) or t.id.startswith("_"):
            continue
        v = stmt.value
        if isinstance(v, ast.Call) and tail_name(v.func) == "auto":
            if str_enum:
                values.append(t.id.lower())
            else:
                counter += 1
                values.append(counter)
            continue
        try:
            value = ast.literal_eval(v)
        except Exception:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            counter = value
        if jsonable(value)[0]:
            values.append(value)
    s = {"enum": values}
    t = json_type(values)
    if t:
        s = {"type": t, "enum": values}
    doc = ast.get_docstring(node)
    if doc:
        s["description"] = doc.strip().split("\n\n")[0]
    return s


def jsonable(value):
    """(True, json_value) for a literal default that JSON can carry, else (False, None)."""
    if value is None or isinstance(value, (bool, str)):
        return True, value
    if isinstance(value, int):
        return True, value
    if isinstance(value, float):
        return (value == value and value not in (float("inf"), float("-inf"))), value
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            ok, j = jsonable(v)
            if not ok:
                return False, None
            out.append(j)
        return True, out
    if isinstance(value, (set, frozenset)):
        ok, items = jsonable(list(value))
        if not ok:
            return False, None
        try:
            return True, sorted(items)
        except TypeError:
            return True, sorted(items, key=repr)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                return False, None
            ok, j = jsonable(v)
            if not ok:
                return False, None
            out[k] = j
        return True, out
    return False, None


def literal_default(node):
    if isinstance(node, ast.Call) and tail_name(node.func) in ("set", "frozenset", "list", "dict", "tuple") and not node.args and not node.keywords:
        return True, {"dict": {}}.get(tail_name(node.func), [])
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return False, None  # e.g. Color.RED: resolved by the caller
    try:
        return jsonable(ast.literal_eval(node))
    except Exception:
        return False, None


DOC_WORDS = {
    "str": "string", "string": "string", "text": "string", "path": "string",
    "int": "integer", "integer": "integer",
    "float": "number", "number": "number", "double": "number",
    "bool": "boolean", "boolean": "boolean",
    "dict": "object", "object": "object", "mapping": "object", "hashtable": "object",
    "list": "array", "array": "array", "tuple": "array", "sequence": "array",
}


def doc_type_schema(text, types):
    import re

    t = re.sub(r",?\s*optional\s*$", "", (text or "").strip()).strip()
    if not t:
        return {}
    if re.match(r"^\{.*\}$", t):
        try:
            vals = ast.literal_eval("[" + t[1:-1] + "]")
            return literal_schema([ast.Constant(value=v) for v in vals])
        except Exception:
            pass
    m = re.match(r"^(list|array|sequence|tuple)\s+of\s+(.+)$", t, re.I)
    if m:
        inner = doc_type_schema(m.group(2).rstrip("s") if m.group(2).lower().endswith("s") and m.group(2).lower().rstrip("s") in DOC_WORDS else m.group(2), types)
        s = {"type": "array"}
        if inner:
            s["items"] = inner
        return s
    parts = re.split(r"\s+or\s+|\s*\|\s*", t)
    if len(parts) > 1:
        return types.union([ast.Constant(value=None) if p.strip() == "None" else ast.Constant(value=p.strip()) for p in parts])
    try:
        s = types._schema(ast.parse(t, mode="eval").body)
        if s:
            return s
    except SyntaxError:
        pass
    w = DOC_WORDS.get(t.lower())
    return {"type": w} if w else {}


# ---------------------------------------------------------------------------------------------
# describe: permissions


# Handed over raw: the one normalizer (cmdc_tool_core's permissions.rs) reads every spelling.
PERMISSION_KEYS = {"executionPolicy", "resultApprovalPolicy", "permissionLevel", "requireExecutionApproval", "requireResultApproval"}
# MCP's display fields, as function attributes (`fn.title = "..."`, `fn.annotations = {...}`);
# the host checks them.
DISPLAY_KEYS = ("title", "annotations")


def literal_or_marker(value, warnings, where):
    """A permission value as written; one that is not a literal is kept as a marker the
    normalizer does not know, so it counts as the strictest setting (and it warns, naming the
    file, the function and the setting)."""
    try:
        return ast.literal_eval(value)
    except Exception:
        try:
            text = ast.unparse(value)
        except Exception:
            text = type(value).__name__
        return "<not a literal: %s>" % text[:60]


# ---------------------------------------------------------------------------------------------
# describe: the module


def describe_source(source, path):
    tree = ast.parse(source, filename=path)
    types = Types(tree)
    warnings = []
    functions = {}
    module_attrs = {}
    fn_attrs = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
            value = node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
            value = node.value
        for t in targets:
            if isinstance(t, ast.Name):
                if t.id in PERMISSION_KEYS:
                    module_attrs[t.id] = literal_or_marker(value, warnings, "module: %s" % t.id)
                elif t.id in ("defaultPermissions", "DEFAULT_PERMISSIONS", "default_permissions"):
                    try:
                        d = ast.literal_eval(value)
                        if isinstance(d, dict):
                            module_attrs.update({k: v for k, v in d.items() if k in PERMISSION_KEYS})
                        else:
                            raise ValueError("not a dict")
                    except Exception:
                        warnings.append("module: %s is not a literal dict" % t.id)
                        module_attrs["TOOL_CONFIG"] = "<not a literal dict>"
            elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                attrs = fn_attrs.setdefault(t.value.id, {})
                if t.attr == "format":
                    attrs["format"] = value
                elif t.attr in PERMISSION_KEYS:
                    attrs[t.attr] = literal_or_marker(value, warnings, "%s.%s" % (t.value.id, t.attr))
                elif t.attr in DISPLAY_KEYS:
                    try:
                        attrs[t.attr] = ast.literal_eval(value)
                    except Exception:
                        warnings.append("%s.%s is not a literal; ignored" % (t.value.id, t.attr))
    formatters = set()
    for attrs in fn_attrs.values():
        f = attrs.get("format")
        if isinstance(f, ast.Name):
            formatters.add(f.id)
    tools = []
    for name, node in functions.items():
        if name.startswith("_") or name in formatters:
            continue
        attrs = fn_attrs.get(name, {})
        spec, nullable = function_spec(node, types)
        tool = {
            "type": "function",
            "function": spec,
            "permissions": {k: v for k, v in attrs.items() if k in PERMISSION_KEYS},
            "format": "format" in attrs,
            "nullDefaults": nullable,
        }
        tool.update({k: attrs[k] for k in DISPLAY_KEYS if k in attrs})
        if "examples" in spec:
            tool["examples"] = spec.pop("examples")
        # A format function makes the result text: no structured output then.
        if "format" not in attrs:
            tool.update(output_spec(node, types))
        tools.append(tool)
    doc = ast.get_docstring(tree)
    stem = os.path.splitext(os.path.basename(path))[0]
    out = {
        "type": "PythonModule",
        "name": stem,
        "scriptPath": os.path.abspath(path),
        "tools": tools,
        "rulePrompt": doc.strip() if doc else "",
        "defaultPermissions": module_attrs,
    }
    if warnings:
        out["warnings"] = warnings
    return out


def output_spec(node, types):
    """The output schema a return type hint gives, where it maps: an object (dict, TypedDict,
    dataclass). Other types give none: their result stays plain text (wrapping them as
    {"result": value} would change the text every caller sees)."""
    s = types.schema(node.returns) if node.returns is not None else {}
    if s.get("type") == "object" and "$ref" not in s and "$defs" not in s:
        return {"outputSchema": s}
    return {}


def function_spec(node, types):
    doc, example_lines = split_examples(ast.get_docstring(node) or "")
    description, pdocs = parse_docstring(doc)
    a = node.args
    positional = list(getattr(a, "posonlyargs", [])) + list(a.args)
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    pairs = list(zip(positional, defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
    props = {}
    required = []
    nullable_no_default = []
    for arg, default in pairs:
        name = arg.arg
        pdoc = pdocs.get(name, {})
        if arg.annotation is not None:
            s = dict(types.schema(arg.annotation))
        elif pdoc.get("type"):
            s = dict(doc_type_schema(pdoc["type"], types))
        else:
            s = {}
        if not s and default is not None:
            ok, value = literal_default(default)
            if ok and value is not None:
                t = json_type([value]) or ("array" if isinstance(value, list) else "object" if isinstance(value, dict) else None)
                if t:
                    s = {"type": t}
        if pdoc.get("desc"):
            s["description"] = pdoc["desc"]
        if default is not None:
            if isinstance(default, ast.Constant) and default.value is None and s and not accepts_null(s):
                s = make_nullable(s)  # `x: str = None`: the model may send null
            ok, value = literal_default(default)
            if not ok and isinstance(default, ast.Attribute) and isinstance(default.value, ast.Name):
                enum_node = types.classes.get(default.value.id)
                if enum_node is not None and types.class_kind(enum_node) == "enum":
                    ok, value = enum_member_value(enum_node, default.attr)
            if ok:
                s["default"] = value
        elif accepts_null(s):
            s["default"] = None
            nullable_no_default.append(name)
        else:
            required.append(name)
        props[name] = s
    params = {"type": "object", "properties": props}
    if required:
        params["required"] = required
    if a.kwarg is None:
        params["additionalProperties"] = False
    spec = {"name": node.name, "description": description, "parameters": params}
    if example_lines:
        spec["examples"] = parse_examples(example_lines, node)
    return spec, nullable_no_default


def enum_member_value(node, member):
    values = enum_schema(node).get("enum", [])
    names = [s.targets[0].id for s in node.body
             if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
             and not s.targets[0].id.startswith("_")]
    if member in names and len(names) == len(values):
        return True, values[names.index(member)]
    return False, None


def accepts_null(s):
    t = s.get("type")
    if t == "null" or (isinstance(t, list) and "null" in t):
        return True
    return any(x == {"type": "null"} for x in s.get("anyOf", []))


def describe(path):
    with open(path, "rb") as f:
        source = f.read()
    try:
        return describe_source(source, path)
    except SyntaxError as e:
        raise ValueError("syntax error in %s at line %s: %s" % (os.path.basename(path), e.lineno, e.msg))


def run_describe(chan):
    chan.send(b"R", {"pid": os.getpid()})
    while True:
        kind, payload = chan.read()
        if kind is None:
            return
        path = payload.decode("utf-8", "surrogateescape")
        try:
            chan.send(b"D", describe(path))
        except Exception as e:
            chan.send(b"E", {"message": safe_text("%s: %s" % (type(e).__name__, e)) if not isinstance(e, ValueError) else safe_text(e), "kind": "describe"})


# ---------------------------------------------------------------------------------------------
# serve


class Capture(io.TextIOBase):
    """sys.stdout / sys.stderr while the script runs: text is kept (up to LOG_LIMIT) as log."""

    def __init__(self, name):
        self.parts = []
        self.size = 0
        self.name = name

    def writable(self):
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if self.size < LOG_LIMIT:
            self.parts.append(s[: LOG_LIMIT - self.size])
            self.size += len(s)
        return len(s)

    def flush(self):
        pass

    def isatty(self):
        return False

    def fileno(self):
        # code that needs a real descriptor (subprocess, faulthandler) gets stderr, which the
        # worker's owner drains: never the frame channel
        return 2

    @property
    def buffer(self):
        capture = self

        class _Bytes:
            def write(self, b):
                capture.write(bytes(b).decode("utf-8", "backslashreplace"))
                return len(b)

            def flush(self):
                pass

        return _Bytes()

    @property
    def encoding(self):
        return "utf-8"

    def take(self):
        text = "".join(self.parts)
        if self.size > LOG_LIMIT:
            text += "\n[log truncated at %d characters]" % LOG_LIMIT
        self.parts = []
        self.size = 0
        return safe_text(text)


class NotJson(Exception):
    pass


def check_json(value, path="", depth=0):
    if depth > 128:
        raise NotJson("the result is nested deeper than 128 levels")
    if value is None or isinstance(value, (bool, str, int)):
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise NotJson("the result holds %r at %s, which JSON cannot carry" % (value, path or "the root"))
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            check_json(v, "%s/%d" % (path, i), depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise NotJson("the result has a dict key %r (%s) at %s; JSON keys are strings" % (k, type(k).__name__, path or "the root"))
            check_json(v, "%s/%s" % (path, k), depth + 1)
        return
    raise NotJson(
        "the function returned a %s%s, which is not JSON; return str, int, float, bool, dict, list or None"
        % (type(value).__name__, " at " + path if path else "")
    )


def coerce(hint, value):
    """Turns JSON values into the Enum / dataclass / set / tuple instances a hint asks for."""
    import dataclasses
    import enum
    import typing

    try:
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin is typing.Annotated:
            return coerce(args[0], value)
        if hint is int and isinstance(value, float) and value.is_integer():
            return int(value)  # 5.0 sent for an int parameter arrives as 5
        if origin is typing.Union or (origin is not None and type(hint).__name__ == "UnionType"):
            if value is None:
                return None
            for a in args:
                if a is type(None):
                    continue
                v = coerce(a, value)
                if v is not value:
                    return v
            return value
        if origin in (list, set, frozenset, tuple) and isinstance(value, list):
            inner = args[0] if args else None
            items = [coerce(inner, v) for v in value] if inner is not None and inner is not Ellipsis else value
            return origin(items) if origin is not list else items
        if origin is None and hint in (set, frozenset, tuple) and isinstance(value, list):
            return hint(value)
        if isinstance(hint, type) and issubclass(hint, enum.Enum) and not isinstance(value, hint):
            return hint(value)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
            hints = typing.get_type_hints(hint)
            return hint(**{k: coerce(hints.get(k), v) for k, v in value.items()})
    except Exception:
        return value
    return value


def import_script(path):
    import importlib.util

    stem = os.path.splitext(os.path.basename(path))[0]
    std = getattr(sys, "stdlib_module_names", ())
    name = stem if (stem.isidentifier() and stem not in sys.modules and stem not in std) else "cmdc_script_" + "".join(c if c.isalnum() else "_" for c in stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot import %s" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def adopt_orphans():
    """Makes this worker the subreaper of everything its calls start (Linux): a daemon that
    double-forks to leave is re-parented here instead of to init, so it stays in the worker's
    process tree, which a time-out, a cancel or the end of the worker kills whole."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        PR_SET_CHILD_SUBREAPER = 36
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:
        pass


def run_serve(chan, path):
    import asyncio
    import inspect
    import traceback
    import types as pytypes
    import typing

    adopt_orphans()
    out = Capture("<stdout>")
    sys.stdout = out
    sys.stderr = out
    sys.stdin = open(os.devnull, "r")
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    sys.argv = [path]
    state = {"in_call": False}

    helper = pytypes.ModuleType("cmdc_tool")
    helper.__doc__ = "Helpers the cmdc_tool worker provides to scripts."

    def progress(value):
        """Sends `value` (anything JSON) to the caller as a partial result of the running call."""
        if not state["in_call"]:
            return False
        check_json(value)
        chan.send(b"P", {"value": value})
        return True

    helper.progress = progress
    helper.IN_WORKER = True
    sys.modules["cmdc_tool"] = helper

    try:
        with open(path, "rb") as f:
            spec = describe_source(f.read(), path)
        null_defaults = {t["function"]["name"]: t["nullDefaults"] for t in spec["tools"]}
        module = import_script(path)
    except SystemExit as e:
        chan.send(b"E", {"kind": "import", "message": "the script exited while being imported (sys.exit(%r)); move top-level code under `if __name__ == \"__main__\":`" % (e.code,), "log": out.take()})
        return
    except BaseException as e:
        chan.send(b"E", {"kind": "import", "message": safe_text("importing the script failed: %s: %s" % (type(e).__name__, e)), "log": out.take() + safe_text(traceback.format_exc())})
        return
    chan.send(b"R", {"log": out.take(), "pid": os.getpid()})
    fn_info = {}

    while True:
        kind, payload = chan.read()
        if kind is None:
            return
        if kind != b"C":
            continue
        try:
            req = json.loads(payload.decode("utf-8"))
        except Exception as e:
            chan.send(b"E", {"kind": "protocol", "message": "bad request: %s" % e, "log": ""})
            continue
        fname = req.get("fn", "")
        args = req.get("args") or {}
        fn = getattr(module, fname, None)
        # Only the tools the script itself declares (its describe spec): never a name it
        # imported (`from os import system`) that a tampered cache might offer.
        if fname.startswith("_") or fname not in null_defaults or not callable(fn):
            chan.send(b"E", {"kind": "unknown_function", "message": "the script has no public function %r" % fname, "log": out.take()})
            continue
        original = dict(args)
        try:
            cached = fn_info.get(fname)
            if cached is None or cached[0] is not fn:
                try:
                    hints = typing.get_type_hints(fn)
                except Exception:
                    hints = {}
                try:
                    sig = inspect.signature(fn)
                except (TypeError, ValueError):
                    sig = None
                cached = fn_info[fname] = (fn, hints, sig)
            _, hints, sig = cached
            call_args = {k: coerce(hints[k], v) if k in hints else v for k, v in args.items()}
            for p in null_defaults.get(fname, []):
                call_args.setdefault(p, None)
            positional = []
            try:
                for p in (sig.parameters.values() if sig is not None else ()):
                    if p.kind is p.POSITIONAL_ONLY and p.name in call_args:
                        positional.append(call_args.pop(p.name))
                    elif p.kind is p.POSITIONAL_ONLY:
                        break
                if sig is not None:
                    sig.bind(*positional, **call_args)
            except TypeError as e:
                chan.send(b"E", {"kind": "arguments", "message": "bad arguments for %s: %s" % (fname, e), "log": out.take()})
                continue
            state["in_call"] = True
            try:
                result = fn(*positional, **call_args)
                if inspect.isawaitable(result):
                    async def _wait(aw):
                        return await aw
                    result = asyncio.run(_wait(result))
            finally:
                state["in_call"] = False
        except SystemExit as e:
            chan.send(b"E", {"kind": "exception", "message": "the function called sys.exit(%r)" % (e.code,), "log": out.take()})
            continue
        except BaseException as e:
            tb = cap(traceback.format_exc(), LOG_LIMIT)
            msg = cap(str(e), MESSAGE_LIMIT)
            chan.send(b"E", {"kind": "exception", "message": safe_text("%s: %s" % (type(e).__name__, msg) if msg else type(e).__name__), "log": out.take() + safe_text(tb)})
            continue
        try:
            check_json(result)
            reply = {"value": result}
            fmt = getattr(fn, "format", None)
            warning = None
            if callable(fmt):
                # The function already ran: a failing formatter must not turn its result into an
                # error (sy-f-misc returns the raw result too), so the raw result goes on with a
                # warning in the log.
                try:
                    text = fmt(result, original)
                    if isinstance(text, str):
                        reply["text"] = text
                    else:
                        warning = "the format function returned a %s, not a str" % type(text).__name__
                except BaseException as e:
                    warning = safe_text("the format function raised %s: %s" % (type(e).__name__, cap(str(e), 2000)))
            reply["log"] = out.take()
            if warning:
                reply["log"] += "[cmdc_tool warning] %s; the raw result was returned\n" % warning
                reply["warning"] = warning
            try:
                data = dumps(reply)
            except UnicodeEncodeError as e:
                raise NotJson("the result holds text that is not valid UTF-8 (%s)" % e.reason)
            chan.write(b"O", data)
        except NotJson as e:
            chan.send(b"E", {"kind": "result", "message": safe_text(e), "log": out.take()})


# ---------------------------------------------------------------------------------------------
# process hygiene: nothing the script started outlives the worker


def descendants(root):
    """Pids whose chain of parents leads to `root`, read from /proc (empty elsewhere)."""
    children = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[0] not in ("Z", "X"):
            children.setdefault(int(fields[1]), []).append(int(name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in out:
                out.append(c)
                todo.append(c)
    return out


def kill_descendants():
    """Stops, then kills, every descendant (also those that called setsid), walked first."""
    import signal
    found = []
    for _ in range(8):
        fresh = [p for p in descendants(os.getpid()) if p not in found]
        if not fresh:
            break
        for p in fresh:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
        found += fresh
    for p in found:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def watch_parent():
    """The VM that started this worker died (its pipes may stay open in a stray child): take
    everything down rather than linger as an orphan."""
    import time
    parent = os.getppid()
    while True:
        time.sleep(0.2)
        if os.getppid() != parent:
            kill_descendants()
            os._exit(1)


def main():
    chan = Channel()
    threading.Thread(target=watch_parent, name="cmdc-watch-parent", daemon=True).start()
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        if mode == "describe":
            run_describe(chan)
        elif mode == "serve" and len(sys.argv) > 2:
            run_serve(chan, sys.argv[2])
        else:
            chan.send(b"E", {"kind": "usage", "message": "usage: cmdc_worker.py describe | serve SCRIPT"})
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    # The channel closed: the owner retired this worker or went away. What the script left
    # running goes too.
    kill_descendants()
    # Leave at once: atexit handlers and non-daemon threads of a script must not keep a worker.
    try:
        sys.stdout.flush()
    except Exception:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
