import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWTPayload } from 'jose';

/**
 * An OpenID provider a browser signs in at, for the console's tests: discovery, a JWKS, an
 * authorization endpoint that signs the configured person in at once and redirects back with a
 * code, and a token endpoint that trades the code for an access token only with the PKCE verifier
 * (S256) and the same client and redirect URI. Discovery and tokens allow any origin, as real
 * providers do for single-page apps.
 */
export interface OidcLoginServer {
  readonly issuer: string;
  readonly audience: string;
  /** Codes handed out and tokens issued, and the refusals, in order. */
  readonly log: string[];
  close(): Promise<void>;
}

interface PendingCode {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly challenge: string;
}

const readBody = async (request: IncomingMessage) => {
  let body = '';
  for await (const chunk of request) body += String(chunk);
  return new URLSearchParams(body);
};

export async function startOidcLoginServer(
  person: JWTPayload & { sub: string },
  audience = 'block-ledger',
): Promise<OidcLoginServer> {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'login-1', alg: 'RS256', use: 'sig' };
  const codes = new Map<string, PendingCode>();
  const log: string[] = [];
  let issuer = '';

  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', issuer);
    const send = (status: number, body: unknown) =>
      response
        .writeHead(status, { 'content-type': 'application/json', 'access-control-allow-origin': '*' })
        .end(JSON.stringify(body));
    if (url.pathname === '/.well-known/openid-configuration') {
      return send(200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ['code'],
        code_challenge_methods_supported: ['S256'],
      });
    }
    if (url.pathname === '/jwks') return send(200, { keys: [jwk] });
    if (url.pathname === '/authorize') {
      const query = url.searchParams;
      if (query.get('response_type') !== 'code' || query.get('code_challenge_method') !== 'S256') {
        log.push('authorize refused');
        return send(400, { error: 'invalid_request' });
      }
      const code = randomBytes(16).toString('base64url');
      codes.set(code, {
        clientId: query.get('client_id') ?? '',
        redirectUri: query.get('redirect_uri') ?? '',
        challenge: query.get('code_challenge') ?? '',
      });
      log.push(`code for ${query.get('client_id')}`);
      const back = new URL(query.get('redirect_uri') ?? '');
      back.searchParams.set('code', code);
      back.searchParams.set('state', query.get('state') ?? '');
      return response.writeHead(302, { location: back.toString() }).end();
    }
    if (url.pathname === '/token' && request.method === 'POST') {
      void readBody(request).then(async (form) => {
        const pending = codes.get(form.get('code') ?? '');
        codes.delete(form.get('code') ?? '');
        const verifier = form.get('code_verifier') ?? '';
        const challenge = createHash('sha256').update(verifier).digest('base64url');
        if (
          !pending ||
          form.get('grant_type') !== 'authorization_code' ||
          pending.clientId !== form.get('client_id') ||
          pending.redirectUri !== form.get('redirect_uri') ||
          pending.challenge !== challenge
        ) {
          log.push('token refused');
          return send(400, { error: 'invalid_grant' });
        }
        const accessToken = await new SignJWT({ ...person })
          .setProtectedHeader({ alg: 'RS256', kid: jwk.kid })
          .setIssuer(issuer)
          .setAudience(audience)
          .setIssuedAt()
          .setExpirationTime('5m')
          .sign(privateKey);
        log.push(`token for ${person.sub}`);
        send(200, { access_token: accessToken, token_type: 'Bearer', expires_in: 300 });
      });
      return;
    }
    send(404, { error: 'not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    audience,
    log,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
