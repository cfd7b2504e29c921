import { pipeline, type Readable, type Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from './api-error.js';

/** The gateway's routes forward the client's bytes as they came, under a limit of their own. */
export interface GatewayBodies {
  /** The gateway's routes start with it. */
  readonly path: string;
  readonly maxBytes: number;
}

/** `application/json` and `application/*+json`, read as JSON. */
const JSON_TYPES = /^application\/(?:[^;]*\+)?json(?:;|$)/;
/** A chunk batch's lines as text. */
const TEXT_TYPES = ['application/x-ndjson', 'application/ndjson', 'application/jsonl', 'text/plain'];

const INFLATERS: Readonly<Record<string, () => Transform>> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/**
 * How the service reads request bodies (decision 0043): JSON and NDJSON for the API, raw bytes of
 * any type for the gateway, each under its own limit (the API's is Fastify's `bodyLimit`), inflated
 * when the client compressed them. Any other media type is refused (415): a body no parser read
 * would reach the routes as no body at all, and most fields are optional.
 */
export function readRequestBodies(fastify: FastifyInstance, gateway: GatewayBodies): void {
  const isGateway = (request: FastifyRequest) => request.routeOptions.url?.startsWith(`${gateway.path}/`) === true;
  fastify.addHook('onRoute', (route) => {
    if (route.url.startsWith(`${gateway.path}/`)) route.bodyLimit = gateway.maxBytes;
  });
  fastify.addHook('preParsing', async (request, _reply, payload) => inflated(request, payload));
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser(JSON_TYPES, { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    if (isGateway(request)) return done(null, body);
    if (body.length === 0) return done(null, undefined);
    let value: unknown;
    try {
      value = JSON.parse(body.toString('utf8'));
    } catch {
      return done(new ApiError(400, 'malformed_json', 'the request body is not valid JSON', '(body)'));
    }
    // As Express read JSON: an object or an array (a bare string would read as a batch's NDJSON lines).
    if (value === null || typeof value !== 'object')
      return done(new ApiError(400, 'malformed_json', 'the request body must be a JSON object or array', '(body)'));
    done(null, value);
  });
  fastify.addContentTypeParser(TEXT_TYPES, { parseAs: 'buffer' }, (request, body: Buffer, done) =>
    done(null, isGateway(request) ? body : body.toString('utf8')),
  );
  fastify.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    if (isGateway(request)) return done(null, body);
    const rule = 'send application/json (chunks also as application/x-ndjson)';
    done(new ApiError(415, 'unsupported_media_type', rule, 'content-type'));
  });
}

/**
 * The body as the parsers read it. Fastify checks the limit against the inflated bytes, so a small
 * compressed body cannot unpack past it, and the declared length against the bytes received.
 */
function inflated(request: FastifyRequest, payload: Readable): Readable {
  const encoding = request.headers['content-encoding']?.trim().toLowerCase();
  if (encoding === undefined || encoding === '' || encoding === 'identity') return payload;
  const inflater = INFLATERS[encoding];
  if (!inflater)
    throw new ApiError(415, 'unsupported_media_type', 'Content-Encoding: gzip, deflate or br only', 'content-encoding');
  const decoded = Object.assign(inflater(), { receivedEncodedLength: 0 });
  payload.on('data', (bytes: Buffer) => (decoded.receivedEncodedLength += bytes.length));
  // A body that does not inflate is the client's error, not the service's.
  decoded.once('error', (error: Error) => Object.assign(error, { decodeFailure: true }));
  pipeline(payload, decoded, () => undefined);
  return decoded;
}
