import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { loadConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { createLedgerApp } from '../../apps/ledger/src/ledger-app.js';
import { CuttableProxy } from './cuttable-proxy.js';
import { createTestDatabase, type TestDatabase } from './test-database.js';
import { authorization, registerCredentials, TestCredentials } from './test-credentials.js';

export interface LedgerUnderTest {
  readonly app: INestApplication;
  readonly baseUrl: string;
  readonly database: TestDatabase;
  readonly credentials: TestCredentials;
  /** With `{ proxied: true }`: the TCP proxy the service reaches its database through. */
  readonly proxy?: CuttableProxy;
  /** As the principal named `as` (default `client`: every role but admin; see TestCredentials). */
  request(
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
    as?: string,
  ): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

/**
 * The real service (Nest app, its modules, PostgreSQL) on a fresh database, listening on a free port; with
 * `proxied`, reaching the database through a `CuttableProxy` (for the faults a network makes).
 */
export async function startLedger(
  env: Record<string, string> = {},
  { proxied = false }: { proxied?: boolean } = {},
): Promise<LedgerUnderTest> {
  const database = await createTestDatabase();
  const dataDir = await mkdtemp(path.join(tmpdir(), 'ledger-http-'));
  const config = loadConfig({ LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent', LEDGER_DATA_DIR: dataDir, ...env });
  const { proxy, connectionString } = proxied
    ? await CuttableProxy.before(database.connectionString)
    : { proxy: undefined, connectionString: database.connectionString };
  const app: INestApplication = await createLedgerApp({ config, connectionString });
  await app.listen(0, '127.0.0.1');
  const baseUrl = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  const credentials = registerCredentials(await TestCredentials.fromDataDir(baseUrl, config.dataDir));
  return {
    app,
    baseUrl,
    database,
    credentials,
    proxy,
    async request(method, route, body, contentType = 'application/json', as = 'client') {
      const response = await fetch(`${baseUrl}${route}`, {
        method,
        headers: {
          ...(await authorization(baseUrl, as)),
          ...(body === undefined ? {} : { 'content-type': contentType }),
        },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined };
    },
    async close() {
      proxy?.endMuted();
      await proxy?.close();
      await app.close();
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
