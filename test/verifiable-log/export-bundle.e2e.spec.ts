import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { BundleError, ed25519PrivateKey, openCheckpoint, parseVerifierKey, signCheckpoint, signNote } from '#core';
import type { EventLog } from '#event-log';
import { EVENT_LOG } from '../../apps/ledger/src/event-log/event-log-token.js';
import { verifySessionBundle } from '../../apps/ledger/src/verifiable-log/offline-verifier.js';
import {
  governanceFixture,
  requestTool,
  waitForToolCall,
  type GovernanceFixture,
} from '../support/governance-fixture.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { keyActor } from '../support/test-credentials.js';
import { eventually, probe } from '../support/probe.js';

const run = promisify(execFile);
const VERIFY_CLI = path.resolve('dist/apps/ledger/src/verify.js');

/**
 * Export bundles and the offline verifier: a bundle verifies with the key alone and folds to what
 * the read routes show; every kind of tampering fails it, naming the line.
 */
describe('session export bundles', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  let dir: string;
  let keyFile: string;
  let auditor: string;
  let vkey: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'export-'));
    keyFile = path.join(dir, 'signing.pem');
    await writeFile(keyFile, generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }), {
      mode: 0o600,
    });
    fixture = await governanceFixture();
    ledger = await startLedger(fixture.env({ LEDGER_SIGNING_KEY: keyFile, LEDGER_CHECKPOINT_INTERVAL_MS: '200' }));
    auditor = await ledger.credentials.key('export-auditor', { roles: ['auditor'] });
    vkey = (await probe(ledger.baseUrl, 'GET', '/v1/log/key')).body.trim();
  });
  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const exportOf = (sessionId: string, query = '', credential = auditor) =>
    probe(ledger.baseUrl, 'GET', `/v1/sessions/${sessionId}/export${query}`, { credential });

  /**
   * A session with a tool call the firewall denies, and a fork of it after the call: the bundle holds
   * three streams.
   */
  async function recordForkedSession(sessionId: string): Promise<string> {
    expect((await ledger.request('POST', '/v1/sessions', { id: sessionId }, undefined, 'producer-1')).status).toBe(201);
    const { toolCallId } = await requestTool(
      ledger.baseUrl,
      sessionId,
      'call_1',
      { server: 'filesystem', name: 'move_file' },
      {
        source: path.join(fixture.workspace, 'hello.txt'),
        destination: path.join(fixture.workspace, 'moved.txt'),
      },
    );
    await waitForToolCall(ledger.baseUrl, toolCallId, (toolCall) => toolCall.status === 'completed');
    const head = (await ledger.app.get<EventLog>(EVENT_LOG).readStream(`session-${sessionId}`)).at(-1)!.position;
    const forkId = `${sessionId}-fork`;
    const fork = await ledger.request(
      'POST',
      `/v1/sessions/${sessionId}/fork`,
      { id: forkId, atPosition: String(head) },
      undefined,
      'producer-1',
    );
    expect(fork.status).toBe(201);
    const reply = await ledger.request(
      'POST',
      `/v1/sessions/${forkId}/messages`,
      { role: 'user', content: 'and then?' },
      undefined,
      'producer-1',
    );
    expect(reply.status).toBe(201);
    return forkId;
  }

  async function bundleOf(sessionId: string, query = ''): Promise<string> {
    const answer = await exportOf(sessionId, query);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    return answer.body as string;
  }

  it('verifies offline with the key alone, folds as the read routes show, and is recorded as an event', async () => {
    const forkId = await recordForkedSession('exported');
    // Read as the writer: a read waits up to 5 s for the read models to hold the caller's own writes (then
    // answers 503: asked again), where another caller's read may come before the reply is projected.
    const current = await eventually('the fork read', async () => {
      const answer = await ledger.request('GET', `/v1/sessions/${forkId}`, undefined, undefined, 'producer-1');
      return answer.status === 503 ? undefined : answer;
    });
    expect(current.status).toBe(200);
    const last = current.body.position;
    const bundle = await bundleOf(forkId);
    const verified = await verifySessionBundle(bundle, vkey);
    expect(verified.manifest).toMatchObject({
      sessionId: forkId,
      tenant: 'default',
      exporter: keyActor('export-auditor'),
    });
    expect(verified.streams.map((stream) => stream.stream)).toEqual([
      `session-${forkId}`,
      'session-exported',
      expect.stringMatching(/^toolcall-/),
    ]);
    expect(bundle.trimEnd().split('\n')).toHaveLength(verified.manifest.events + 2);
    // As a read of the log at the export's last event shows it.
    const read = await ledger.request('GET', `/v1/sessions/${forkId}?at=${last}`);
    const tree = await ledger.request('GET', `/v1/sessions/${forkId}/tree?at=${last}`);
    expect(verified.session).toEqual(read.body);
    expect(verified.tree).toEqual(tree.body);

    const recorded = await ledger.app.get<EventLog>(EVENT_LOG).readStream(`export-${forkId}`);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({
      type: 'session.exported',
      data: { sessionId: forkId, events: verified.manifest.events, treeSize: verified.manifest.treeSize },
      metadata: { actor: keyActor('export-auditor'), tenant: 'default' },
    });
  });

  it('fails on a byte changed on any line, a line removed, two swapped, the tail cut, a foreign event', async () => {
    const bundle = await bundleOf(await recordForkedSession('tampered'));
    const lines = bundle.trimEnd().split('\n');
    const failure = async (text: string) => {
      try {
        await verifySessionBundle(text, vkey);
      } catch (error) {
        expect(error).toBeInstanceOf(BundleError);
        return error as BundleError;
      }
      throw new Error('the tampered bundle verified');
    };
    const joined = (edited: string[]) => `${edited.join('\n')}\n`;

    for (const [index, line] of lines.entries()) {
      // A byte inside the line's content (its middle), swapped for another printable one.
      const at = Math.floor(line.length / 2);
      const changed = `${line.slice(0, at)}${line[at] === 'a' ? 'b' : 'a'}${line.slice(at + 1)}`;
      const error = await failure(joined(lines.map((other, i) => (i === index ? changed : other))));
      expect({ index, line: error.line }).toEqual({ index, line: index + 1 });
    }
    expect(await failure(joined(lines.filter((_, i) => i !== 3)))).toMatchObject({
      line: 4,
      reason: expect.stringMatching(/out of order/),
    });
    const swapped = [...lines];
    [swapped[2], swapped[3]] = [swapped[3], swapped[2]];
    expect(await failure(joined(swapped))).toMatchObject({ line: 3, reason: expect.stringMatching(/out of order/) });
    expect(await failure(joined(lines.slice(0, -2)))).toMatchObject({
      line: lines.length - 2,
      reason: 'not a line that starts {"type":"checkpoint","note":"',
    });
    expect(await failure(bundle.slice(0, bundle.length - 40))).toBeInstanceOf(BundleError);

    const other = (await bundleOf('exported-fork')).trimEnd().split('\n');
    const foreign = [...lines.slice(0, 2), other[2], ...lines.slice(2)];
    expect(await failure(joined(foreign))).toMatchObject({ line: 3, reason: expect.stringMatching(/out of order/) });
  });

  /**
   * Attack: hand the auditor a bundle whose event line keeps the real hash and proof but carries data
   * no verifier can hash (nested deeper than its stack, a number JSON cannot hold), or absurd
   * numbers and proofs. Each fails as a BundleError naming the line, not as a crash.
   */
  it('fails, naming the line, on data it cannot hash and on absurd numbers, proofs and repeated lines', async () => {
    const lines = (await bundleOf(await recordForkedSession('malicious'))).trimEnd().split('\n');
    const event = JSON.parse(lines[1]);
    const withEvent = (edited: object) => `${[lines[0], JSON.stringify(edited), ...lines.slice(2)].join('\n')}\n`;
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    const cases: [string, string][] = [
      ['data nested 200,000 deep', withEvent(event).replace(JSON.stringify(event.data), deep)],
      ['a number JSON cannot hold', withEvent(event).replace(JSON.stringify(event.data), '1e400')],
      ['a leaf index of 100,000 digits', withEvent({ ...event, leafIndex: '9'.repeat(100_000) })],
      ['a proof of 100,000 hashes', withEvent({ ...event, proof: Array(100_000).fill(event.proof[0]) })],
      ['a proof hash in bad base64', withEvent({ ...event, proof: ['!'.repeat(43) + '='] })],
      ['a proof one hash short', withEvent({ ...event, proof: event.proof.slice(1) })],
      ['the line twice', `${[lines[0], lines[1], ...lines.slice(1)].join('\n')}\n`],
    ];
    const failures = [];
    for (const [attack, text] of cases) {
      const failure = await verifySessionBundle(text, vkey).then(
        () => 'verified',
        (error: Error) => (error instanceof BundleError ? `line ${error.line}` : `${error.name}: ${error.message}`),
      );
      failures.push({ attack, failure });
    }
    const expected = cases.map(([attack]) => ({ attack, failure: attack === 'the line twice' ? 'line 3' : 'line 2' }));
    expect(failures).toEqual(expected);
  });

  it('fails a checkpoint or manifest signed by another key; checks consistency with an older checkpoint', async () => {
    const older = (await probe(ledger.baseUrl, 'GET', '/v1/log/checkpoint', { credential: auditor })).body as string;
    const sessionId = await recordForkedSession('pinned');
    const olderSize = openCheckpoint(older, parseVerifierKey(vkey)).treeSize;
    const bundle = await bundleOf(sessionId, `?since=${olderSize}`);
    const lines = bundle.trimEnd().split('\n');
    const olderFile = path.join(dir, 'older.checkpoint');
    await writeFile(olderFile, older);
    expect((await verifySessionBundle(bundle, vkey, older)).checkpoint.treeSize).toBeGreaterThan(olderSize);

    const impostor = { name: parseVerifierKey(vkey).name, privateKey: generateKeyPairSync('ed25519').privateKey };
    const checkpoint = JSON.parse(lines.at(-1)!);
    const resigned = openCheckpoint(checkpoint.note, parseVerifierKey(vkey));
    const forgedCheckpoint = JSON.stringify({ ...checkpoint, note: signCheckpoint(resigned, impostor) });
    await expect(
      verifySessionBundle(`${[...lines.slice(0, -1), forgedCheckpoint].join('\n')}\n`, vkey),
    ).rejects.toMatchObject({ line: lines.length, reason: expect.stringMatching(/^checkpoint signature/) });
    const manifestText = JSON.parse(lines[0]).note.split('\n\n')[0];
    const forgedManifest = JSON.stringify({ type: 'manifest', note: signNote(`${manifestText}\n`, impostor) });
    await expect(
      verifySessionBundle(`${[forgedManifest, ...lines.slice(1)].join('\n')}\n`, vkey),
    ).rejects.toMatchObject({ line: 1, reason: expect.stringMatching(/^manifest signature/) });

    // An older checkpoint of another history (signed with the log's own key, as a rebuilt log would be).
    const logKey = { name: impostor.name, privateKey: ed25519PrivateKey(await readFile(keyFile, 'utf8')) };
    const otherHistory = signCheckpoint(
      { ...openCheckpoint(older, parseVerifierKey(vkey)), rootHash: Buffer.alloc(32, 1) },
      logKey,
    );
    await expect(verifySessionBundle(bundle, vkey, otherHistory)).rejects.toMatchObject({
      reason: expect.stringMatching(/does not extend the older checkpoint/),
    });
    await expect(verifySessionBundle(await bundleOf(sessionId), vkey, older)).rejects.toMatchObject({
      reason: expect.stringMatching(/no consistency proof from tree size/),
    });
  });

  it('runs as `npm run verify`: the session on stdout, or the failing line on stderr and exit code 1', async () => {
    const bundle = await bundleOf(await recordForkedSession('cli'));
    const bundleFile = path.join(dir, 'cli.ndjson');
    const keyPath = path.join(dir, 'log.vkey');
    await writeFile(bundleFile, bundle);
    await writeFile(keyPath, `${vkey}\n`);
    const { stdout } = await run(process.execPath, [VERIFY_CLI, bundleFile, '--key', keyPath]);
    expect(JSON.parse(stdout)).toMatchObject({
      ok: true,
      sessionId: 'cli-fork',
      session: { id: 'cli-fork' },
      tree: { id: 'cli-fork' },
    });

    const lines = bundle.trimEnd().split('\n');
    await writeFile(bundleFile, `${[...lines.slice(0, 2), ...lines.slice(3)].join('\n')}\n`);
    const failed = await run(process.execPath, [VERIFY_CLI, bundleFile, '--key', vkey]).catch(
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed).toMatchObject({ code: 1, stderr: expect.stringMatching(/^.*cli\.ndjson line \d+: /) });

    // The bound on an event line's values, lowered below what the session's lines hold, and refused when not a count.
    await writeFile(bundleFile, bundle);
    const bounded = await run(process.execPath, [
      VERIFY_CLI,
      bundleFile,
      '--key',
      vkey,
      '--max-line-values',
      '3',
    ]).catch((error: { code: number; stderr: string }) => error);
    expect(bounded).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/cli\.ndjson line 2: holds more than 3 JSON values .*, the verifier's bound\n$/),
    });
    for (const count of ['0', '1e3', 'many']) {
      const refused = await run(process.execPath, [
        VERIFY_CLI,
        bundleFile,
        '--key',
        vkey,
        '--max-line-values',
        count,
      ]).catch((error: { code: number; stdout: string; stderr: string }) => error);
      expect(refused).toMatchObject({
        code: 1,
        stdout: '',
        stderr: expect.stringMatching(/^--max-line-values takes a positive integer\n/),
      });
    }

    const misused = await run(process.execPath, [VERIFY_CLI, bundleFile, '--key', vkey, '--sinse', 'x']).catch(
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
    expect(misused).toMatchObject({ code: 1, stdout: '' });
    expect((misused as { stderr: string }).stderr.trimEnd().split('\n')).toEqual([
      "Unknown option '--sinse'",
      expect.stringMatching(/^usage: npm run verify -- <bundle.ndjson> --key /),
    ]);
  });

  it('is for auditors, names a bad since, and records nothing it refuses', async () => {
    await recordForkedSession('refused');
    const reader = await ledger.credentials.key('export-reader', { roles: ['reader', 'producer', 'reviewer'] });
    expect((await exportOf('refused', '', reader)).status).toBe(403);
    expect((await exportOf('no-such-session')).body).toMatchObject({
      error: { code: 'session_not_found', field: 'sid' },
    });
    expect((await exportOf('refused', '?since=abc')).body).toMatchObject({
      error: { code: 'invalid_request', field: 'since' },
    });
    expect((await exportOf('refused', '?since=0')).body).toMatchObject({
      error: { code: 'invalid_request', field: 'since' },
    });
    expect((await exportOf('refused', '?since=99999999999')).body).toMatchObject({
      error: { code: 'beyond_checkpoint', field: 'since' },
    });
    const log = ledger.app.get<EventLog>(EVENT_LOG);
    expect(await log.readStream('export-refused')).toEqual([]);
    expect(await log.readStream('export-no-such-session')).toEqual([]);
  });
});
