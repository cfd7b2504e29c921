import { canonicalJson } from './canonical-json.js';
import { chainHash, GENESIS_HASH, type HashedEventContent } from './hash-chain.js';

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
  it('refuses numbers JSON cannot carry', () => {
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(TypeError);
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
  it('changes when the previous hash, the data or the revision changes', () => {
    const base = chainHash(GENESIS_HASH, event);
    expect(chainHash('1'.repeat(64), event)).not.toBe(base);
    expect(chainHash(GENESIS_HASH, { ...event, data: { title: 'other' } })).not.toBe(base);
    expect(chainHash(GENESIS_HASH, { ...event, revision: 1n })).not.toBe(base);
    expect(base).toMatch(/^[0-9a-f]{64}$/);
  });
});
