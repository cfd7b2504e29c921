import { isUtf8 } from 'node:buffer';
import { pipeline, type Readable, type Transform } from 'node:stream';
import { MIMEType, TextDecoder } from 'node:util';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError, MEDIA_TYPES_READ } from './api-error.js';

/** The gateway's routes forward the client's bytes as they came, under a limit of their own. */
export interface GatewayBodies {
  /** The gateway's routes start with it. */
  readonly path: string;
  readonly maxBytes: number;
}

/** `application/json` and `application/*+json`, read as JSON. */
const JSON_TYPES = /^application\/(?:[^;]*\+)?json(?:;|$)/;
/** JSON is Unicode (RFC 8259); as body-parser had it, a JSON body may declare a UTF charset only. */
const JSON_CHARSETS = /^utf-/i;
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
      value = JSON.parse(bodyText(request, body, JSON_CHARSETS));
    } catch (error) {
      if (error instanceof ApiError) return done(error);
      return done(new ApiError(400, 'malformed_json', 'the request body is not valid JSON', '(body)'));
    }
    // As Express read JSON: an object or an array (a bare string would read as a batch's NDJSON lines).
    if (value === null || typeof value !== 'object')
      return done(new ApiError(400, 'malformed_json', 'the request body must be a JSON object or array', '(body)'));
    done(null, value);
  });
  fastify.addContentTypeParser(TEXT_TYPES, { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    if (isGateway(request)) return done(null, body);
    try {
      done(null, bodyText(request, body));
    } catch (error) {
      done(error as ApiError);
    }
  });
  fastify.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    if (isGateway(request)) return done(null, body);
    done(new ApiError(415, 'unsupported_media_type', MEDIA_TYPES_READ, 'content-type'));
  });
}

/**
 * The body as text in the charset its Content-Type declares (UTF-8 when none), without a byte order
 * mark. A charset it cannot decode is refused (415), and so are bytes that are not in that charset
 * (400): a ledger keeps what it was sent, never U+FFFD in its place.
 */
function bodyText(request: FastifyRequest, body: Buffer, allowed?: RegExp): string {
  const charset = charsetOf(request.headers['content-type']) ?? 'utf-8';
  if (/^utf-?8$/i.test(charset)) {
    if (!isUtf8(body)) throw notIn('UTF-8');
    const text = body.toString('utf8');
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  }
  const decoder = allowed === undefined || allowed.test(charset) ? decoderFor(charset) : undefined;
  if (!decoder) throw unreadCharset();
  if (decoder.encoding === 'windows-1252') {
    // Node 20's decoder reads 0x80–0x9F as control characters where windows-1252 (what latin1, iso-8859-1 and
    // us-ascii mean on the web) has € “ ” Š…: refused rather than stored as the wrong characters.
    if (body.some((byte) => byte >= 0x80 && byte <= 0x9f)) throw notIn(charset);
    return body.toString('latin1');
  }
  try {
    return decoder.decode(body);
  } catch {
    throw notIn(charset);
  }
}

/** The declared charset; a Content-Type whose parameters cannot be read, or that declares two, is refused. */
function charsetOf(contentType: string | undefined): string | undefined {
  if (!contentType?.includes(';')) return undefined;
  if ((contentType.match(/charset\s*=/gi)?.length ?? 0) > 1) throw unreadCharset();
  try {
    return new MIMEType(contentType).params.get('charset') ?? undefined;
  } catch {
    throw unreadCharset();
  }
}

function unreadCharset(): ApiError {
  return new ApiError(415, 'unsupported_media_type', 'the declared charset is not read here', 'content-type');
}

/** Its byte order mark is read as such, not as text. */
function decoderFor(charset: string): TextDecoder | undefined {
  try {
    return new TextDecoder(charset, { fatal: true });
  } catch {
    return undefined;
  }
}

function notIn(charset: string): ApiError {
  return new ApiError(400, 'bad_request', `the request body is not valid ${charset}`, '(body)');
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
