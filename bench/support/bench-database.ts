import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../../apps/ledger/src/database/embedded-postgres.js';
import { runMigrations } from '../../apps/ledger/src/database/migrations.js';

export interface BenchDatabase {
  readonly connectionString: string;
  close(): Promise<void>;
}

/** `DATABASE_URL` when set (it must be a scratch database), else a throwaway embedded PostgreSQL. Migrated either way. */
export async function openBenchDatabase(port = 54_390): Promise<BenchDatabase> {
  if (process.env.DATABASE_URL) {
    await runMigrations(process.env.DATABASE_URL);
    return { connectionString: process.env.DATABASE_URL, close: async () => undefined };
  }
  const folder = await mkdtemp(path.join(tmpdir(), 'block-ledger-bench-'));
  await chmod(folder, 0o755);
  const database = await startEmbeddedPostgres({ dataDir: path.join(folder, 'postgres'), port });
  await runMigrations(database.connectionString);
  return {
    connectionString: database.connectionString,
    close: async () => {
      await database.stop();
      await rm(folder, { recursive: true, force: true });
    },
  };
}

/** Prints a Markdown table; the first numeric column is what the ratio columns compare against. */
export function printTable(headers: readonly string[], rows: readonly (readonly string[])[]): void {
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: readonly string[]) => `| ${cells.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')} |`;
  console.log(line(headers));
  console.log(`| ${widths.map((width) => '-'.repeat(width)).join(' | ')} |`);
  for (const row of rows) console.log(line(row));
}

export const formatRate = (perSecond: number) => Math.round(perSecond).toLocaleString('en-US');
export const formatRatio = (ratio: number) => `${ratio.toFixed(1)}×`;
