import {
  createRemoteJWKSet,
  errors,
  jwtVerify,
  type JWTPayload,
  type JWTVerifyGetKey,
  type RemoteJWKSetOptions,
} from 'jose';
import { isJsonObject } from '#core';
import { IdentityProviderUnavailableError } from './identity-provider-error.js';
import type { OidcConfig } from '../config/ledger-config.js';
import {
  AuthenticationError,
  ROLES,
  TENANT_PATTERN,
  type AuthenticationFailure,
  type Principal,
  type Role,
} from './principal.js';

/**
 * Asymmetric algorithms only. With a symmetric one, the provider's published key would be the
 * HMAC secret, so anyone could sign (the HS256-with-the-public-key forgery); `none` signs nothing.
 */
const ACCEPTED_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
const FETCH_TIMEOUT_MS = 5_000;
/** OpenID Connect Core §2: at most 255 ASCII characters; control characters would garble the recorded actor. */
const SUBJECT = /^[^\p{Cc}]{1,255}$/u;

export interface JwtVerifier {
  /** The principal a bearer JWT names; throws AuthenticationError or IdentityProviderUnavailableError. */
  verify(token: string): Promise<Principal>;
}

/**
 * Verifies bearer JWTs from one OpenID provider: signature against its JWKS (keys picked by
 * `kid`), `iss`, `aud`, `exp` and `nbf` with the configured clock skew. `sub` and `exp` are
 * required, and so is the tenant claim: a token that names no tenant is refused rather than put
 * in the default tenant, where it could read data its issuer never meant to grant.
 */
export function createJwtVerifier(config: OidcConfig): JwtVerifier {
  const keys = keySetOf(config);
  return {
    async verify(token) {
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, keys, {
          issuer: config.issuer,
          audience: config.audience,
          algorithms: ACCEPTED_ALGORITHMS,
          clockTolerance: config.clockSkewSeconds,
          requiredClaims: ['sub', 'exp'],
        }));
      } catch (error) {
        throw refusalOf(error);
      }
      return principalOf(payload, config);
    },
  };
}

/**
 * jose's remote key set: fetched on first use, cached for `jwksMaxAgeMs`, refetched for an
 * unknown `kid` at most once per `jwksCooldownMs`. Without a JWKS URL the provider's discovery
 * document names it; a failed discovery is retried by the next verification.
 */
function keySetOf(config: OidcConfig): JWTVerifyGetKey {
  const options: RemoteJWKSetOptions = {
    cooldownDuration: config.jwksCooldownMs,
    cacheMaxAge: config.jwksMaxAgeMs,
    timeoutDuration: FETCH_TIMEOUT_MS,
  };
  if (config.jwksUrl) return createRemoteJWKSet(new URL(config.jwksUrl), options);
  let discovered: Promise<JWTVerifyGetKey> | undefined;
  return async (header, token) => {
    discovered ??= discoverJwksUrl(config.issuer).then(
      (url) => createRemoteJWKSet(url, options),
      (error: unknown) => {
        discovered = undefined;
        throw error;
      },
    );
    return (await discovered)(header, token);
  };
}

async function discoverJwksUrl(issuer: string): Promise<URL> {
  const location = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
  let document: unknown;
  try {
    const response = await fetch(location, {
      redirect: 'manual',
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      headers: { accept: 'application/json' },
    });
    if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
    document = await response.json();
  } catch (error) {
    throw new IdentityProviderUnavailableError(`OIDC discovery at ${location} failed: ${messageOf(error)}`);
  }
  const { issuer: named, jwks_uri: jwksUri } = (document ?? {}) as Record<string, unknown>;
  // OpenID Connect Discovery §4.3: the document must name exactly the issuer it was fetched for.
  if (named !== issuer) {
    throw new IdentityProviderUnavailableError(
      `OIDC discovery at ${location} names issuer ${JSON.stringify(named)}, not LEDGER_OIDC_ISSUER ${issuer}`,
    );
  }
  if (typeof jwksUri !== 'string' || !URL.canParse(jwksUri) || !/^https?:$/.test(new URL(jwksUri).protocol)) {
    throw new IdentityProviderUnavailableError(`OIDC discovery at ${location} has no http(s) jwks_uri`);
  }
  return new URL(jwksUri);
}

function refusalOf(error: unknown): Error {
  const reason = failureOf(error);
  if (reason) return new AuthenticationError(reason, `bearer JWT refused: ${messageOf(error)}`);
  if (error instanceof IdentityProviderUnavailableError) return error;
  return new IdentityProviderUnavailableError(`the OpenID provider's key set is unusable: ${messageOf(error)}`);
}

/** What about the token made jose refuse it; undefined when the fault lies with the provider's keys. */
function failureOf(error: unknown): AuthenticationFailure | undefined {
  if (error instanceof errors.JWTExpired) return 'expired';
  if (error instanceof errors.JWTClaimValidationFailed) return 'invalid_claims';
  if (error instanceof errors.JWSSignatureVerificationFailed || error instanceof errors.JOSEAlgNotAllowed) {
    return 'bad_signature';
  }
  // No key, or several, match the token's `kid` and `alg`: it names no key the provider publishes.
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys) return 'unknown';
  const malformed = [errors.JWSInvalid, errors.JWTInvalid, errors.JOSENotSupported];
  if (malformed.some((kind) => error instanceof kind)) return 'malformed';
  return undefined;
}

function principalOf(payload: JWTPayload, config: OidcConfig): Principal {
  const { sub } = payload;
  if (typeof sub !== 'string' || !SUBJECT.test(sub)) {
    throw new AuthenticationError('invalid_claims', 'claim sub must be 1 to 255 characters, no control characters');
  }
  const tenant = claimAt(payload, config.tenantClaim);
  if (typeof tenant !== 'string' || !TENANT_PATTERN.test(tenant)) {
    const rule = `claim ${config.tenantClaim} must name a tenant (${TENANT_PATTERN})`;
    throw new AuthenticationError('invalid_claims', rule);
  }
  const name = `jwt:${config.issuer}#${sub}`;
  const roles = rolesOf(claimAt(payload, config.rolesClaim), config.rolesClaim);
  // jose refuses the token from `exp` plus the tolerance on (`exp` is required, so a number here).
  const expiresAt = ((payload.exp as number) + config.clockSkewSeconds) * 1_000;
  return { tenant, roles, subject: name, actor: name, credentialId: name, expiresAt };
}

/** A claim by its exact name (namespaced claims like `https://x.example/roles` hold dots), else by dotted path. */
function claimAt(payload: JWTPayload, name: string): unknown {
  if (Object.hasOwn(payload, name)) return payload[name];
  let value: unknown = payload;
  for (const step of name.split('.')) {
    if (!isJsonObject(value) || !Object.hasOwn(value, step)) return undefined;
    value = value[step];
  }
  return value;
}

/** Role names the ledger does not know are ignored: providers put many roles in one claim. */
function rolesOf(claim: unknown, claimName: string): ReadonlySet<Role> {
  if (claim === undefined) return new Set();
  const names: unknown[] | undefined =
    typeof claim === 'string' ? claim.split(/\s+/) : Array.isArray(claim) ? claim : undefined;
  if (!names) {
    const rule = `claim ${claimName} must be an array of role names or a space-separated string`;
    throw new AuthenticationError('invalid_claims', rule);
  }
  return new Set(names.filter(isRole));
}

const isRole = (name: unknown): name is Role => (ROLES as readonly unknown[]).includes(name);

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
