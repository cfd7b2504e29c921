import { rememberNewest } from '#core';
import { Injectable } from '@nestjs/common';

/** Credentials remembered at once; the oldest is forgotten first (its reads then wait for nothing). */
const MAX_CREDENTIALS = 10_000;

/**
 * Read-your-writes on this instance: the log position of each credential's latest acknowledged
 * session write. A read by that credential waits (bounded) until the read models reflect it, so
 * a producer never reads a state older than its own answer said. Across instances, `?minPosition`
 * carries the same guarantee.
 */
@Injectable()
export class CredentialWrites {
  private readonly latest = new Map<string, bigint>();

  record(credentialId: string, position: bigint): void {
    const known = this.latest.get(credentialId);
    if (known !== undefined && known >= position) return;
    rememberNewest(this.latest, credentialId, position, MAX_CREDENTIALS);
  }

  latestOf(credentialId: string): bigint | undefined {
    return this.latest.get(credentialId);
  }
}
