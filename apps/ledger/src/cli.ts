import { readFile } from 'node:fs/promises';
import type { parseArgs } from 'node:util';
import { NoteError, openCheckpoint, parseVerifierKey } from '#core';
import { ZodError } from 'zod';
import type { CliCommand } from './cli-commands.js';
import { parseCommandLine } from './command-line-args.js';
import { loadConfig } from './config/ledger-config.js';
import { failureText, StartupError } from './database/embedded-postgres.js';
import { listQuery, parseNewKey } from './identity/key-requests.js';

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
  const command = await parseCommand(args);
  const config = loadConfig(process.env);
  // Loaded only once the arguments check: a refusal comes before the service's modules, not after a second of them.
  const { runCliCommand } = await import('./cli-commands.js');
  return runCliCommand(command, config);
}

async function parseCommand([command, ...rest]: readonly string[]): Promise<CliCommand> {
  if ((command === 'rebuild' || command === 'log-repair') && rest.length === 0) return { name: command };
  if (command === 'keys') return keysCommand(rest);
  if (command === 'audit-log') return auditCommand(rest);
  throw new StartupError(USAGE);
}

/** Parses `keys …` in full before any database is touched, so bad arguments cost nothing. */
function keysCommand([action, ...rest]: readonly string[]): CliCommand {
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
    const fields = {
      name: values.name ?? 'cli',
      tenant,
      roles: values.roles.split(',').map((role) => role.trim()),
      ...(values.subject === undefined ? {} : { subject: values.subject }),
      ...(values['expires-at'] === undefined ? {} : { expiresAt: values['expires-at'] }),
    };
    return { name: 'keys create', key: { ...asFlags(() => parseNewKey(fields, Date.now())), tenant } };
  }
  if (action === 'list') {
    const { values } = parse(rest, { tenant: { type: 'string' } });
    return { name: 'keys list', tenant: asFlags(() => listQuery.parse(values)).tenant };
  }
  if (action === 'revoke') {
    const [id] = parse(rest, {}, '<key id>').positionals as [string];
    return { name: 'keys revoke', id };
  }
  throw new StartupError(USAGE);
}

/** Reads the pinned key (and checkpoint), and checks the checkpoint's signature, before any database is touched. */
async function auditCommand(args: readonly string[]): Promise<CliCommand> {
  const { values } = parse(args, { key: { type: 'string' }, checkpoint: { type: 'string' } });
  if (values.key === undefined)
    throw new StartupError('--key is required: the verifier key you pinned (GET /v1/log/key)');
  const keyText = values.key.includes('+') ? values.key : await readFlagFile('--key', values.key);
  const verifier = asStartupError('--key', () => parseVerifierKey(keyText.trim()));
  const pinnedNote =
    values.checkpoint === undefined ? undefined : await readFlagFile('--checkpoint', values.checkpoint);
  const pinned =
    pinnedNote === undefined ? undefined : asStartupError('--checkpoint', () => openCheckpoint(pinnedNote, verifier));
  return { name: 'audit-log', verifier, pinned };
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
  const parsed = parseCommandLine(
    { args: [...args], options, strict: true, allowPositionals: positional !== undefined },
    (refusal) => new StartupError(refusal),
  );
  if (positional !== undefined && parsed.positionals.length !== 1) throw new StartupError(`expected one ${positional}`);
  return parsed;
}

/** The route's own validation, its refusal told in flags. */
function asFlags<T>(validate: () => T): T {
  try {
    return validate();
  } catch (error) {
    if (!(error instanceof ZodError)) throw error;
    const field = String(error.issues[0].path[0]);
    throw new StartupError(`${FLAG_OF_FIELD[field] ?? field}: ${error.issues[0].message}`);
  }
}

main(process.argv.slice(2)).then(
  // Exits with the command's code at once: set in `process.exitCode` instead, it came out as 0.
  (code) => code && process.exit(code),
  (error: unknown) => {
    console.error(failureText(error));
    process.exit(1);
  },
);
