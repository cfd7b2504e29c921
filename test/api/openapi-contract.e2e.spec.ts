import { readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { parse as parseYaml } from 'yaml';
import { ledgerOpenApiDocument } from '../../apps/ledger/src/api-contracts.js';
import { CONSOLE_FILE_ROUTES } from '../../apps/ledger/src/console/console.contract.js';
import { PERMISSIONS } from '../../apps/ledger/src/identity/permissions.js';
import { API_TYPES_FILE, generatedApiTypes } from '../support/api-types.js';
import { openBrowser } from '../support/browser.js';
import { declaredRoutes } from '../../apps/ledger/src/ledger-app.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { openApiProblems } from '../support/openapi-validator.js';
import { probe } from '../support/probe.js';

/** `METHOD /path` of every operation in the document, in the router's path syntax. */
function documentedRoutes(document: { paths: Record<string, Record<string, unknown>> }): string[] {
  return Object.entries(document.paths).flatMap(([path, operations]) =>
    Object.keys(operations).map((method) => `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`),
  );
}

describe('the OpenAPI document', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it("describes every route the live router serves but the console's files, and nothing else", () => {
    const declared = declaredRoutes(ledger.app)
      .filter((route) => !CONSOLE_FILE_ROUTES.includes(route))
      .sort();
    expect(documentedRoutes(ledgerOpenApiDocument()).sort()).toEqual(declared);
  });

  it('is served at /docs/openapi.json as generated, without a credential, and validates as OpenAPI 3.1', async () => {
    const served = await probe(ledger.baseUrl, 'GET', '/docs/openapi.json');
    expect(served.status).toBe(200);
    expect(served.body).toEqual(JSON.parse(JSON.stringify(ledgerOpenApiDocument())));
    expect(served.body.openapi).toBe('3.1.0');
    expect(await openApiProblems(served.body)).toBeUndefined();
    // The validator does find problems: a parameter that says not where it goes.
    const broken = structuredClone(served.body);
    broken.paths['/health'].get.parameters = [{ name: 'x' }];
    expect(await openApiProblems(broken)).toEqual(expect.any(String));
  });

  it('serves the Swagger UI at /docs and /docs/', async () => {
    for (const path of ['/docs', '/docs/']) {
      const page = await probe(ledger.baseUrl, 'GET', path);
      expect({ path, status: page.status, type: page.headers.get('content-type') }).toMatchObject({
        path,
        status: 200,
        type: expect.stringContaining('text/html'),
      });
      expect(page.body).toContain('swagger-ui');
    }
    const styles = await fetch(`${ledger.baseUrl}/docs/swagger-ui.css`);
    expect({ status: styles.status, type: styles.headers.get('content-type') }).toEqual({
      status: 200,
      type: expect.stringContaining('text/css'),
    });
  });

  it('gives the UI the document itself, and serves none of its package files but those the page loads', async () => {
    const document = JSON.parse(JSON.stringify(ledgerOpenApiDocument()));
    const init = await probe(ledger.baseUrl, 'GET', '/docs/swagger-ui-init.js?url=https://elsewhere.example/api.json');
    expect(init.status).toBe(200);
    // No URL from the page's address reaches the UI: it is given the document, as served at /docs/openapi.json.
    expect(init.body).not.toContain('location');
    const spec = /spec: (\{.*\}),\n/.exec(init.body)?.[1];
    expect(JSON.parse(spec ?? 'null')).toEqual(document);
    const yaml = await probe(ledger.baseUrl, 'GET', '/docs-yaml');
    expect(yaml.headers.get('content-type')).toContain('text/yaml');
    expect(parseYaml(yaml.body)).toEqual(document);
    for (const path of ['/docs/', '/docs/index.html']) {
      const page = await probe(ledger.baseUrl, 'GET', path);
      expect(page.body).toContain('src="./swagger-ui-init.js"');
    }
    expect((await probe(ledger.baseUrl, 'GET', '/docs')).body).toContain('src="docs/swagger-ui-init.js"');
    expect((await probe(ledger.baseUrl, 'GET', '/docs/index.html/')).body).toContain('src="../swagger-ui-init.js"');
    // No box in the UI takes another document's URL.
    expect(init.body).not.toMatch(/DownloadUrl|StandaloneLayout/);
    // A reload revalidates: the same validator gets a 304 and no body.
    const bundle = await fetch(`${ledger.baseUrl}/docs/swagger-ui-bundle.js`);
    await bundle.arrayBuffer();
    const etag = bundle.headers.get('etag') ?? '';
    expect(etag).toMatch(/^"[\w-]{27}"$/);
    const again = await fetch(`${ledger.baseUrl}/docs/swagger-ui-bundle.js`, { headers: { 'if-none-match': etag } });
    expect({ status: again.status, body: await again.text() }).toEqual({ status: 304, body: '' });
    const changed = await fetch(`${ledger.baseUrl}/docs/swagger-ui-bundle.js`, { headers: { 'if-none-match': '"x"' } });
    expect(changed.status).toBe(200);
    // Sent as written: fetch would resolve the dots itself.
    const raw = (path: string) =>
      new Promise<number | undefined>((resolve, reject) =>
        request(`${ledger.baseUrl}/`, { path }, (response) => {
          response.resume();
          resolve(response.statusCode);
        })
          .on('error', reject)
          .end(),
      );
    const refused = [
      '/docs/LICENSE',
      '/docs/package.json',
      '/docs/swagger-ui-bundle.js.map',
      '/docs/../package.json',
      '/docs/%2e%2e/package.json',
      '/docs/..%2fpackage.json',
      '/docs/./swagger-ui.css',
      '/docs//swagger-ui.css',
      '/docs/__proto__',
      '/docs/constructor',
      '/docs/hasOwnProperty',
      '/docs/index.css/..',
      '/docs/swagger-ui-standalone-preset.js',
    ];
    const statuses = await Promise.all(refused.map(raw));
    expect(Object.fromEntries(refused.map((path, index) => [path, statuses[index]]))).toEqual(
      Object.fromEntries(refused.map((path) => [path, 404])),
    );
    expect(await raw('/docs/swagger-ui-bundle.js')).toBe(200);
  });

  it('shows every operation in a real browser, at /docs and /docs/, with every file found and no box for another URL', async () => {
    const operations = documentedRoutes(ledgerOpenApiDocument()).length;
    const browser = await openBrowser();
    try {
      for (const path of ['/docs', '/docs/']) {
        const problems: string[] = [];
        browser.page.on('response', (response) => {
          if (response.status() >= 400) problems.push(`${response.status()} ${response.url()}`);
        });
        browser.page.on('console', (message) => {
          if (message.type() === 'error') problems.push(message.text());
        });
        await browser.page.goto(`${ledger.baseUrl}${path}`);
        await browser.page.locator('.opblock').first().waitFor();
        expect({
          path,
          operations: await browser.page.locator('.opblock').count(),
          urlBoxes: await browser.page.locator('.download-url-wrapper, .topbar input').count(),
          problems,
        }).toEqual({ path, operations, urlBoxes: 0, problems: [] });
        browser.page.removeAllListeners('response');
        browser.page.removeAllListeners('console');
      }
    } finally {
      await browser.close();
    }
  });

  it('gives each operation its roles from the permission table, request schemas, responses and the error shape', () => {
    const document = ledgerOpenApiDocument();
    const problems: string[] = [];
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations) as [string, any][]) {
        const route = `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`;
        const rule = PERMISSIONS[route];
        if (rule === undefined) problems.push(`${route}: not in the permission table`);
        if (rule === 'public' ? operation.security?.length !== 0 : operation.security !== undefined)
          problems.push(`${route}: security does not match the table`);
        if (!operation.description.includes(`Roles: ${rule === 'public' ? 'public' : rule?.join(', ')}.`))
          problems.push(`${route}: roles not stated`);
        const statuses = Object.keys(operation.responses).map(Number);
        if (!statuses.some((status) => status < 300)) problems.push(`${route}: no success`);
        for (const status of statuses.filter((status) => status >= 400 && path !== '/health'))
          if (operation.responses[status].content['application/json'].schema.$ref !== '#/components/schemas/Error')
            problems.push(`${route}: ${status} is not the error shape`);
        if (rule !== 'public' && !statuses.includes(401)) problems.push(`${route}: 401 missing`);
      }
    }
    expect(problems).toEqual([]);
    const chunks = document.paths['/v1/sessions/{sid}/messages/{mid}/chunks'].post as any;
    expect(Object.keys(chunks.requestBody.content)).toEqual(['application/json', 'application/x-ndjson']);
    expect(chunks.parameters.map((parameter: { name: string }) => parameter.name)).toEqual([
      'sid',
      'mid',
      'dialect',
      'seq',
    ]);
    const live = document.paths['/v1/sessions/{sid}/live'].get as any;
    expect(Object.keys(live.responses[200].content['text/event-stream'].schema['x-events'])).toEqual([
      'message',
      'block',
      'selection',
      'toolcall',
      'overflow',
      'credential_ended',
    ]);
    expect(Object.keys((document.components as any).securitySchemes)).toEqual(['bearer', 'apiKey']);
  });

  it('keeps the typed client test/api/ledger-api.ts equal to a fresh openapi-typescript generation', async () => {
    const fresh = await generatedApiTypes();
    if (process.env.UPDATE_API_TYPES === '1') await writeFile(API_TYPES_FILE, fresh);
    const committed = await readFile(API_TYPES_FILE, 'utf8');
    // On a difference: UPDATE_API_TYPES=1 node --experimental-vm-modules node_modules/jest/bin/jest.js test/api
    expect(committed).toBe(fresh);
  });
});
