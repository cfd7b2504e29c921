import { canonicalJson } from './canonical-json.js';
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
