import { createHash, hash } from 'node:crypto';
import { canonicalJson, LARGE_TEXT } from './canonical-json.js';

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

/** The members the chain hash covers, in the order canonical JSON sorts them. */
const HASHED_MEMBERS = [
  'actor',
  'causationId',
  'correlationId',
  'data',
  'id',
  'recordedAt',
  'revision',
  'schemaVersion',
  'streamId',
  'tenant',
  'type',
] as const satisfies readonly (keyof HashedEventContent)[];

/**
 * SHA-256 over the previous hash and the canonical JSON of the event (its revision as a decimal
 * string), chaining each stream. The object is written member by member in canonical order, so
 * no copy of it is made and no key list sorted per event. `dataJson`, when given, must be
 * `canonicalJson(event.data)`: an appender that made it already (to check and store the data)
 * passes it rather than have it made again. Large data is hashed as it is, between the text
 * before it and after it, rather than copied into one text with them (`LARGE_TEXT`).
 */
export function chainHash(prevHash: string, event: HashedEventContent, dataJson?: string): string {
  let text = `${prevHash}\n{`;
  let beforeData: string | undefined;
  let data = '';
  let first = true;
  for (const member of HASHED_MEMBERS) {
    const value = event[member];
    // As canonicalJson drops an undefined member.
    if (value === undefined) continue;
    text += `${first ? '' : ','}"${member}":`;
    first = false;
    if (member === 'data') {
      beforeData = text;
      data = dataJson ?? canonicalJson(value);
      text = '';
    } else text += member === 'revision' ? `"${event.revision}"` : canonicalJson(value);
  }
  text += '}';
  if (beforeData === undefined) return sha256Hex(text);
  if (data.length < LARGE_TEXT) return sha256Hex(beforeData + data + text);
  return createHash('sha256').update(beforeData).update(data).update(text).digest('hex');
}
