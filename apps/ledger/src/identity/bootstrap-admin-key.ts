import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import type { ApiKeyStore } from './api-key-store.js';
import { DEFAULT_TENANT, systemActor } from './principal.js';

export const ADMIN_KEY_FILE = 'admin.key';
const BOOTSTRAP_LOCK_KEY = 7_318_201_005;

/**
 * Secure by default: on a first start with no keys, an admin key for the default tenant is
 * created and written to `<dataDir>/admin.key` (mode 0600, the key alone on one line). Instances
 * starting together serialize on an advisory lock, so one key is made. Returns the file written.
 */
export async function bootstrapAdminKey(
  pool: pg.Pool,
  keys: ApiKeyStore,
  dataDir: string,
): Promise<string | undefined> {
  const lock = await pool.connect();
  try {
    await lock.query('SELECT pg_advisory_lock($1)', [BOOTSTRAP_LOCK_KEY]);
    if ((await keys.count()) > 0) return undefined;
    const file = path.join(dataDir, ADMIN_KEY_FILE);
    await mkdir(dataDir, { recursive: true });
    const { key } = await keys.create(
      { name: 'bootstrap admin', tenant: DEFAULT_TENANT, roles: ['admin'] },
      systemActor('bootstrap'),
    );
    await writeFile(file, `${key}\n`, { mode: 0o600 });
    return file;
  } finally {
    await lock.query('SELECT pg_advisory_unlock($1)', [BOOTSTRAP_LOCK_KEY]).catch(() => undefined);
    lock.release();
  }
}
