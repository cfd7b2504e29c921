/** Who a request is, as verified from its credential. Nothing a client claims about itself ends up here. */
export const ROLES = ['producer', 'reader', 'reviewer', 'auditor', 'admin'] as const;
export type Role = (typeof ROLES)[number];

/** Tenants are short lowercase names; they appear in stream names, so they never hold `/`. */
export const TENANT_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;
export { DEFAULT_TENANT } from '#core';

export interface Principal {
  readonly tenant: string;
  readonly roles: ReadonlySet<Role>;
  /**
   * The person or service behind the credential: separation of duties counts principals by it
   * (`key:<id>` for a key without one, `jwt:<issuer>#<sub>` for a token).
   */
  readonly subject: string;
  /** Recorded as the actor of every event the request appends: `key:<id>:<name>` or `jwt:<issuer>#<sub>`. */
  readonly actor: string;
  /** Rate limits and live-connection caps count per credential: the key id, or the token's subject. */
  readonly credentialId: string;
  /**
   * When the credential stops verifying (ms since the epoch), if it ever does: a key's expiry, a token's `exp`
   * with the clock skew tolerated. An open live feed ends then (CredentialWatch).
   */
  readonly expiresAt?: number;
}

/** Why a credential was refused; counted in /metrics, never told to the client beyond "401". */
export type AuthenticationFailure =
  'missing' | 'malformed' | 'unknown' | 'expired' | 'revoked' | 'bad_signature' | 'invalid_claims';

export class AuthenticationError extends Error {
  constructor(
    readonly reason: AuthenticationFailure,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Actors of the system's own steps. Credentials always produce `key:` or `jwt:` actors, so no
 * credential can take one of these names.
 */
const SYSTEM_ACTOR_PREFIX = 'system:';
export const systemActor = (name: string) => `${SYSTEM_ACTOR_PREFIX}${name}`;
