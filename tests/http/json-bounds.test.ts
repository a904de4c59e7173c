/**
 * The scan that bounds a JSON body's nesting and number of values before it is parsed
 * (src/http/json-bounds.ts): exact at the bounds, blind to what is inside strings, agreeing
 * with JSON.parse on how many values a body holds, and linear on hostile shapes.
 */
import { describe, expect, test } from "bun:test";
import { jsonBoundExceeded, MAX_JSON_DEPTH, MAX_JSON_VALUES } from "../../src/http/json-bounds";
import { seededRandom } from "../../scripts/lib/seeded-random";
import { countJsonValues, heavyChatRequest } from "../helpers/heavy-chat-request";

const scan = (text: string, maxDepth?: number, maxValues?: number) => jsonBoundExceeded(text, maxDepth, maxValues);

const TOO_DEEP = `request body nests deeper than ${MAX_JSON_DEPTH} levels`;
const tooMany = (max: number) => `request body holds more than ${max} JSON values`;

describe("nesting depth", () => {
  const arrays = (levels: number) => "[".repeat(levels) + "]".repeat(levels);
  const objects = (levels: number) => '{"a":'.repeat(levels - 1) + "{}" + "}".repeat(levels - 1);
  const mixed = (levels: number) =>
    Array.from({ length: levels }, (_, i) => (i % 2 ? '{"k":' : "[")).join("") +
    "0" +
    Array.from({ length: levels }, (_, i) => (i % 2 ? "}" : "]"))
      .reverse()
      .join("");

  for (const [shape, build] of [
    ["arrays", arrays],
    ["objects", objects],
    ["arrays and objects", mixed],
  ] as const) {
    test(`${shape}: ${MAX_JSON_DEPTH} levels pass, one more is refused`, () => {
      expect(JSON.parse(build(MAX_JSON_DEPTH))).toBeDefined();
      expect(scan(build(MAX_JSON_DEPTH))).toBeNull();
      expect(scan(build(MAX_JSON_DEPTH + 1))).toBe(TOO_DEEP);
    });
  }

  test("10^5 levels are refused at the first level past the bound, without recursion", () => {
    expect(scan(arrays(100_000))).toBe(TOO_DEEP);
    expect(scan(objects(100_000))).toBe(TOO_DEEP);
  });

  test("depth is what is open at once, not how many containers there are", () => {
    const siblings = "[" + Array.from({ length: 1000 }, () => arrays(MAX_JSON_DEPTH - 1)).join(",") + "]";
    expect(scan(siblings)).toBeNull();
  });
});

describe("what is inside a string is text, not structure", () => {
  test("brackets, braces, commas and colons inside strings are neither levels nor values", () => {
    const text = JSON.stringify({ a: "[".repeat(1000) + "{,:}".repeat(1000) });
    expect(scan(text, 1, 2)).toBeNull();
    expect(scan(text, 1, 1)).toBe(tooMany(1));
  });

  test("escaped quotes do not end a string; an escaped backslash before a quote does not escape it", () => {
    // ["a\"[[[", "b\\", [[ ... ]]]: the brackets after \" are inside the first string.
    const text = '["a\\"[[[[", "b\\\\", [[0]]]';
    expect(JSON.parse(text)).toEqual(['a"[[[[', "b\\", [[0]]]);
    expect(scan(text, 3, 6)).toBeNull();
    expect(scan(text, 2)).toBe(TOO_DEEP.replace(String(MAX_JSON_DEPTH), "2"));
    expect(scan(text, 3, 5)).toBe(tooMany(5));
  });

  test("after an escaped quote, further escapes are still skipped: escaped quotes and backslashes", () => {
    // ["x\"y\"[[[[", "z\"\\", [[0]]]: both strings end only at their last quote.
    const text = '["x\\"y\\"[[[[", "z\\"\\\\", [[0]]]';
    expect(JSON.parse(text)).toEqual(['x"y"[[[[', 'z"\\', [[0]]]);
    expect(scan(text, 3, 6)).toBeNull();
    expect(scan(text, 3, 5)).toBe(tooMany(5));
  });

  test("a string that never closes ends the scan, whatever follows its quote (the parser refuses it)", () => {
    expect(scan('["abc [[[[', 1)).toBeNull();
    expect(scan('["[[[[\\" x', 1)).toBeNull();
  });
});

describe("number of values", () => {
  test("counts every value, not the keys, exactly at the bound", () => {
    const text = '{"a": [1, -2.5e3, "s", true, false, null], "b": {"c": {}}, "d": []}';
    const count = countJsonValues(JSON.parse(text));
    expect(count).toBe(11);
    expect(scan(text, MAX_JSON_DEPTH, count)).toBeNull();
    expect(scan(text, MAX_JSON_DEPTH, count - 1)).toBe(tooMany(count - 1));
  });

  test(`${MAX_JSON_VALUES} values pass, one more is refused`, () => {
    const array = (elements: number) => "[" + Array(elements).fill("0").join(",") + "]";
    expect(scan(array(MAX_JSON_VALUES - 1))).toBeNull();
    expect(scan(array(MAX_JSON_VALUES))).toBe(tooMany(MAX_JSON_VALUES));
  });

  test("agrees with JSON.parse on random documents", () => {
    const rand = seededRandom(30);
    const randomValue = (depth: number): unknown => {
      const pick = Math.floor(rand() * (depth > 5 ? 4 : 6));
      if (pick === 0) return [null, true, false][Math.floor(rand() * 3)];
      if (pick === 1) return [0, -1, 1.5e300, -0.25, 123456][Math.floor(rand() * 5)];
      if (pick === 2) return ['"', "\\", "[{", ",:", "💸", "\u0000", ""][Math.floor(rand() * 7)];
      if (pick === 3) return "plain";
      if (pick === 4) return Array.from({ length: Math.floor(rand() * 5) }, () => randomValue(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(rand() * 5) }, (_, i) => [`k${i}[`, randomValue(depth + 1)]));
    };
    for (let round = 0; round < 500; round++) {
      const value = randomValue(0);
      // Pretty-printed half the time: whitespace between tokens is not a value either.
      const text = JSON.stringify(value, null, round % 2 ? 2 : undefined);
      const count = countJsonValues(value);
      expect({ text, exceeded: scan(text, MAX_JSON_DEPTH, count) }).toEqual({ text, exceeded: null });
      if (count > 1) expect({ text, exceeded: scan(text, MAX_JSON_DEPTH, count - 1) }).toEqual({ text, exceeded: tooMany(count - 1) });
    }
  });

  test("a heavy real request (a 2,048-message agent conversation with 128 tools) is well within both bounds", () => {
    const body = heavyChatRequest();
    expect(countJsonValues(body)).toBeGreaterThan(40_000);
    expect(scan(JSON.stringify(body))).toBeNull();
    expect(scan(JSON.stringify(body, null, 2))).toBeNull();
  });
});

test("hostile shapes of 4 MB are scanned in one linear pass", () => {
  // Not a timing test: each shape must merely finish and answer; the bench
  // (scripts/bench/hostile-bodies.ts) measures the time per MB.
  const size = 4 * 1024 * 1024;
  expect(scan('["' + "x".repeat(size) + '"]')).toBeNull();
  expect(scan('["' + '\\"'.repeat(size / 2) + '"]')).toBeNull();
  expect(scan('["' + "\\".repeat(size) + '"]')).toBeNull();
  expect(scan("[" + "0,".repeat(size / 2) + "0]")).toBe(tooMany(MAX_JSON_VALUES));
});
