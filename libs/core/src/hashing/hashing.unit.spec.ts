import { canonicalCopy, canonicalJson, jsonBytes, LARGE_TEXT, readBack } from './canonical-json.js';
import { chainHash, GENESIS_HASH, sha256Hex, type HashedEventContent } from './hash-chain.js';
import { nameUuid } from './name-uuid.js';

const event: HashedEventContent = {
  streamId: 'session-1',
  revision: 0n,
  id: '6f1c2d3e-0000-4000-8000-000000000001',
  type: 'session.opened',
  data: { title: 'Ünïcode', nested: { b: 1, a: [1, 'x', null] } },
  recordedAt: '2026-11-22T10:00:00.000Z',
  schemaVersion: 1,
  correlationId: 'session-1',
  causationId: null,
  actor: 'anonymous',
  tenant: 'default',
};

describe('canonicalJson', () => {
  it('sorts keys at every depth and drops undefined members', () => {
    expect(canonicalJson({ b: 1, a: { d: undefined, c: [2, { z: 1, y: 2 }] } })).toBe(
      '{"a":{"c":[2,{"y":2,"z":1}]},"b":1}',
    );
  });
  it('gives the same text for values that differ only in key order', () => {
    expect(canonicalJson({ x: 1, y: [true, null] })).toBe(canonicalJson({ y: [true, null], x: 1 }));
  });
  it('writes arrays, numbers, escapes and non-ASCII keys exactly as stored hashes were computed', () => {
    const data = {
      title: 'Ünïcode',
      nested: { b: 1, a: [1, 'x', null, undefined, -0, 1e21, 0.1, false] },
      é: 1,
      z: { '': true },
      Z: 'é"\\\n',
    };
    expect(canonicalJson(data)).toBe(
      String.raw`{"Z":"é\"\\\n","nested":{"a":[1,"x",null,null,0,1e+21,0.1,false],"b":1},"title":"Ünïcode","z":{"":true},"é":1}`,
    );
    // Pinned: computed by the implementation that hashed every event stored so far; a change here breaks verification.
    expect(chainHash(GENESIS_HASH, { ...event, data })).toBe(
      'd2ace1e16ac751a1970173e1741e3df9c1d5ba64ce9ef12923aeb24f77ac4c37',
    );
  });
  it('refuses numbers JSON cannot carry', () => {
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(TypeError);
    expect(() => canonicalJson([Number.POSITIVE_INFINITY])).toThrow(TypeError);
    expect(() => canonicalJson({ f: () => 1 })).toThrow(TypeError);
  });
  it('refuses values JSON.stringify would write as something else, or a read would give back as something else', () => {
    expect(() => canonicalJson({ at: new Date(0) })).toThrow(TypeError);
    expect(() => canonicalJson([Buffer.from('x')])).toThrow(TypeError);
    expect(() => canonicalJson({ n: 2n ** 60n })).toThrow(TypeError);
    expect(() => canonicalJson([new Number(5)])).toThrow(TypeError);
    expect(() => canonicalJson({ s: new String('ab') })).toThrow(TypeError);
    expect(() => canonicalJson(new Boolean(false))).toThrow(TypeError);
    expect(() => canonicalJson(new Map([['a', 1]]))).toThrow(TypeError);
    expect(() => canonicalJson({ toJSON: () => 'x' })).toThrow(TypeError);
    expect(canonicalJson(Object.assign(Object.create(null), { b: 1, a: 2 }))).toBe('{"a":2,"b":1}');
    expect(canonicalJson({ toJSON: 'a member like any other' })).toBe('{"toJSON":"a member like any other"}');
  });
});

/** Characters whose JSON differs from their UTF-8: a quote, a backslash, controls, surrogates alone and paired. */
const AWKWARD = [
  '"',
  '\\',
  '\n',
  '\t',
  '\b',
  '\f',
  '\r',
  '\u0001',
  '\u001f',
  '\ud800',
  '\udc00',
  '😀',
  'é',
  '\u2028',
  'a',
];

/** A deterministic string of `length` units drawn from AWKWARD and plain letters (a pair counts two). */
function awkwardText(length: number, seed: number): string {
  let state = seed;
  let text = '';
  while (text.length < length) {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    text += state % 3 === 0 ? AWKWARD[state % AWKWARD.length] : 'x';
  }
  return text;
}

describe('jsonBytes', () => {
  const stringified = (value: unknown) => Buffer.byteLength(JSON.stringify(value) ?? '');
  it('is the UTF-8 length of JSON.stringify for strings short and long, escapes and surrogates included', () => {
    for (const length of [0, 1, 40, LARGE_TEXT - 1, LARGE_TEXT, LARGE_TEXT + 3, 3 * LARGE_TEXT]) {
      for (let seed = 1; seed <= 12; seed++) {
        const text = awkwardText(length, seed);
        expect([length, seed, jsonBytes(text)]).toEqual([length, seed, stringified(text)]);
      }
    }
    const long = 'x'.repeat(LARGE_TEXT);
    // A lone surrogate at either end, a pair split by the end, nothing to escape at all.
    for (const text of [`${long}\ud83d`, `\udc00${long}`, `${long}😀`, long, `"${long}\\`, `${long}é`]) {
      expect(jsonBytes(text)).toBe(stringified(text));
      expect(jsonBytes({ [text]: text })).toBe(stringified({ [text]: text }));
    }
  });
  it('is the UTF-8 length of JSON.stringify for values of every kind', () => {
    const sparse = [1, , 3]; // eslint-disable-line no-sparse-arrays
    const values: unknown[] = [
      null,
      true,
      false,
      0,
      -0,
      1e21,
      5e-7,
      -1.5,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      [],
      {},
      [undefined, () => 1, Symbol('s'), null],
      sparse,
      { a: undefined, b: () => 1, c: Symbol('s'), d: 1 },
      { only: undefined },
      { nested: { deep: [{ é: 'ü', '"': '\\' }], empty: [] }, text: awkwardText(LARGE_TEXT * 2, 7) },
      { at: new Date(0), map: new Map([['a', 1]]), boxed: [new Number(5), new String('ab'), new Boolean(false)] },
      { toJSON: () => ({ replaced: true }) },
      // A toJSON giving undefined: the member left out, the item written as null.
      { gone: { toJSON: () => undefined }, kept: [{ toJSON: () => undefined }, 1] },
      Object.assign(Object.create(null), { b: 1, a: 'x' }),
      { ['__proto__']: { polluted: true } },
      undefined,
    ];
    for (const value of values) expect(jsonBytes(value)).toBe(stringified(value));
  });
});

describe('readBack and canonicalCopy', () => {
  const data = {
    zebra: 1,
    dropped: undefined,
    negativeZero: -0,
    apple: { nested: [1, 'two', null, undefined, { gone: undefined, half: 1.5 }], empty: {} },
    ['__proto__']: { polluted: true },
    '10': 'integer-like keys',
    '9': 'come first',
    text: awkwardText(LARGE_TEXT + 10, 3),
  };
  it('gives what reading the canonical JSON back gives, for data large and small', () => {
    const parsed = JSON.parse(canonicalJson(data));
    expect(canonicalCopy(data)).toStrictEqual(parsed);
    expect(readBack(data, canonicalJson(data))).toStrictEqual(parsed);
    const small = { ...data, text: 'short' };
    expect(readBack(small, canonicalJson(small))).toStrictEqual(JSON.parse(canonicalJson(small)));
    // Member order as a read gives it too (integer-like keys first, as JavaScript orders them).
    expect(Object.keys(canonicalCopy(data) as object)).toEqual(Object.keys(parsed));
    expect(Object.is((canonicalCopy(data) as typeof data).negativeZero, 0)).toBe(true);
    expect(canonicalCopy([1, , 3])).toEqual([1, null, 3]); // eslint-disable-line no-sparse-arrays
  });
  it('parses the text when the data holds no large text, however long its JSON: many small values parse quicker', () => {
    const manySmall = Object.fromEntries(Array.from({ length: LARGE_TEXT / 8 }, (_, index) => [`k${index}`, index]));
    expect(canonicalJson(manySmall).length).toBeGreaterThan(LARGE_TEXT);
    // The text given, not the value, is what comes back: it was parsed.
    const padded = `${canonicalJson({ parsed: true })}${' '.repeat(LARGE_TEXT)}`;
    expect(readBack(manySmall, padded)).toEqual({ parsed: true });
    expect(readBack(data, padded)).not.toEqual({ parsed: true });
  });
  it("keeps a member named __proto__ as data, not as the copy's prototype", () => {
    const copy = canonicalCopy(data) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.hasOwn(copy, '__proto__')).toBe(true);
    expect((copy as { polluted?: boolean }).polluted).toBeUndefined();
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
  });
  it('shares no object or array with the value copied', () => {
    const value = { list: [{ a: 1 }], inner: { b: 2 } };
    const copy = canonicalCopy(value) as typeof value;
    value.list[0].a = 9;
    value.list.push({ a: 3 });
    value.inner.b = 9;
    expect(copy).toEqual({ inner: { b: 2 }, list: [{ a: 1 }] });
  });
});

describe('chainHash', () => {
  it('is stable across key order and a JSON round trip', () => {
    const roundTripped = {
      ...event,
      data: JSON.parse(JSON.stringify({ nested: { a: [1, 'x', null], b: 1 }, title: 'Ünïcode' })),
    };
    expect(chainHash(GENESIS_HASH, roundTripped)).toBe(chainHash(GENESIS_HASH, event));
  });
  it('hashes exactly the canonical JSON of the whole event, whether the data comes as a value or as its canonical text', () => {
    const reference = (prevHash: string, content: HashedEventContent) =>
      sha256Hex(`${prevHash}\n${canonicalJson({ ...content, revision: content.revision.toString() })}`);
    const variants: HashedEventContent[] = [
      event,
      { ...event, revision: 12_345_678_901_234_567_890n, causationId: 'c"ause', correlationId: null },
      { ...event, data: [1, { z: 'é', a: null }], schemaVersion: 3, tenant: 'acme', actor: 'key:\u0000x' },
      { ...event, data: 'text', type: 'chunk.text.delta' },
      { ...event, correlationId: undefined as unknown as null },
      // Large data, hashed between the text before and after it rather than copied into one text with them.
      { ...event, data: { text: awkwardText(LARGE_TEXT * 2, 5), seq: 2 } },
      { ...event, data: awkwardText(LARGE_TEXT, 6) },
    ];
    for (const content of variants) {
      expect(chainHash('ab'.repeat(32), content)).toBe(reference('ab'.repeat(32), content));
      expect(chainHash('ab'.repeat(32), content, canonicalJson(content.data))).toBe(
        reference('ab'.repeat(32), content),
      );
    }
  });
  it('changes when the previous hash, the data or the revision changes', () => {
    const base = chainHash(GENESIS_HASH, event);
    expect(chainHash('1'.repeat(64), event)).not.toBe(base);
    expect(chainHash(GENESIS_HASH, { ...event, data: { title: 'other' } })).not.toBe(base);
    expect(chainHash(GENESIS_HASH, { ...event, revision: 1n })).not.toBe(base);
    expect(base).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('nameUuid', () => {
  it('gives the ids already stored for a name: a retried chunk must carry the id its first post was recorded with', () => {
    // Pinned: computed with SHA-1 of `block-ledger:<name>` in the RFC 9562 version 5 layout.
    expect(nameUuid('chunk:m-1:7')).toBe('1c247f23-bab6-5d37-8195-9ee6d57688e2');
    expect(nameUuid('chunk:m-1:8')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(nameUuid('chunk:m-1:8')).not.toBe(nameUuid('chunk:m-1:7'));
  });
});
