import { rm } from 'node:fs/promises';
import path from 'node:path';

export default async function globalTeardown() {
  const { database, dataDir } = globalThis.__ledgerTestDatabase ?? {};
  await database?.stop();
  if (dataDir) await rm(path.dirname(dataDir), { recursive: true, force: true });
}
