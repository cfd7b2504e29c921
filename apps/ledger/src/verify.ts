import { readFile } from 'node:fs/promises';
import { BundleError, DEFAULT_MAX_LINE_VALUES, NoteError } from '#core';
import { parseCommandLine } from './command-line-args.js';
import { verifySessionBundle } from './verifiable-log/offline-verifier.js';

const USAGE =
  'usage: npm run verify -- <bundle.ndjson> --key <verifier key, or a file holding it>' +
  ' [--since <older checkpoint file>] [--max-line-values <n>, ' +
  `${DEFAULT_MAX_LINE_VALUES} by default: an event line holding more JSON values is refused before it is parsed]`;

/**
 * The auditor's offline check of an export bundle (decision 0017): exit 0 and the session's
 * blocks and tree as JSON on stdout, or exit 1 and the failing line and reason on stderr.
 */
async function main(args: string[]): Promise<void> {
  const { positionals, values } = parseCommandLine(
    {
      args,
      allowPositionals: true,
      options: { key: { type: 'string' }, since: { type: 'string' }, 'max-line-values': { type: 'string' } },
    },
    (refusal) => new UsageError(`${refusal}\n${USAGE}`),
  );
  if (positionals.length !== 1 || !values.key) throw new UsageError(USAGE);
  const [bundleFile] = positionals as [string];
  const key = values.key.includes('+') ? values.key : (await readFile(values.key, 'utf8')).trim();
  const since = values.since === undefined ? undefined : await readFile(values.since, 'utf8');
  const bound = values['max-line-values'];
  if (bound !== undefined && !/^[1-9][0-9]{0,15}$/.test(bound))
    throw new UsageError(`--max-line-values takes a positive integer\n${USAGE}`);
  const maxLineValues = bound === undefined ? undefined : Number(bound);
  const text = await readFile(bundleFile, 'utf8');
  const verified = await verifySessionBundle(text, key, since, { maxLineValues }).catch((error: Error) => {
    if (error instanceof BundleError) error.message = `${bundleFile} ${error.message}`;
    throw error;
  });
  const { manifest, checkpoint, session, tree } = verified;
  console.log(
    JSON.stringify(
      {
        ok: true,
        sessionId: manifest.sessionId,
        tenant: manifest.tenant,
        exporter: manifest.exporter,
        exportedAt: manifest.exportedAt,
        events: manifest.events,
        checkpoint: {
          origin: checkpoint.origin,
          treeSize: String(checkpoint.treeSize),
          rootHash: checkpoint.rootHash.toString('base64'),
        },
        session,
        tree,
      },
      null,
      2,
    ),
  );
}

class UsageError extends Error {}

main(process.argv.slice(2)).catch((error: Error) => {
  const known = error instanceof BundleError || error instanceof NoteError || error instanceof UsageError;
  console.error(known ? error.message : `verify failed: ${error.message}`);
  process.exitCode = 1;
});
