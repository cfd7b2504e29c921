import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { loadConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { createLedgerApp } from '../../apps/ledger/src/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './test-database.js';
import { authorization, registerCredentials, TestCredentials } from './test-credentials.js';

export interface LedgerUnderTest {
  readonly app: INestApplication;
  readonly baseUrl: string;
  readonly database: TestDatabase;
  readonly credentials: TestCredentials;
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

/** The real service (Nest app, its modules, PostgreSQL) on a fresh database, listening on a free port. */
export async function startLedger(env: Record<string, string> = {}): Promise<LedgerUnderTest> {
  const database = await createTestDatabase();
  const dataDir = await mkdtemp(path.join(tmpdir(), 'ledger-http-'));
  const config = loadConfig({ LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent', LEDGER_DATA_DIR: dataDir, ...env });
  const app: INestApplication = await createLedgerApp({ config, connectionString: database.connectionString });
  await app.listen(0, '127.0.0.1');
  const baseUrl = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  const credentials = registerCredentials(await TestCredentials.fromDataDir(baseUrl, config.dataDir));
  return {
    app,
    baseUrl,
    database,
    credentials,
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
      await app.close();
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
