import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { NoteError, openCheckpoint, parseVerifierKey } from '#core';
import { createPostgresEventLog, type EventLog } from '#event-log';
import pg from 'pg';
import { ZodError } from 'zod';
import { loadConfig, type LedgerConfig } from './config/ledger-config.js';
import { startEmbeddedPostgres, StartupError, type EmbeddedDatabase } from './database/embedded-postgres.js';
import { runMigrations } from './database/migrations.js';
import { ApiError } from './http/api-error.js';
import { ApiKeyStore } from './identity/api-key-store.js';
import { parseNewKey } from './identity/keys.controller.js';
import { systemActor } from './identity/principal.js';
import { rebuildReadModels } from './projections/read-model-projections.js';
import { auditLog } from './verifiable-log/leaf-audit.js';
import { signedCheckpointAt } from './verifiable-log/merkle-store.js';
import { ProjectionRunner, ProjectionRunningError } from './projections/projection-runner.js';
import { loadLogSigningKey } from './verifiable-log/log-signing-key.js';
import { LogForkError } from './verifiable-log/log-fork-error.js';
import { merkleLogConsumer } from './verifiable-log/merkle-log.consumer.js';
import { SignedCheckpointMemory } from './verifiable-log/signed-checkpoint-memory.js';
import { VerifiableLog } from './verifiable-log/verifiable-log.js';
import { eventStoreDb } from './event-log/event-store-db.js';

const USAGE = [
  'usage: cli.js rebuild',
  '       cli.js keys create --tenant <t> --roles <a,b> [--name <n>] [--subject <s>] [--expires-at <iso>]',
  '       cli.js keys list [--tenant <t>]',
  '       cli.js keys revoke <key id>',
  '       cli.js audit-log --key <verifier key, or a file holding it> [--checkpoint <pinned checkpoint file>]',
  '       cli.js log-repair',
].join('\n');

/** The command-line flag of each field of a new key, so a refusal names what the operator typed. */
const FLAG_OF_FIELD: Record<string, string> = {
  name: '--name',
  tenant: '--tenant',
  roles: '--roles',
  subject: '--subject',
  expiresAt: '--expires-at',
};

/**
 * The ledger's command line, on the same configuration as the service:
 *   rebuild        rebuild the read models from the log and swap them in
 *   keys create    make an API key, printed once on stdout as JSON (the only place it ever appears)
 *   keys list      the keys, without secrets
 *   keys revoke    revoke a key; every instance refuses it within the key cache's lifetime
 *   audit-log      check every leaf of a signed checkpoint against the log's events (docs/verifiable-log.md);
 *                  a JSON report on stdout, exit code 1 when a leaf breaks
 *   log-repair     with every instance stopped: drop the Merkle tree's unsigned leaves from the first that is not
 *                  the log's next event (an event deleted before it was signed stops signing there), so that they
 *                  are added again from the log; a JSON report on stdout. It never drops a signed leaf.
 * It can run beside a running service: it reuses the embedded server on the same data folder, and
 * waits for a rebuild the service is running to finish (one at a time, decision 0012). Keys are
 * made by the service's own ApiKeyStore, so creation and revocation are events with the actor
 * `system:cli`.
 */
async function main(args: readonly string[]): Promise<number | void> {
  const [command, ...rest] = args;
  if (command === 'rebuild' && rest.length === 0) return withStorage(loadConfig(process.env), rebuild);
  if (command === 'keys') return withStorage(loadConfig(process.env), keysCommand(rest));
  if (command === 'audit-log') return withStorage(loadConfig(process.env), await auditCommand(rest));
  if (command === 'log-repair' && rest.length === 0) {
    const config = loadConfig(process.env);
    return withStorage(config, logRepair(config));
  }
  throw new StartupError(USAGE);
}

async function rebuild(pool: pg.Pool, eventLog: EventLog): Promise<void> {
  for (const { name, result } of await rebuildReadModels(pool, eventLog)) {
    const durationMs = Math.round(result.durationMs);
    const position = Number(result.position);
    console.log(JSON.stringify({ rebuilt: name, events: result.events, position, durationMs }));
  }
}

/** Parses `keys …` in full before any database is touched, so bad arguments cost nothing. */
function keysCommand(args: readonly string[]): (pool: pg.Pool, eventLog: EventLog) => Promise<void> {
  const [action, ...rest] = args;
  if (action === 'create') {
    const { values } = parse(rest, {
      tenant: { type: 'string' },
      roles: { type: 'string' },
      name: { type: 'string' },
      subject: { type: 'string' },
      'expires-at': { type: 'string' },
    });
    const tenant = values.tenant;
    if (tenant === undefined) throw new StartupError('--tenant is required');
    if (values.roles === undefined) {
      throw new StartupError('--roles is required (comma-separated, e.g. producer,reader)');
    }
    const input = newKey({
      name: values.name ?? 'cli',
      tenant,
      roles: values.roles.split(',').map((role) => role.trim()),
      ...(values.subject === undefined ? {} : { subject: values.subject }),
      ...(values['expires-at'] === undefined ? {} : { expiresAt: values['expires-at'] }),
    });
    return async (pool, eventLog) => {
      const created = await new ApiKeyStore(pool, eventLog).create({ ...input, tenant }, systemActor('cli'));
      console.log(JSON.stringify(created));
    };
  }
  if (action === 'list') {
    const { values } = parse(rest, { tenant: { type: 'string' } });
    return async (pool, eventLog) => {
      console.log(JSON.stringify({ keys: await new ApiKeyStore(pool, eventLog).list(values.tenant) }));
    };
  }
  if (action === 'revoke') {
    const [id] = parse(rest, {}, '<key id>').positionals as [string];
    return async (pool, eventLog) => {
      console.log(JSON.stringify(await new ApiKeyStore(pool, eventLog).revoke(id, undefined, systemActor('cli'))));
    };
  }
  throw new StartupError(USAGE);
}

/**
 * Reads the pinned key (and checkpoint) before any database is touched. Without a pinned checkpoint, the
 * newest one stored that the pinned key signed is audited: whoever holds the database can delete the newest,
 * so an auditor passes the one they pinned.
 */
async function auditCommand(args: readonly string[]): Promise<(pool: pg.Pool, eventLog: EventLog) => Promise<number>> {
  const { values } = parse(args, { key: { type: 'string' }, checkpoint: { type: 'string' } });
  if (values.key === undefined)
    throw new StartupError('--key is required: the verifier key you pinned (GET /v1/log/key)');
  const keyText = values.key.includes('+') ? values.key : await readFlagFile('--key', values.key);
  const verifier = asStartupError('--key', () => parseVerifierKey(keyText.trim()));
  const pinnedNote =
    values.checkpoint === undefined ? undefined : await readFlagFile('--checkpoint', values.checkpoint);
  const pinned =
    pinnedNote === undefined ? undefined : asStartupError('--checkpoint', () => openCheckpoint(pinnedNote, verifier));
  return async (pool, eventLog) => {
    const checkpoint = pinned ?? (await signedCheckpointAt(pool, verifier));
    if (!checkpoint) throw new StartupError('no checkpoint signed with --key is stored');
    const audit = await auditLog(pool, eventLog, checkpoint);
    const treeSize = String(checkpoint.treeSize);
    console.log(
      JSON.stringify(
        audit.broken
          ? { ok: false, treeSize, firstBroken: audit.broken }
          : { ok: true, treeSize, lastPosition: audit.tree.lastPosition?.toString() ?? null },
      ),
    );
    return audit.broken ? 1 : 0;
  };
}

/** The service's own signer, on its key and data folder (neither made here), asked to drop what it cannot sign. */
function logRepair(config: LedgerConfig): (pool: pg.Pool, eventLog: EventLog) => Promise<void> {
  return async (pool, eventLog) => {
    const key = await loadLogSigningKey(config.verifiableLog, config.dataDir, { generate: false });
    const memory = new SignedCheckpointMemory(config.dataDir, key);
    const log = new VerifiableLog(
      pool,
      eventLog,
      key,
      new ProjectionRunner(pool, eventLog, merkleLogConsumer()),
      memory,
    );
    const { treeSize, dropped, removed, firstDropped } = await log.dropUnprovenLeaves().catch((error: unknown) => {
      if (error instanceof LogForkError || error instanceof ProjectionRunningError)
        throw new StartupError(error.message);
      throw error;
    });
    // The first leaf dropped, as its row names it: the event signing stopped at, deleted or changed.
    const first = firstDropped && {
      leafIndex: String(firstDropped.leafIndex),
      position: String(firstDropped.position),
      stream: firstDropped.streamId,
      revision: String(firstDropped.revision),
      eventHash: firstDropped.eventHash,
    };
    console.log(
      JSON.stringify({
        treeSize: String(treeSize),
        dropped: String(dropped),
        removed,
        ...(first && { firstDropped: first }),
      }),
    );
  };
}

async function readFlagFile(flag: string, file: string): Promise<string> {
  return readFile(file, 'utf8').catch((error: Error) => {
    throw new StartupError(`${flag}: ${error.message}`);
  });
}

/** A malformed key or note, or a signature that does not check, told as what the operator passed. */
function asStartupError<T>(what: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof NoteError) throw new StartupError(`${what}: ${error.message}`);
    throw error;
  }
}

type Options = NonNullable<Parameters<typeof parseArgs>[0]>['options'] & {};

/** Strict flags, and exactly one positional argument when `positional` names it. */
function parse<O extends Options>(args: readonly string[], options: O, positional?: string) {
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], options, strict: true, allowPositionals: positional !== undefined });
  } catch (error) {
    // Node's message goes on about `--`; its first sentence names the flag.
    throw new StartupError((error as Error).message.split('. ')[0]);
  }
  if (positional !== undefined && parsed.positionals.length !== 1) throw new StartupError(`expected one ${positional}`);
  return parsed;
}

/** The route's own validation, its refusal told in flags. */
function newKey(input: Record<string, unknown>): ReturnType<typeof parseNewKey> {
  try {
    return parseNewKey(input, Date.now());
  } catch (error) {
    if (error instanceof ZodError) {
      const issue = error.issues[0];
      throw new StartupError(`${FLAG_OF_FIELD[String(issue.path[0])] ?? String(issue.path[0])}: ${issue.message}`);
    }
    if (error instanceof ApiError) {
      const flag = FLAG_OF_FIELD[error.field ?? ''] ?? error.field;
      throw new StartupError(`${flag}: ${error.message.replace(/^\w+: /, '')}`);
    }
    throw error;
  }
}

/** The service's storage, as its configuration names it: the log, a pool on the read models, migrated. */
async function withStorage<T>(
  config: LedgerConfig,
  work: (pool: pg.Pool, eventLog: EventLog) => Promise<T>,
): Promise<T> {
  const database: EmbeddedDatabase = config.databaseUrl
    ? { connectionString: config.databaseUrl, adopted: true, stop: async () => undefined }
    : await startEmbeddedPostgres({
        dataDir: path.join(config.dataDir, 'postgres'),
        port: config.embeddedPostgresPort,
      });
  const pool = new pg.Pool({ connectionString: database.connectionString, max: 4 });
  const eventLog = config.eventStoreConnectionString
    ? (await eventStoreDb()).createEventStoreDbEventLog({ connectionString: config.eventStoreConnectionString })
    : await createPostgresEventLog({ connectionString: database.connectionString });
  try {
    await runMigrations(database.connectionString);
    return await work(pool, eventLog);
  } finally {
    await eventLog.close();
    await pool.end();
    if (!database.adopted) await database.stop();
  }
}

main(process.argv.slice(2)).then(
  // Exits with the command's code at once: set in `process.exitCode` instead, it came out as 0.
  (code) => code && process.exit(code),
  (error: unknown) => {
    const known = error instanceof StartupError || error instanceof ApiError;
    console.error(known ? `block-ledger: ${error.message}` : error);
    process.exit(1);
  },
);
