import { Inject, Injectable, Optional } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';
import { ApiKeyStore } from './api-key-store.js';
import { AuthenticationError, type Principal } from './principal.js';

/** Verifies bearer JWTs when OIDC is configured (the `jwt-verifier` factory). */
export interface TokenVerifier {
  verify(token: string): Promise<Principal>;
}
export const JWT_VERIFIER = Symbol('JWT_VERIFIER');

/**
 * Turns a request's credential into a principal: `authorization: Bearer <credential>` (or
 * `x-api-key`, which Anthropic's clients send). An API key is recognised by its `blk_` prefix;
 * anything else is a JWT when OIDC is configured.
 */
@Injectable()
export class Authenticator {
  constructor(
    private readonly keys: ApiKeyStore,
    @Optional() @Inject(JWT_VERIFIER) private readonly jwt?: TokenVerifier,
  ) {}

  authenticate(request: CredentialCarrier): Promise<Principal> {
    const credential = presentedCredential(request);
    if (credential.startsWith('blk_')) return this.keys.verify(credential);
    if (!this.jwt) return Promise.reject(new AuthenticationError('malformed', 'not an API key'));
    return this.jwt.verify(credential);
  }
}

/** A request as Node received it: `rawHeaders` holds every header line, `headers` the first of a repeated `authorization`. */
export type CredentialCarrier = Pick<IncomingMessage, 'headers' | 'rawHeaders'>;

function presentedCredential({ headers, rawHeaders }: CredentialCarrier): string {
  // A proxy in front may act on another credential than the one taken here: two are refused, not chosen between.
  if (rawHeaders.filter((name, index) => index % 2 === 0 && name.toLowerCase() === 'authorization').length > 1)
    throw new AuthenticationError('malformed', 'more than one authorization header');
  const authorization = headers.authorization;
  const apiKey = headers['x-api-key'];
  if (authorization !== undefined) {
    const match = /^Bearer ([\x21-\x7e]{1,8192})$/i.exec(authorization);
    if (!match) throw new AuthenticationError('malformed', 'the authorization header is not `Bearer <credential>`');
    if (apiKey !== undefined && apiKey !== match[1])
      throw new AuthenticationError('malformed', 'authorization and x-api-key name different credentials');
    return match[1];
  }
  if (typeof apiKey === 'string' && apiKey.length > 0 && apiKey.length <= 8192) return apiKey;
  throw new AuthenticationError('missing', 'no credential');
}
