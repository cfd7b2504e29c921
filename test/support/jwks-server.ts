import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';

/**
 * An OpenID provider's key publication for tests: a real HTTP server answering
 * `GET /.well-known/openid-configuration` (issuer and `jwks_uri`) and `GET /jwks`, with key pairs
 * made by `jose`. It signs tokens as the provider would, forges the classic bad ones (`alg: none`,
 * HS256 keyed with the public key) and rotates its keys, so a verifier meets a real network peer.
 *
 * ```ts
 * const idp = await startJwksServer();                  // one RS256 key, published
 * const token = await idp.sign({ tenant: 'acme', roles: ['reader'] });
 * const next = await idp.addKey({ publish: false });    // signs, but not in /jwks yet
 * idp.publishKey(next);                                  // now it is
 * await idp.rotate();                                    // a new key in, every other key out
 * ```
 */
export interface JwksServer {
  /** `http://127.0.0.1:<port>`: the `iss` of every token and of the discovery document. */
  readonly issuer: string;
  readonly jwksUrl: string;
  /** The `aud` tokens carry unless `sign` is told otherwise. */
  readonly audience: string;
  /** How often each document was served (including refusals while unavailable). */
  readonly requests: { discovery: number; jwks: number };
  /**
   * A token with `iss`, `aud`, `sub: 'user-1'`, `iat` and `exp` (5 minutes) filled in; `claims`
   * override them, and a claim set to `undefined` is left out. Signed with the newest key unless
   * `kid` names another (published or not). `alg: 'none'` gives an unsigned token; `alg: 'HS256'`
   * (or HS384/HS512) signs with HMAC keyed by the key's public SPKI PEM, the algorithm-confusion
   * forgery. `header` is merged over the protected header (`{kid: undefined}` drops the kid).
   */
  sign(claims?: JWTPayload, options?: SignOptions): Promise<string>;
  /** Makes a key pair that becomes the default signing key; published in `/jwks` unless told otherwise. */
  addKey(options?: { alg?: AsymmetricAlgorithm; publish?: boolean }): Promise<string>;
  publishKey(kid: string): void;
  /** Takes a key out of `/jwks`; it can still sign, as a stolen or retired key would. */
  dropKey(kid: string): void;
  /** Adds a new published key and drops every other one; returns the new kid. */
  rotate(): Promise<string>;
  /** While unavailable, both documents answer 503. */
  setAvailable(available: boolean): void;
  close(): Promise<void>;
}

export type AsymmetricAlgorithm =
  'RS256' | 'RS384' | 'RS512' | 'PS256' | 'PS384' | 'PS512' | 'ES256' | 'ES384' | 'ES512' | 'EdDSA';

export interface SignOptions {
  readonly kid?: string;
  readonly alg?: AsymmetricAlgorithm | 'none' | 'HS256' | 'HS384' | 'HS512';
  readonly header?: Record<string, unknown>;
}

interface KeyPair {
  readonly alg: AsymmetricAlgorithm;
  readonly privateKey: CryptoKey;
  readonly publicKey: CryptoKey;
  readonly publicJwk: JWK;
  published: boolean;
}

export async function startJwksServer(
  options: { audience?: string; alg?: AsymmetricAlgorithm } = {},
): Promise<JwksServer> {
  const keys = new Map<string, KeyPair>();
  const requests = { discovery: 0, jwks: 0 };
  let available = true;
  let signingKid = '';
  let issuer = '';

  const server: Server = createServer((req, res) => {
    const send = (status: number, body: unknown) =>
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const path = new URL(req.url ?? '/', issuer).pathname;
    if (req.method !== 'GET') return send(405, { error: 'method not allowed' });
    if (path === '/.well-known/openid-configuration') requests.discovery += 1;
    else if (path === '/jwks') requests.jwks += 1;
    else return send(404, { error: 'not found' });
    if (!available) return send(503, { error: 'temporarily unavailable' });
    if (path === '/jwks') {
      return send(200, { keys: [...keys.values()].filter((key) => key.published).map((key) => key.publicJwk) });
    }
    send(200, {
      issuer,
      jwks_uri: `${issuer}/jwks`,
      id_token_signing_alg_values_supported: [...new Set([...keys.values()].map((key) => key.alg))],
      response_types_supported: ['code'],
      subject_types_supported: ['public'],
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const audience = options.audience ?? 'block-ledger';

  const keyPair = (kid: string) => {
    const key = keys.get(kid);
    if (!key) throw new Error(`the JWKS server has no key ${kid}`);
    return key;
  };

  const addKey: JwksServer['addKey'] = async ({ alg = options.alg ?? 'RS256', publish = true } = {}) => {
    const kid = `key-${keys.size + 1}`;
    const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
    const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
    keys.set(kid, { alg, privateKey, publicKey, publicJwk, published: publish });
    signingKid = kid;
    return kid;
  };
  await addKey();

  const sign: JwksServer['sign'] = async (claims = {}, { kid = signingKid, alg, header = {} } = {}) => {
    const key = keyPair(kid);
    const now = Math.floor(Date.now() / 1000);
    const payload = { iss: issuer, aud: audience, sub: 'user-1', iat: now, exp: now + 300, ...claims };
    const protectedHeader = { alg: alg ?? key.alg, kid, ...header };
    if (protectedHeader.alg === 'none') return `${base64url(protectedHeader)}.${base64url(payload)}.`;
    const signingKey = protectedHeader.alg.startsWith('HS')
      ? new TextEncoder().encode(await exportSPKI(key.publicKey))
      : key.privateKey;
    return new SignJWT(payload).setProtectedHeader(protectedHeader).sign(signingKey);
  };

  return {
    issuer,
    jwksUrl: `${issuer}/jwks`,
    audience,
    requests,
    sign,
    addKey,
    publishKey: (kid) => {
      keyPair(kid).published = true;
    },
    dropKey: (kid) => {
      keyPair(kid).published = false;
    },
    rotate: async () => {
      const kid = await addKey();
      for (const [other, key] of keys) key.published = other === kid;
      return kid;
    },
    setAvailable: (value) => {
      available = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
