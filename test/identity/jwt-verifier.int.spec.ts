import { loadConfig, type OidcConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { createJwtVerifier, type JwtVerifier } from '../../apps/ledger/src/identity/jwt-verifier.js';
import { IdentityProviderUnavailableError } from '../../apps/ledger/src/identity/identity-provider-error.js';
import { AuthenticationError, type AuthenticationFailure } from '../../apps/ledger/src/identity/principal.js';
import { startJwksServer, type JwksServer } from '../support/jwks-server.js';

describe('JWT verifier against a JWKS server over HTTP', () => {
  let idp: JwksServer;
  beforeEach(async () => {
    idp = await startJwksServer();
  });
  afterEach(async () => {
    await idp?.close();
  });

  // The service's defaults, as its configuration loader gives them.
  const config = (overrides: Partial<OidcConfig> = {}): OidcConfig => ({
    ...loadConfig({ LEDGER_OIDC_ISSUER: idp.issuer, LEDGER_OIDC_AUDIENCE: idp.audience }).oidc!,
    ...overrides,
  });
  const verifierOf = (overrides: Partial<OidcConfig> = {}) => createJwtVerifier(config(overrides));
  const claims = { tenant: 'acme', roles: ['reader'] };
  const now = () => Math.floor(Date.now() / 1000);

  async function refusal(token: string, verifier: JwtVerifier = verifierOf()): Promise<AuthenticationFailure> {
    const error = await verifier.verify(token).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(AuthenticationError);
    return (error as AuthenticationError).reason;
  }

  it('turns a valid token, keys found through discovery, into a principal', async () => {
    const exp = now() + 60;
    const token = await idp.sign({ sub: 'alice', tenant: 'acme', roles: ['reader', 'reviewer'], exp });
    const principal = await verifierOf({ clockSkewSeconds: 7 }).verify(token);
    const name = `jwt:${idp.issuer}#alice`;
    expect(principal).toEqual({
      tenant: 'acme',
      roles: new Set(['reader', 'reviewer']),
      subject: name,
      actor: name,
      credentialId: name,
      // The token is refused from then on: its exp, with the skew the verifier tolerates.
      expiresAt: (exp + 7) * 1_000,
    });
    expect(idp.requests).toEqual({ discovery: 1, jwks: 1 });
  });

  it('uses LEDGER_OIDC_JWKS_URL without discovery, and caches the key set', async () => {
    const verifier = verifierOf({ jwksUrl: idp.jwksUrl });
    for (let round = 0; round < 3; round += 1) await verifier.verify(await idp.sign(claims));
    expect(idp.requests).toEqual({ discovery: 0, jwks: 1 });
  });

  it.each(['PS256', 'ES256', 'ES384', 'EdDSA'] as const)('accepts %s', async (alg) => {
    const kid = await idp.addKey({ alg });
    expect(await verifierOf().verify(await idp.sign(claims, { kid }))).toMatchObject({ tenant: 'acme' });
  });

  it('refuses an expired token, and tolerates the configured clock skew', async () => {
    expect(await refusal(await idp.sign({ ...claims, exp: now() - 60 }))).toBe('expired');
    await verifierOf().verify(await idp.sign({ ...claims, exp: now() - 10 }));
    expect(await refusal(await idp.sign({ ...claims, exp: now() - 10 }), verifierOf({ clockSkewSeconds: 0 }))).toBe(
      'expired',
    );
  });

  it('refuses a token that is not yet valid, within the skew it is accepted', async () => {
    expect(await refusal(await idp.sign({ ...claims, nbf: now() + 60 }))).toBe('invalid_claims');
    await verifierOf().verify(await idp.sign({ ...claims, nbf: now() + 10 }));
  });

  it('refuses a wrong audience or issuer, even when the signature is good', async () => {
    expect(await refusal(await idp.sign({ ...claims, aud: 'another-service' }))).toBe('invalid_claims');
    expect(await refusal(await idp.sign({ ...claims, iss: 'https://issuer.example' }))).toBe('invalid_claims');
    await verifierOf().verify(await idp.sign({ ...claims, aud: ['another-service', idp.audience] }));
  });

  it('refuses alg none and HS256 keyed with the public key, before fetching any key', async () => {
    expect(await refusal(await idp.sign(claims, { alg: 'none' }))).toBe('bad_signature');
    expect(await refusal(await idp.sign(claims, { alg: 'HS256' }))).toBe('bad_signature');
    expect(await refusal(await idp.sign(claims, { alg: 'HS512', header: { kid: undefined } }))).toBe('bad_signature');
    expect(idp.requests).toEqual({ discovery: 0, jwks: 0 });
  });

  it('refuses a tampered payload, and another key under a published kid whatever jwk or jku says', async () => {
    const [header, , signature] = (await idp.sign(claims)).split('.');
    const forgedPayload = Buffer.from(JSON.stringify({ ...claims, roles: ['admin'] })).toString('base64url');
    expect(await refusal(`${header}.${forgedPayload}.${signature}`)).toBe('bad_signature');
    const stranger = await idp.addKey({ publish: false });
    const lies = { kid: 'key-1', jku: `${idp.issuer}/attacker-jwks`, jwk: { kty: 'RSA', n: 'AQAB', e: 'AQAB' } };
    expect(await refusal(await idp.sign(claims, { kid: stranger, header: lies }))).toBe('bad_signature');
  });

  it.each([
    ['not a JWT', 'not-a-token'],
    ['three empty parts', '..'],
    ['a header that is not JSON', 'eyJub3Q.eyJzdWIiOiJ4In0.c2ln'],
  ])('refuses %s as malformed', async (_case, token) => {
    expect(await refusal(token)).toBe('malformed');
  });

  it('requires sub and exp', async () => {
    expect(await refusal(await idp.sign({ ...claims, sub: undefined }))).toBe('invalid_claims');
    expect(await refusal(await idp.sign({ ...claims, sub: '' }))).toBe('invalid_claims');
    expect(await refusal(await idp.sign({ ...claims, exp: undefined }))).toBe('invalid_claims');
  });

  it.each([
    ['missing', undefined],
    ['not a tenant name', 'Acme/payments'],
    ['not a string', 42],
  ])('refuses a tenant claim that is %s', async (_case, tenant) => {
    expect(await refusal(await idp.sign({ ...claims, tenant }))).toBe('invalid_claims');
  });

  it('reads the tenant from the configured claim', async () => {
    const verifier = verifierOf({ tenantClaim: 'org.tenant' });
    const token = await idp.sign({ ...claims, tenant: 'other', org: { tenant: 'acme' } });
    expect(await verifier.verify(token)).toMatchObject({ tenant: 'acme' });
  });

  it.each([
    ['an array, unknown names ignored', 'roles', { roles: ['reader', 'ledger-superuser', 7, 'auditor'] }],
    ['a space-separated string', 'roles', { roles: 'reader  auditor openid' }],
    ['a dotted path', 'realm_access.roles', { realm_access: { roles: ['reader', 'auditor'] } }],
    ['a claim name holding dots', 'https://x.example/roles', { 'https://x.example/roles': ['reader', 'auditor'] }],
  ])('reads roles given as %s', async (_case, rolesClaim, roleClaims) => {
    const token = await idp.sign({ tenant: 'acme', roles: undefined, ...roleClaims });
    expect((await verifierOf({ rolesClaim }).verify(token)).roles).toEqual(new Set(['reader', 'auditor']));
  });

  it('gives no roles for a missing claim or foreign names; refuses a roles claim of another type', async () => {
    expect((await verifierOf().verify(await idp.sign({ tenant: 'acme' }))).roles).toEqual(new Set());
    expect((await verifierOf().verify(await idp.sign({ tenant: 'acme', roles: ['owner'] }))).roles).toEqual(new Set());
    expect(await refusal(await idp.sign({ tenant: 'acme', roles: { reader: true } }))).toBe('invalid_claims');
  });

  it('refuses an unknown kid, then accepts it once the provider publishes it', async () => {
    const verifier = verifierOf({ jwksCooldownMs: 0 });
    await verifier.verify(await idp.sign(claims));
    const next = await idp.addKey({ publish: false });
    const token = await idp.sign(claims, { kid: next });
    expect(await refusal(token, verifier)).toBe('unknown');
    expect(idp.requests.jwks).toBe(2);
    idp.publishKey(next);
    expect(await verifier.verify(token)).toMatchObject({ tenant: 'acme' });
    expect(idp.requests.jwks).toBe(3);
  });

  it('refetches for unknown kids at most once per cooldown', async () => {
    const verifier = verifierOf({ jwksCooldownMs: 60_000 });
    await verifier.verify(await idp.sign(claims));
    const next = await idp.addKey();
    expect(await refusal(await idp.sign(claims, { kid: next }), verifier)).toBe('unknown');
    expect(await refusal(await idp.sign(claims, { header: { kid: 'invented' } }), verifier)).toBe('unknown');
    expect(idp.requests.jwks).toBe(1);
  });

  it('stops accepting a key the provider dropped once the key set is refetched', async () => {
    const verifier = verifierOf({ jwksMaxAgeMs: 0 });
    const old = await idp.sign(claims);
    await verifier.verify(old);
    const next = await idp.rotate();
    expect(await refusal(old, verifier)).toBe('unknown');
    expect(await verifier.verify(await idp.sign(claims, { kid: next }))).toMatchObject({ tenant: 'acme' });
  });

  it('reports an unreachable provider as unavailable, not as a bad credential, and retries discovery', async () => {
    const verifier = verifierOf();
    const token = await idp.sign(claims);
    idp.setAvailable(false);
    await expect(verifier.verify(token)).rejects.toBeInstanceOf(IdentityProviderUnavailableError);
    idp.setAvailable(true);
    expect(await verifier.verify(token)).toMatchObject({ tenant: 'acme' });
    expect(idp.requests.discovery).toBe(2);
  });

  it('refuses a discovery document that names another issuer (here: without the trailing slash)', async () => {
    const verifier = verifierOf({ issuer: `${idp.issuer}/` });
    const token = await idp.sign({ ...claims, iss: `${idp.issuer}/` });
    await expect(verifier.verify(token)).rejects.toBeInstanceOf(IdentityProviderUnavailableError);
    expect(idp.requests).toEqual({ discovery: 1, jwks: 0 });
  });
});
