import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { chainHash, GENESIS_HASH } from '../hashing/hash-chain.js';
import type { ChainedEvent } from './chain-check.js';
import { signCheckpoint } from './checkpoint.js';
import {
  BUNDLE_VERSION,
  bundleCheckpointLine,
  bundleEventLine,
  bundleManifestLine,
  verifyBundle,
  type BundleManifest,
} from './export-bundle.js';
import {
  CompactRange,
  inclusionProofRanges,
  leafHash,
  nodeMap,
  rangeHash,
  type Hash,
  type NodeId,
} from './merkle-tree.js';
import { verifierKeyOf } from './signed-note.js';

const signer = { name: 'ledger.test/log', privateKey: generateKeyPairSync('ed25519').privateKey };
const vkey = verifierKeyOf(signer);

/** A log of one session's events (`session-s1`) between events of another, and the bundle the service would export. */
function given(tenant = 'default') {
  let prevHash = GENESIS_HASH;
  const session: ChainedEvent[] = ['session.opened', 'message.created', 'message.created'].map((type, revision) => {
    const content = {
      streamId: 'session-s1',
      revision: BigInt(revision),
      id: `00000000-0000-4000-8000-00000000000${revision}`,
      type,
      data: { n: revision },
      recordedAt: '2026-11-22T00:00:00.000Z',
      schemaVersion: 1,
      correlationId: null,
      causationId: null,
      actor: 'key:a',
      tenant,
    };
    const hash = chainHash(prevHash, content);
    const event = { ...content, position: BigInt(2 * revision + 2), prevHash, hash };
    prevHash = hash;
    return event;
  });
  const logHashes = [1, 2, 3, 4, 5, 6].map(
    (position) =>
      session.find((event) => event.position === BigInt(position))?.hash ?? `${position}`.repeat(64).slice(0, 64),
  );
  const range = CompactRange.empty();
  const nodes: [NodeId, Hash][] = [];
  for (const hash of logHashes) nodes.push(...range.append(leafHash(Buffer.from(hash, 'hex'))));
  const lookup = nodeMap(nodes);
  const treeSize = BigInt(logHashes.length);
  const manifest: BundleManifest = {
    version: BUNDLE_VERSION,
    sessionId: 's1',
    tenant,
    exporter: 'key:auditor',
    exportedAt: '2026-11-22T01:00:00.000Z',
    events: session.length,
    origin: signer.name,
    keyId: vkey.split('+')[1],
    treeSize: String(treeSize),
    streams: [
      {
        stream: 'session-s1',
        events: session.length,
        headHash: prevHash,
        positions: session.map((event) => String(event.position)),
      },
    ],
  };
  const leafIndex = (event: ChainedEvent) => event.position - 1n;
  const lines = [
    bundleManifestLine(manifest, signer),
    ...session.map((event) =>
      bundleEventLine(
        event,
        leafIndex(event),
        inclusionProofRanges(leafIndex(event), treeSize).map((r) => rangeHash(r, lookup)),
      ),
    ),
    bundleCheckpointLine(signCheckpoint({ origin: signer.name, treeSize, rootHash: range.root() }, signer)),
  ];
  return { lines, text: `${lines.join('\n')}\n` };
}

describe('export bundle verification', () => {
  it('accepts the bundle as exported, with its streams and checkpoint', () => {
    const verified = verifyBundle(given().text, vkey);
    expect(verified.streams.map((stream) => [stream.stream, stream.events.length])).toEqual([['session-s1', 3]]);
    expect(verified.checkpoint.treeSize).toBe(6n);
  });

  it('names the line of an event moved to another position, whose hash does not cover it', () => {
    const { lines } = given();
    lines[2] = lines[2].replace('"position":"4"', '"position":"5"');
    expect(() => verifyBundle(`${lines.join('\n')}\n`, vkey)).toThrow(
      /^line 3: expected session-s1 revision 1 at position 4/,
    );
  });

  it('names a line not written as the exporter writes it: a key twice shows readers one value and hashes another', () => {
    const { lines } = given();
    expect(lines[2]).toContain('"data":{"n":1}');
    const doubled = [...lines];
    doubled[2] = lines[2].replace('"data":{"n":1}', '"data":{"n":99,"n":1}');
    expect(() => verifyBundle(`${doubled.join('\n')}\n`, vkey)).toThrow(/^line 3: not written as the ledger writes/);
    const spaced = [...lines];
    spaced[2] = JSON.stringify(JSON.parse(lines[2]), null, 1).replace(/\n/g, ' ');
    expect(() => verifyBundle(`${spaced.join('\n')}\n`, vkey)).toThrow(/^line 3: not written as the ledger writes/);
    // Line ends changed in transit (CRLF) change no content.
    expect(verifyBundle(`${lines.join('\r\n')}\r\n`, vkey).streams[0].events).toHaveLength(3);
  });

  it('names the line of a proof that does not lead to the root', () => {
    const { lines } = given();
    const event = JSON.parse(lines[3]);
    event.proof[0] = Buffer.alloc(32).toString('base64');
    lines[3] = JSON.stringify(event);
    expect(() => verifyBundle(`${lines.join('\n')}\n`, vkey)).toThrow(
      /^line 4: the event is not in the checkpoint's tree/,
    );
  });

  // An auditor's verifier reads whatever file it is handed: these ran it out of memory before a signature was read.
  it('refuses a line nested past any the ledger writes before parsing it, and lines far past the manifest before splitting them', () => {
    const lines = given().text.split('\n');
    const bomb = lines[1].replace('"data":{"n":0}', `"data":${'['.repeat(20_000)}${']'.repeat(20_000)}`);
    expect(bomb).not.toBe(lines[1]);
    expect(() => verifyBundle([lines[0], bomb, ...lines.slice(2)].join('\n'), vkey)).toThrow(
      /^line 2: nests arrays and objects deeper than 10000 levels$/,
    );
    expect(() => verifyBundle(`${lines.join('\n')}${'\n'.repeat(50_000)}`, vkey)).toThrow(
      /^line 6: the manifest counts 3 events; the bundle holds more lines$/,
    );
  });

  it('reads a signed note’s line as one string and a few members: what follows the note is measured before parsing', () => {
    const lines = given().text.split('\n');
    // 3 MB of empty arrays after the note: parsed, 27 million of them took 1.8 GB.
    const wide = (line: string) => `${line.slice(0, -1)},"pad":[${'[],'.repeat(1_000_000)}[]]}`;
    expect(() => verifyBundle([wide(lines[0]), ...lines.slice(1)].join('\n'), vkey)).toThrow(
      /^line 1: holds more than 8192 characters after its note$/,
    );
    expect(() => verifyBundle([...lines.slice(0, 4), wide(lines[4]), ''].join('\n'), vkey)).toThrow(
      /^line 5: holds more than 8192 characters after its note$/,
    );
    // A line that does not start as the ledger writes it is not parsed either.
    const reordered = JSON.stringify({ note: JSON.parse(lines[0]).note, type: 'manifest' });
    expect(() => verifyBundle([reordered, ...lines.slice(1)].join('\n'), vkey)).toThrow(
      /^line 1: not a line that starts \{"type":"manifest","note":"$/,
    );
    // A quote escaped inside the note does not end it; a short member after it is the schema's to name.
    const escaped = lines[0].replace('"}', '\\"x","extra":1}');
    expect(() => verifyBundle([escaped, ...lines.slice(1)].join('\n'), vkey)).toThrow(/^line 1: /);
    expect(() => verifyBundle([escaped, ...lines.slice(1)].join('\n'), vkey)).not.toThrow(/after its note/);
  });

  it('counts an event line’s values before parsing it, and refuses more than the bound', () => {
    const lines = given().text.split('\n');
    // 80 MB of `[],` in one line took 4.4 GB and a minute to fail its hash.
    const wide = lines[1].replace('"data":{"n":0}', `"data":[${'[],'.repeat(4_000_000)}[]]`);
    expect(() => verifyBundle([lines[0], wide, ...lines.slice(2)].join('\n'), vkey)).toThrow(
      /^line 2: holds more than 4000000 JSON values \(arrays, objects, members and items\), the verifier's bound$/,
    );
    // Its brackets and commas, those inside strings left out: the count the bound is on.
    const valuesOf = (line: string) => line.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/[^[{,]/g, '').length;
    const most = Math.max(...lines.slice(1, -2).map(valuesOf));
    expect(most).toBeGreaterThan(10);
    expect(verifyBundle(given().text, vkey, undefined, { maxLineValues: most }).streams[0].events).toHaveLength(3);
    expect(() => verifyBundle(given().text, vkey, undefined, { maxLineValues: most - 1 })).toThrow(
      new RegExp(`^line \\d: holds more than ${most - 1} JSON values`),
    );
  });

  it('refuses a bundle whose manifest speaks for no key it knows', () => {
    expect(() =>
      verifyBundle(given().text, verifierKeyOf({ ...signer, privateKey: generateKeyPairSync('ed25519').privateKey })),
    ).toThrow(/^line 1: manifest signature/);
  });
});
