import type { INestApplication } from '@nestjs/common';
import { loadConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { createLedgerApp } from '../../apps/ledger/src/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './test-database.js';

export interface LedgerUnderTest {
  readonly baseUrl: string;
  readonly database: TestDatabase;
  request(method: string, path: string, body?: unknown, contentType?: string): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

/** The real service (Nest app, its modules, PostgreSQL) on a fresh database, listening on a free port. */
export async function startLedger(env: Record<string, string> = {}): Promise<LedgerUnderTest> {
  const database = await createTestDatabase();
  const app: INestApplication = await createLedgerApp({ config: loadConfig({ LOG_LEVEL: 'silent', ...env }), connectionString: database.connectionString });
  await app.listen(0, '127.0.0.1');
  const baseUrl = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return {
    baseUrl,
    database,
    async request(method, path, body, contentType = 'application/json') {
      const response = await fetch(`${baseUrl}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': contentType },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined };
    },
    async close() {
      await app.close();
      await database.drop();
    },
  };
}
