// Zod tool-argument schemas as real code writes them, in zod 3 (through zod-to-json-schema, its
// default options: reused schemas become `$ref: "#/properties/..."`) and zod 4 (its own
// `z.toJSONSchema`); prints [{name, source, schema}]. Run with NODE_PATH at an npm folder holding
// zod3@npm:zod@3, zod4@npm:zod@4 and zod-to-json-schema.
import { createRequire } from "node:module";
const require = createRequire(process.env.NODE_PATH + "/");
const z3 = require("zod3").z;
const z4 = require("zod4").z;
const { zodToJsonSchema } = require("zod-to-json-schema");

function schemas(z) {
  const address = z.object({ street: z.string(), city: z.string() });
  const person = z.object({ name: z.string(), email: z.string().email().optional() });
  return {
    read_file: z.object({ path: z.string().describe("File path"), limit: z.number().int().positive().optional() }),
    enum_mode: z.object({ mode: z.enum(["fast", "full"]), dry: z.boolean().default(false) }),
    literal_kind: z.object({ kind: z.literal("search"), q: z.string().min(1) }),
    nullable_field: z.object({ note: z.string().nullable(), n: z.number().nullish() }),
    default_string: z.object({ lang: z.string().default("en"), q: z.string() }),
    reused_address: z.object({ from: address, to: address }),
    reused_person_list: z.object({ owner: person, members: z.array(person) }),
    union_scalar: z.object({ id: z.union([z.string(), z.number()]) }),
    discriminated: z.object({
      shape: z.discriminatedUnion("type", [
        z.object({ type: z.literal("circle"), r: z.number() }),
        z.object({ type: z.literal("square"), side: z.number() }),
      ]),
    }),
    tuple: z.object({ point: z.tuple([z.number(), z.number()]) }),
    record: z.object({ env: z.record(z.string(), z.string()) }),
    record_of_objects: z.object({ byId: z.record(z.string(), address) }),
    any_value: z.object({ value: z.any(), other: z.unknown() }),
    array_bounds: z.object({ tags: z.array(z.string()).min(1).max(5) }),
    number_bounds: z.object({ ratio: z.number().gt(0).lt(1), page: z.number().int().min(1).max(100) }),
    string_formats: z.object({ url: z.string().url(), id: z.string().uuid(), at: z.string().datetime() }),
    regex: z.object({ slug: z.string().regex(/^[a-z0-9-]+$/) }),
    strict_object: z.object({ a: z.string() }).strict(),
    passthrough_object: z.object({ a: z.string() }).passthrough(),
    nested_optional: z.object({ opts: z.object({ depth: z.number().optional(), follow: z.boolean().optional() }).optional() }),
    intersection: z.object({ item: z.intersection(z.object({ a: z.string() }), z.object({ b: z.number() })) }),
    native_enum_like: z.object({ level: z.union([z.literal(1), z.literal(2), z.literal(3)]) }),
    set_like: z.object({ ids: z.array(z.string()).nonempty() }),
    date_string: z.object({ day: z.string().date() }),
    unicode_regex: z.object({ name: z.string().regex(/^\p{L}+$/u) }),
  };
}

const out = [];
for (const [name, s] of Object.entries(schemas(z3))) {
  out.push({ name: `zod3_${name}`, source: "zod 3 + zod-to-json-schema", schema: zodToJsonSchema(s) });
}
for (const [name, s] of Object.entries(schemas(z4))) {
  out.push({ name: `zod4_${name}`, source: "zod 4 toJSONSchema", schema: z4.toJSONSchema(s, { unrepresentable: "any" }) });
}
process.stdout.write(JSON.stringify(out));
