import { Injectable, type OnModuleDestroy } from '@nestjs/common';
import { ApiKeyStore, KEY_CACHE_MS } from './api-key-store.js';
import { routeRefusal } from './auth.guard.js';
import { Authenticator, type CredentialCarrier } from './authenticator.js';
import { AuthenticationError, type Principal } from './principal.js';

/** A response that outlives its request's check, and what it was admitted as. */
interface Watched {
  readonly request: CredentialCarrier;
  readonly route: string;
  principal: Principal;
  readonly onEnded: () => void;
  timer: NodeJS.Timeout | undefined;
}

/**
 * The guard checks a credential when a request arrives; a live feed stays open for hours after
 * that. Each watched response has its credential verified again, as a new request's would be: as
 * it starts (a change heard while it opened), at once when its key changes on any instance
 * (ApiKeyStore hears revocations) or when changes may have gone unheard, at its expiry, and at
 * least every KEY_CACHE_MS (a token whose signing key the provider withdrew). A credential that is
 * refused, or no longer admits the route or the tenant it was admitted for, ends the response. One
 * that cannot be checked now (the key store or the provider unreachable) is kept and checked again
 * later: the feed depends on the same database.
 */
@Injectable()
export class CredentialWatch implements OnModuleDestroy {
  private readonly watched = new Set<Watched>();
  private readonly stopListening: () => void;

  constructor(
    private readonly authenticator: Authenticator,
    keys: ApiKeyStore,
  ) {
    this.stopListening = keys.onKeyChange((keyId) => {
      for (const entry of this.watched)
        if (keyId === undefined || entry.principal.credentialId === `key:${keyId}`) void this.check(entry);
    });
  }

  /** Watches the credential `request` presents, admitted to `route` as `principal`; `onEnded` once it no longer would be. */
  watch(request: CredentialCarrier, route: string, principal: Principal, onEnded: () => void): () => void {
    const entry: Watched = { request, route, principal, onEnded, timer: undefined };
    this.watched.add(entry);
    // Checked once more now: a change heard while the feed was opening (after the guard) reached no watch.
    void this.check(entry);
    return () => this.unwatch(entry);
  }

  onModuleDestroy(): void {
    this.stopListening();
    for (const entry of this.watched) this.unwatch(entry);
  }

  private schedule(entry: Watched): void {
    clearTimeout(entry.timer);
    const delay = Math.max(0, Math.min(KEY_CACHE_MS, untilExpiry(entry.principal)));
    entry.timer = setTimeout(() => void this.check(entry), delay);
    entry.timer.unref();
  }

  private async check(entry: Watched): Promise<void> {
    const admitted = await this.stillAdmits(entry);
    if (!this.watched.has(entry)) return;
    if (admitted) return this.schedule(entry);
    this.unwatch(entry);
    entry.onEnded();
  }

  /** Whether the credential would be let in again as it was; yes while it cannot be checked. */
  private async stillAdmits(entry: Watched): Promise<boolean> {
    // Past its expiry a credential is refused whoever is asked, even a provider that cannot be reached now.
    if (untilExpiry(entry.principal) <= 0) return false;
    try {
      const principal = await this.authenticator.authenticate(entry.request);
      const admitted =
        routeRefusal(entry.route, principal) === undefined &&
        principal.tenant === entry.principal.tenant &&
        principal.credentialId === entry.principal.credentialId;
      if (admitted) entry.principal = principal;
      return admitted;
    } catch (error) {
      return !(error instanceof AuthenticationError);
    }
  }

  private unwatch(entry: Watched): void {
    clearTimeout(entry.timer);
    this.watched.delete(entry);
  }
}

/** Milliseconds until the credential stops verifying; infinite for one that never expires. */
const untilExpiry = ({ expiresAt }: Principal) => (expiresAt ?? Number.POSITIVE_INFINITY) - Date.now();
