import { describe, expect, it } from '@jest/globals';
import { chainHash, GENESIS_HASH } from '../hashing/hash-chain.js';
import { firstChainBreak, type ChainedEvent } from './chain-check.js';

function chain(count: number): ChainedEvent[] {
  let prevHash = GENESIS_HASH;
  return Array.from({ length: count }, (_, i) => {
    const content = {
      streamId: 'session-s1',
      revision: BigInt(i),
      id: `00000000-0000-4000-8000-00000000000${i}`,
      type: 'message.created',
      data: { n: i },
      recordedAt: '2026-11-22T00:00:00.000Z',
      schemaVersion: 1,
      correlationId: null,
      causationId: null,
      actor: 'key:a',
      tenant: 'default',
    };
    const hash = chainHash(prevHash, content);
    const event = { ...content, position: BigInt(10 + i), prevHash, hash };
    prevHash = hash;
    return event;
  });
}

describe('stream chain check', () => {
  it('holds for an untouched stream', () => {
    expect(firstChainBreak(chain(3))).toBeUndefined();
  });

  it('names an edited event, a removed one and a rewritten link', () => {
    const edited = chain(3).map((event, i) => (i === 1 ? { ...event, data: { n: 99 } } : event));
    expect(firstChainBreak(edited)).toMatchObject({ reason: 'hash_mismatch', revision: '1', position: '11' });
    const removed = chain(3).filter((_, i) => i !== 1);
    expect(firstChainBreak(removed)).toMatchObject({ reason: 'missing_event', revision: '2', position: '12' });
    const relinked = chain(3).map((event, i) => (i === 2 ? { ...event, prevHash: GENESIS_HASH } : event));
    expect(firstChainBreak(relinked)).toMatchObject({ reason: 'broken_link', revision: '2', actual: GENESIS_HASH });
  });
});
