import { hash } from 'node:crypto';

/**
 * A name-based UUID (RFC 9562 version 5 layout over SHA-1): the same name always gives the same
 * id. Chunk events use `chunk:<messageId>:<seq>`, so a retried batch carries the ids the log
 * already holds and is recorded once.
 */
export function nameUuid(name: string): string {
  const bytes = hash('sha1', `block-ledger:${name}`, 'buffer').subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x50;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
