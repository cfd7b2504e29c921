import { readFile, rm, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import {
  passwordFileOf,
  startEmbeddedPostgres,
  type EmbeddedDatabase,
} from '../../apps/ledger/src/database/embedded-postgres.js';
import { freePort, reachableTempDir } from '../support/service-process.js';

/** The password every embedded cluster had before passwords were generated. */
const OLD_FIXED_PASSWORD = 'ledger';

function passwordIn(connectionString: string): string {
  return decodeURIComponent(new URL(connectionString).password);
}

function withPassword(connectionString: string, password: string): string {
  const url = new URL(connectionString);
  url.password = password;
  return url.toString();
}

async function connects(connectionString: string): Promise<true | string> {
  const client = new pg.Client({ connectionString });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  } finally {
    await client.end().catch(() => undefined);
  }
}

describe('the embedded PostgreSQL password', () => {
  const folders: string[] = [];
  const running = new Set<EmbeddedDatabase>();
  afterAll(async () => {
    for (const database of running) await database.stop();
    for (const folder of folders) await rm(folder, { recursive: true, force: true });
  });

  async function start(folder: string, port?: number): Promise<EmbeddedDatabase> {
    const dataDir = path.join(folder, 'postgres');
    const database = await startEmbeddedPostgres({ dataDir, port: port ?? (await freePort()) });
    running.add(database);
    return database;
  }
  async function stop(database: EmbeddedDatabase): Promise<void> {
    running.delete(database);
    await database.stop();
  }

  it('is random per folder, kept in a 0600 file, reused on a restart; the old fixed password is refused', async () => {
    folders.push(await reachableTempDir('password-a'), await reachableTempDir('password-b'));
    const [first, second] = [await start(folders[0]), await start(folders[1])];
    const passwords = [first, second].map(({ connectionString }) => passwordIn(connectionString));
    expect(passwords[0]).not.toEqual(passwords[1]);
    for (const [index, folder] of folders.entries()) {
      const file = passwordFileOf(path.join(folder, 'postgres'));
      expect((await stat(file)).mode & 0o777).toBe(0o600);
      expect((await readFile(file, 'utf8')).trim()).toBe(passwords[index]);
    }
    expect(await connects(first.connectionString)).toBe(true);
    expect(await connects(withPassword(first.connectionString, OLD_FIXED_PASSWORD))).toBe('28P01');

    await stop(first);
    const restarted = await start(folders[0]);
    expect(passwordIn(restarted.connectionString)).toBe(passwords[0]);
    expect(await connects(restarted.connectionString)).toBe(true);
  });

  it('gives a cluster created with the old fixed password a random one on its next start', async () => {
    const folder = await reachableTempDir('password-old');
    folders.push(folder);
    const port = await freePort();
    const database = await start(folder, port);
    // Make it look like a cluster from before: the fixed password, and no password file.
    const client = new pg.Client({ connectionString: database.connectionString });
    await client.connect();
    await client.query(`ALTER ROLE ledger PASSWORD '${OLD_FIXED_PASSWORD}'`);
    await client.end();
    await stop(database);
    await unlink(passwordFileOf(path.join(folder, 'postgres')));

    const upgraded = await start(folder, port);
    expect(passwordIn(upgraded.connectionString)).not.toBe(OLD_FIXED_PASSWORD);
    expect(await connects(upgraded.connectionString)).toBe(true);
    expect(await connects(withPassword(upgraded.connectionString, OLD_FIXED_PASSWORD))).toBe('28P01');
  });
});
