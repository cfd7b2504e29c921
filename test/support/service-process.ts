import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { chmod, mkdtemp } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SERVICE_NODE_FLAGS } from '../../apps/ledger/src/config/node-flags.js';
import { registerCredentials, TestCredentials } from './test-credentials.js';

const MAIN = path.resolve('dist/apps/ledger/src/main.js');

export interface ServiceProcess {
  readonly child: ChildProcess;
  readonly baseUrl: string;
  /** `LEDGER_DATA_DIR`: where its first start writes `admin.key` (a fresh folder unless given). */
  readonly dataDir: string;
  output(): string;
  readonly exited: Promise<number | null>;
}

/**
 * Runs the built service (`npm test` builds first) as a real process, the way `npm start` does;
 * or, given a `command` (e.g. `['npm', 'start']`), that command in the repository.
 */
export function startService(
  env: Record<string, string>,
  command: readonly string[] = [process.execPath, ...SERVICE_NODE_FLAGS, MAIN],
): ServiceProcess {
  let output = '';
  const dataDir = env.LEDGER_DATA_DIR ?? mkdtempSync(path.join(tmpdir(), 'block-ledger-service-'));
  const [program, ...args] = command;
  const child = spawn(program, args, {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env, LEDGER_DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, baseUrl: `http://127.0.0.1:${env.PORT}`, dataDir, output: () => output, exited };
}

/** Polls until the service answers `/health` with 200, bounded; then its credentials are at hand (TestCredentials). */
export async function waitUntilHealthy(service: ServiceProcess, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  let exitCode: number | null | undefined;
  void service.exited.then((code) => (exitCode = code ?? -1));
  while (Date.now() < deadline) {
    if (exitCode !== undefined) throw new Error(`service exited with ${exitCode}: ${service.output()}`);
    const response = await fetch(`${service.baseUrl}/health`).catch(() => undefined);
    if (response?.status === 200) {
      const adminKey = path.join(service.dataDir, 'admin.key');
      if (existsSync(adminKey))
        registerCredentials(await TestCredentials.fromDataDir(service.baseUrl, service.dataDir));
      return (await response.json()) as Record<string, unknown>;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`service not healthy after ${timeoutMs} ms: ${service.output()}`);
}

/** A folder the postgres system user can reach (as root, embedded PostgreSQL runs as that user). */
export async function reachableTempDir(label: string): Promise<string> {
  const folder = await mkdtemp(path.join(tmpdir(), `block-ledger-${label}-`));
  await chmod(folder, 0o755);
  return folder;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
