import { expect } from '@jest/globals';
import { freePort } from './service-process.js';

/** Retried this long in the tests that wait on an unreachable database. */
export const CONNECT_RETRY_MS = '600';
const PASSWORD = 'a-password';

/** A `DATABASE_URL` on a port nothing listens on, with a password that must never be shown. */
export async function unreachableDatabase(): Promise<{ url: string; port: number }> {
  const port = await freePort();
  return { url: `postgres://ledger:${PASSWORD}@127.0.0.1:${port}/ledger`, port };
}

/**
 * What a start (the service's or a command's) says of the database at `port` that never answered within
 * `CONNECT_RETRY_MS`: each retry a JSON warning naming its address, then one line naming the database; never the
 * password.
 */
export function expectGaveUpOn(port: number, output: string): void {
  const lines = output.trimEnd().split('\n');
  expect(lines.at(-1)).toBe(
    `block-ledger: DATABASE_URL: PostgreSQL at 127.0.0.1:${port} did not answer within ` +
      `LEDGER_CONNECT_RETRY_MS (${CONNECT_RETRY_MS} ms): ECONNREFUSED`,
  );
  const retries = lines.slice(0, -1).map((line) => JSON.parse(line) as unknown);
  expect(retries.length).toBeGreaterThan(0);
  for (const retry of retries)
    expect(retry).toMatchObject({ variable: 'DATABASE_URL', address: `127.0.0.1:${port}`, problem: 'ECONNREFUSED' });
  expect(output).not.toContain(PASSWORD);
}
