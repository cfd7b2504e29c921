import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { stringify as toYaml } from 'yaml';
import type { OpenApiDocument } from './openapi-document.js';

/** The Swagger UI's files its page loads, by content type: no other file of its package is served. */
const UI_FILES: Readonly<Record<string, string>> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'index.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};

const DOCS_CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** A response body with its type and its validator. */
interface Served {
  readonly contentType: string;
  readonly body: string | Buffer;
  readonly etag: string;
}

const served = (contentType: string, body: string | Buffer): Served => ({
  contentType,
  body,
  etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
});

/** Relative links, so the page works behind a proxy that mounts the service under a path. */
const page = (base: string) =>
  served(
    'text/html; charset=utf-8',
    `<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="UTF-8">
    <title>Block Ledger API</title>
    <link rel="stylesheet" type="text/css" href="${base}swagger-ui.css">
    <link rel="stylesheet" type="text/css" href="${base}index.css">
    <link rel="icon" type="image/png" href="${base}favicon-32x32.png" sizes="32x32">
    <link rel="icon" type="image/png" href="${base}favicon-16x16.png" sizes="16x16">
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="${base}swagger-ui-bundle.js" charset="UTF-8"></script>
    <script src="${base}swagger-ui-init.js" charset="UTF-8"></script>
  </body>
</html>
`,
  );

/** The page's links lead from the folder its address names to `/docs/`: the router also takes each route with a trailing slash. */
const PAGES = ['docs/', './', '../'].map(page);
const pageFor = (request: FastifyRequest) => {
  const address = request.url.split(/[?#]/, 1)[0];
  return PAGES[Math.min(address.slice(0, address.lastIndexOf('/')).split('/').length, PAGES.length) - 1];
};

/**
 * Serves the OpenAPI document (JSON at `/docs/openapi.json`, YAML at `/docs-yaml`) and the Swagger UI on it at
 * `/docs`, from `swagger-ui-dist`'s files (decision 0057). The UI is given the document itself and has no box for
 * another's URL: it reads nothing from the page's address, so neither a link nor a reader can make it show another
 * document under the ledger's origin. Every answer carries an ETag: a reload revalidates, 304 when unchanged.
 */
export function serveApiDocs(fastify: FastifyInstance, documentOf: () => OpenApiDocument): void {
  const uiFolder = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  // Made when first asked for, as the UI's files are read: most starts never serve them.
  const document = once(documentOf);
  const jsonText = once(() => JSON.stringify(document()));
  const json = once(() => served('application/json; charset=utf-8', jsonText()));
  const yaml = once(() => served('text/yaml; charset=utf-8', toYaml(document(), { aliasDuplicateObjects: false })));
  const init = once(() =>
    served(
      'text/javascript; charset=utf-8',
      `window.onload = () => {
  window.ui = SwaggerUIBundle({
    spec: ${jsonText()},
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
  });
};
`,
    ),
  );
  const files = new Map<string, Promise<Served>>();
  const send = (request: FastifyRequest, reply: FastifyReply, { contentType, body, etag }: Served) => {
    const headers = {
      etag,
      'cache-control': 'no-cache',
      'x-content-type-options': 'nosniff',
      // The console's origin: nothing else frames it, and it runs only its own files (its styles set inline).
      'content-security-policy': DOCS_CONTENT_SECURITY_POLICY,
      'x-frame-options': 'DENY',
    };
    if (request.headers['if-none-match'] === etag) return reply.status(304).headers(headers).send();
    return reply
      .status(200)
      .headers({ ...headers, 'content-type': contentType })
      .send(body);
  };

  fastify.get('/docs', (request, reply) => send(request, reply, pageFor(request)));
  fastify.get('/docs/index.html', (request, reply) => send(request, reply, pageFor(request)));
  fastify.get('/docs/swagger-ui-init.js', (request, reply) => send(request, reply, init()));
  fastify.get('/docs/openapi.json', (request, reply) => send(request, reply, json()));
  fastify.get('/docs-yaml', (request, reply) => send(request, reply, yaml()));
  // The name is looked up among UI_FILES' own keys: no path a client sends reaches the file system.
  fastify.get<{ Params: { '*': string } }>('/docs/*', async (request, reply) => {
    const name = request.params['*'];
    if (!Object.hasOwn(UI_FILES, name)) return reply.callNotFound();
    if (!files.has(name))
      files.set(
        name,
        readFile(path.join(uiFolder, name)).then(
          (body) => served(UI_FILES[name], body),
          (error: unknown) => {
            files.delete(name);
            throw error;
          },
        ),
      );
    return send(request, reply, await files.get(name)!);
  });
}

function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}
