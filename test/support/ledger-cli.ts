import { execFile } from 'node:child_process';
import path from 'node:path';

/** The built command line (`npm test` builds first). */
const CLI = path.resolve('dist/apps/ledger/src/cli.js');

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * `node dist/apps/ledger/src/cli.js …args` on the database at `databaseUrl`, with the ledger's data folder `dataDir`
 * and any more of its configuration in `env`.
 */
export function runCli(
  args: readonly string[],
  databaseUrl: string,
  dataDir?: string,
  env: Record<string, string> = {},
): Promise<CliRun> {
  const environment = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'silent',
    ...(dataDir === undefined ? {} : { LEDGER_DATA_DIR: dataDir }),
    ...env,
  };
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: environment }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
}
