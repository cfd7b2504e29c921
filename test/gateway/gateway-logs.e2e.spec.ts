import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { eventually } from '../support/gateway-fixture.js';
import { startProviderDouble, type ProviderDouble } from '../support/provider-doubles/index.js';
import {
  freePort,
  reachableTempDir,
  startService,
  waitUntilHealthy,
  type ServiceProcess,
} from '../support/service-process.js';
import { credentialsOf } from '../support/test-credentials.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * Attack (issue 14, outsider review): read the service's log. Every 5xx is logged at error level
 * inside the request's context, and the request logger binds the request with all its headers —
 * the client's `authorization: Bearer blk_…` included. A gateway call whose upstream cannot answer
 * (a 503 the client can cause at will, e.g. while the provider refuses every key) writes the
 * caller's ledger key to the log. No key may be logged: not the client's, not an upstream one.
 * Since decision 0040 no log line binds the request: a 5xx names its method and path only.
 */
describe('gateway: keys in the service log', () => {
  let database: TestDatabase;
  let double: ProviderDouble;
  let service: ServiceProcess;
  let folder: string;
  const upstreamKey = 'sk-upstream-the-double-refuses';

  beforeAll(async () => {
    database = await createTestDatabase();
    double = await startProviderDouble({ keys: ['sk-some-other-key'] });
    folder = await reachableTempDir('gateway-logs');
    const upstreamsFile = path.join(folder, 'upstreams.json');
    const baseUrl = `${double.baseUrl}/v1`;
    const upstream = { name: 'refusing', protocol: 'openai', baseUrl, models: '*', keys: [{ key: upstreamKey }] };
    await writeFile(upstreamsFile, JSON.stringify({ upstreams: [upstream] }));
    service = startService({
      PORT: String(await freePort()),
      DATABASE_URL: database.connectionString,
      LEDGER_UPSTREAMS: upstreamsFile,
      LOG_LEVEL: 'debug',
    });
    await waitUntilHealthy(service);
  }, 120_000);
  afterAll(async () => {
    service?.child.kill('SIGTERM');
    await service?.exited;
    await double?.close();
    await database?.drop();
    if (folder) await rm(folder, { recursive: true, force: true });
    if (service) await rm(service.dataDir, { recursive: true, force: true });
  });

  it('a gateway call that ends in a 5xx logs neither the caller’s key nor an upstream key', async () => {
    const key = await credentialsOf(service.baseUrl).key('agent', { roles: ['producer', 'reader'] });
    // A credential in the query string too, where a client may put one by mistake.
    const querySecret = 'query-secret-d3a1f0';
    const response = await fetch(`${service.baseUrl}/gateway/openai/v1/chat/completions?api-key=${querySecret}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-any', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(response.status).toBeGreaterThanOrEqual(500);
    await response.text();
    // The refusal's log line comes through the child's stdout a little after the response (bounded wait).
    await eventually(
      async () => service.output(),
      (output) => output.includes('upstream_unavailable'),
    );
    // The secret part of the key (after its id) and the upstream key; the id alone may be logged.
    const secret = key.split('_').slice(2).join('_');
    // Named by their message only, so a failure does not print the key again.
    const leaking = (value: string) =>
      service
        .output()
        .split('\n')
        .filter((line) => line.includes(value))
        .map((line) => line.replaceAll(value, '<key>').slice(-120));
    expect(leaking(secret)).toEqual([]);
    expect(leaking(upstreamKey)).toEqual([]);
    expect(leaking(querySecret)).toEqual([]);
    // The line names the request by method and path, and carries none of its headers.
    const logged = service
      .output()
      .split('\n')
      .filter((line) => line.includes('upstream_unavailable'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(logged).toEqual([
      expect.objectContaining({ level: 50, method: 'POST', path: '/gateway/openai/v1/chat/completions' }),
    ]);
    expect(logged.filter((line) => 'req' in line || JSON.stringify(line).includes('authorization'))).toEqual([]);
  });
});
