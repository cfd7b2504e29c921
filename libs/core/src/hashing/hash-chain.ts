import { hash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';

/** The hash a stream's first event chains from. */
export const GENESIS_HASH = '0'.repeat(64);

/** What the chain hash covers: everything about an event except its global position, which the log assigns at commit. */
export interface HashedEventContent {
  readonly streamId: string;
  readonly revision: bigint;
  readonly id: string;
  readonly type: string;
  readonly data: unknown;
  readonly recordedAt: string;
  readonly schemaVersion: number;
  readonly correlationId: string | null;
  readonly causationId: string | null;
  readonly actor: string;
  readonly tenant: string;
}

/** One-shot hashing: half the cost of a `createHash` object for the short texts hashed per chunk. */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}

/** SHA-256 over the previous hash and the canonical JSON of the event, chaining each stream. */
export function chainHash(prevHash: string, event: HashedEventContent): string {
  return sha256Hex(`${prevHash}\n${canonicalJson({ ...event, revision: event.revision.toString() })}`);
}
