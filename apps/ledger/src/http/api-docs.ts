import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { stringify as toYaml } from 'yaml';
import type { OpenApiDocument } from './openapi-document.js';

/** The Swagger UI's files its page loads, by content type: no other file of its package is served. */
const UI_FILES: Readonly<Record<string, string>> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'index.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};

/** Relative links, so the page works behind a proxy that mounts the service under a path: from `/docs` they go through `docs/`. */
const page = (base: string) => `<!DOCTYPE html>
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
    <script src="${base}swagger-ui-standalone-preset.js" charset="UTF-8"></script>
    <script src="${base}swagger-ui-init.js" charset="UTF-8"></script>
  </body>
</html>
`;

/**
 * Serves the OpenAPI document (JSON at `/docs/openapi.json`, YAML at `/docs-yaml`) and the Swagger UI
 * on it at `/docs`, from `swagger-ui-dist`'s files (decision 0057). The UI is given the document
 * itself, never a URL from the page's query, so no link can make it load another.
 */
export function serveApiDocs(fastify: FastifyInstance, documentOf: () => OpenApiDocument): void {
  const uiFolder = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  // Made when first asked for, as the UI's files are read: most starts never serve them.
  const document = once(documentOf);
  const json = once(() => JSON.stringify(document()));
  const yaml = once(() => toYaml(document(), { aliasDuplicateObjects: false }));
  const init = once(
    () => `window.onload = () => {
  window.ui = SwaggerUIBundle({
    spec: ${json()},
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: 'StandaloneLayout',
  });
};
`,
  );
  const files = new Map<string, Promise<Buffer>>();
  const send = (reply: FastifyReply, contentType: string, body: string | Buffer) =>
    reply.status(200).headers({ 'content-type': contentType, 'x-content-type-options': 'nosniff' }).send(body);

  // The router ignores a trailing slash: `/docs/` comes here too, and its links are relative to `/docs/`.
  fastify.get('/docs', (request, reply) =>
    send(reply, 'text/html; charset=utf-8', page(request.url.split('?', 1)[0].endsWith('/') ? './' : 'docs/')),
  );
  fastify.get('/docs/index.html', (_request, reply) => send(reply, 'text/html; charset=utf-8', page('./')));
  fastify.get('/docs/swagger-ui-init.js', (_request, reply) => send(reply, 'text/javascript; charset=utf-8', init()));
  fastify.get('/docs/openapi.json', (_request, reply) => send(reply, 'application/json; charset=utf-8', json()));
  fastify.get('/docs-yaml', (_request, reply) => send(reply, 'text/yaml; charset=utf-8', yaml()));
  // The name is looked up among UI_FILES' own keys: no path a client sends reaches the file system.
  fastify.get<{ Params: { '*': string } }>('/docs/*', async (request, reply) => {
    const name = request.params['*'];
    if (!Object.hasOwn(UI_FILES, name)) return reply.callNotFound();
    if (!files.has(name))
      files.set(
        name,
        readFile(path.join(uiFolder, name)).catch((error: unknown) => {
          files.delete(name);
          throw error;
        }),
      );
    return send(reply, UI_FILES[name], await files.get(name)!);
  });
}

function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}
