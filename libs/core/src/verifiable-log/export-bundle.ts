import { z } from 'zod';
import { canonicalJson } from '../hashing/canonical-json.js';
import { sessionStreamId, type SessionEventOf } from '../session/session-events.js';
import { toolCallStreamId } from '../toolcall/toolcall-events.js';
import { firstChainBreak, type ChainBreak, type ChainedEvent } from './chain-check.js';
import { openCheckpoint, type Checkpoint } from './checkpoint.js';
import { leafHash, verifyConsistency, verifyInclusion } from './merkle-tree.js';
import { openNote, parseVerifierKey, signNote, type NoteSigner, type NoteVerifier } from './signed-note.js';

/**
 * A session's export bundle (NDJSON, decision 0017), and its offline verification with nothing
 * but the log's verifier key. Line 1 is the manifest, a signed note over its canonical JSON;
 * then every event of the included streams, stream by stream in the manifest's order, each with
 * its leaf index and inclusion proof; the last line is the signed checkpoint they are proven
 * against (with a consistency proof from an older checkpoint the auditor named, if any).
 */
export const BUNDLE_VERSION = 1;

export interface BundleStream {
  readonly stream: string;
  readonly events: number;
  readonly headHash: string | null;
  /** Log positions are not under the chain hash: the signed manifest vouches for them. */
  readonly positions: readonly string[];
}

export interface BundleManifest {
  readonly version: typeof BUNDLE_VERSION;
  readonly sessionId: string;
  readonly tenant: string;
  /** The actor whose credential exported it. */
  readonly exporter: string;
  readonly exportedAt: string;
  readonly events: number;
  readonly streams: readonly BundleStream[];
  readonly origin: string;
  readonly keyId: string;
  readonly treeSize: string;
}

const decimal = z.string().regex(/^(0|[1-9][0-9]*)$/);
const hex64 = z.string().regex(/^[0-9a-f]{64}$/);
const base64Hash = z.string().regex(/^[A-Za-z0-9+/]{43}=$/);

const manifestLine = z.strictObject({ type: z.literal('manifest'), note: z.string() });
const manifestSchema = z.strictObject({
  version: z.literal(BUNDLE_VERSION),
  sessionId: z.string(),
  tenant: z.string(),
  exporter: z.string(),
  exportedAt: z.string(),
  events: z.number().int().nonnegative(),
  streams: z.array(
    z.strictObject({
      stream: z.string(),
      events: z.number().int(),
      headHash: hex64.nullable(),
      positions: z.array(decimal),
    }),
  ),
  origin: z.string(),
  keyId: z.string(),
  treeSize: decimal,
});
const eventLine = z.strictObject({
  type: z.literal('event'),
  stream: z.string(),
  revision: decimal,
  position: decimal,
  id: z.string(),
  eventType: z.string(),
  data: z.unknown(),
  metadata: z.strictObject({
    recordedAt: z.string(),
    schemaVersion: z.number().int(),
    correlationId: z.string().nullable(),
    causationId: z.string().nullable(),
    actor: z.string(),
    tenant: z.string(),
    prevHash: hex64,
    hash: hex64,
  }),
  leafIndex: decimal,
  proof: z.array(base64Hash),
});
const checkpointLine = z.strictObject({
  type: z.literal('checkpoint'),
  note: z.string(),
  consistency: z.strictObject({ from: decimal, hashes: z.array(base64Hash) }).optional(),
});

export type BundleEventLine = z.infer<typeof eventLine>;

export function bundleManifestLine(manifest: BundleManifest, signer: NoteSigner): string {
  return JSON.stringify({ type: 'manifest', note: signNote(`${canonicalJson(manifest)}\n`, signer) });
}

export function bundleEventLine(event: ChainedEvent, leafIndex: bigint, proof: readonly Buffer[]): string {
  const {
    streamId,
    revision,
    position,
    id,
    type,
    data,
    recordedAt,
    schemaVersion,
    correlationId,
    causationId,
    actor,
    tenant,
    prevHash,
    hash,
  } = event;
  const line: BundleEventLine = {
    type: 'event',
    stream: streamId,
    revision: String(revision),
    position: String(position),
    id,
    eventType: type,
    data,
    metadata: { recordedAt, schemaVersion, correlationId, causationId, actor, tenant, prevHash, hash },
    leafIndex: String(leafIndex),
    proof: proof.map((hash) => hash.toString('base64')),
  };
  return JSON.stringify(line);
}

export function bundleCheckpointLine(note: string, consistency?: { from: bigint; hashes: readonly Buffer[] }): string {
  const since = consistency && {
    from: String(consistency.from),
    hashes: consistency.hashes.map((hash) => hash.toString('base64')),
  };
  return JSON.stringify({ type: 'checkpoint', note, ...(since && { consistency: since }) });
}

/** Why a bundle fails, and where: `line` is 1-based, as an editor shows it. */
export class BundleError extends Error {
  constructor(
    readonly line: number,
    readonly reason: string,
  ) {
    super(`line ${line}: ${reason}`);
    this.name = 'BundleError';
  }
}

export interface VerifiedBundle {
  readonly manifest: BundleManifest;
  readonly checkpoint: Checkpoint;
  /** The included streams' events, in the manifest's order. */
  readonly streams: readonly { readonly stream: string; readonly events: readonly ChainedEvent[] }[];
}

/**
 * Checks a bundle with only the verifier key: the manifest's and the checkpoint's signatures,
 * the manifest's streams against those the session's own events name, every chain link, every
 * inclusion proof and every count; with `since` (an older checkpoint the auditor kept), that the
 * bundle's checkpoint extends it. Throws a BundleError naming the first line that fails.
 */
export function verifyBundle(
  text: string,
  verifierKey: string,
  since?: string,
  { maxLineValues = DEFAULT_MAX_LINE_VALUES }: BundleLimits = {},
): VerifiedBundle {
  const verifier = parseVerifierKey(verifierKey);
  const body = text.endsWith('\n') ? text.slice(0, -1) : text;
  const manifestEnd = body.indexOf('\n');
  const manifest = openManifest(manifestEnd < 0 ? body : body.slice(0, manifestEnd), verifier);
  // The signed manifest bounds the lines split, by the positions it lists (its count alone is a number): far more
  // (a file of millions of empty lines, which split whole exhausted the heap) is refused as more lines.
  const listed = manifest.streams.reduce((events, stream) => events + stream.positions.length, 0);
  const lineBound = listed + 2 + EXTRA_LINES_READ;
  const lines = body.split('\n', lineBound);
  if (lines.length === lineBound)
    throw new BundleError(listed + 3, `the manifest counts ${manifest.events} events; the bundle holds more lines`);
  // The checkpoint is the last line; the events are walked in the manifest's order, so a missing,
  // extra or moved line fails where it breaks the order.
  const checkpointLineNumber = Math.max(lines.length, 2);
  const checkpoint = openBundleCheckpoint(lines[checkpointLineNumber - 1] ?? '', checkpointLineNumber, verifier, since);
  if (String(checkpoint.treeSize) !== manifest.treeSize) {
    throw new BundleError(checkpointLineNumber, 'the checkpoint is not the one the manifest names');
  }
  let lineNumber = 1;
  const streams = manifest.streams.map((stream) => {
    const events = stream.positions.map((position, revision) => {
      lineNumber += 1;
      if (lineNumber >= checkpointLineNumber)
        throw new BundleError(lineNumber, `the manifest counts ${manifest.events} events; the bundle ends before`);
      const event = parseLine(eventLine, lines[lineNumber - 1], lineNumber, { maxValues: maxLineValues });
      if (event.stream !== stream.stream || event.revision !== String(revision) || event.position !== position) {
        throw new BundleError(
          lineNumber,
          `expected ${stream.stream} revision ${revision} at position ${position}: events are missing or out of order`,
        );
      }
      const chained = chainedEventOf(event);
      try {
        verifyInclusion(
          leafHash(Buffer.from(chained.hash, 'hex')),
          BigInt(event.leafIndex),
          checkpoint.treeSize,
          event.proof.map((hash) => Buffer.from(hash, 'base64')),
          checkpoint.rootHash,
        );
      } catch (error) {
        throw new BundleError(lineNumber, `the event is not in the checkpoint's tree: ${(error as Error).message}`);
      }
      return chained;
    });
    const firstLine = lineNumber - events.length + 1;
    const broken = firstBundleChainBreak(events, firstLine);
    if (broken)
      throw new BundleError(firstLine + Number(broken.revision), `chain ${broken.reason}: expected ${broken.expected}`);
    if (stream.events !== events.length || stream.headHash !== (events.at(-1)?.hash ?? null)) {
      throw new BundleError(1, `the manifest's count or head of ${stream.stream} does not match its events`);
    }
    return { stream: stream.stream, events };
  });
  if (lineNumber + 1 !== checkpointLineNumber) {
    throw new BundleError(lineNumber + 1, `the manifest counts ${manifest.events} events; the bundle holds more lines`);
  }
  checkIncludedStreams(manifest, streams);
  return { manifest, checkpoint, streams };
}

/**
 * The stream's first chain break. Data no one can hash (nested deeper than the stack, a number JSON
 * cannot hold) fails the line that holds it, as any other bad line does.
 */
function firstBundleChainBreak(events: readonly ChainedEvent[], firstLine: number): ChainBreak | undefined {
  try {
    return firstChainBreak(events);
  } catch (error) {
    const unhashable = events.findIndex((event) => !isHashable(event.data));
    throw new BundleError(firstLine + Math.max(unhashable, 0), `data cannot be hashed: ${(error as Error).message}`);
  }
}

function isHashable(data: unknown): boolean {
  try {
    canonicalJson(data);
    return true;
  } catch {
    return false;
  }
}

export interface BundleLimits {
  /** An event line holding more JSON values is refused before it is parsed: `DEFAULT_MAX_LINE_VALUES` by default. */
  readonly maxLineValues?: number;
}

/**
 * Values (arrays, objects, their members and items) an event line may hold. Parsed, written again and hashed, a
 * value costs the verifier about 165 bytes of memory: 80 MB of `[],` took 4.4 GB and a minute before the line's hash
 * failed. Four million take at least 8 MB of JSON, eight times the API's default body limit, and at most about 700
 * MB to check; an auditor raises the bound for a session that recorded more in one event.
 */
export const DEFAULT_MAX_LINE_VALUES = 4_000_000;

/** Lines past the manifest's count still split, so that an extra or moved line fails where it breaks the order. */
const EXTRA_LINES_READ = 1_000;

/**
 * Arrays and objects nested this deep: far past what the ledger stores (`MAX_JSON_DEPTH`) or could hash, and short
 * of what JSON.parse takes gigabytes for (a line of 80 million brackets ran the verifier out of memory).
 */
const MAX_LINE_DEPTH = 10_000;

/**
 * What may follow a signed note's string on its line: `}`, or a checkpoint's consistency proof (at most 128 hashes of
 * 44 characters for a tree of 2^64 leaves). Parsed whole, what a forged line holds there could take gigabytes (81 MB
 * of `[],` took 1.8 GB): it is measured first.
 */
const MAX_AFTER_NOTE = 8 * 1024;

/**
 * A line that carries a signed note, checked before it is parsed: it starts as the ledger writes it (`prefix`, up to
 * the note's opening quote), and what follows the note's string is short. So JSON.parse reads one string and a few
 * members, however long the line.
 */
function checkNoteLineFrame(content: string, prefix: string, lineNumber: number): void {
  if (!content.startsWith(prefix)) throw new BundleError(lineNumber, `not a line that starts ${prefix}`);
  const noteEnd = stringEnd(content, prefix.length - 1);
  if (content.length - noteEnd - 1 > MAX_AFTER_NOTE)
    throw new BundleError(lineNumber, `holds more than ${MAX_AFTER_NOTE} characters after its note`);
}

/** What a line is checked for before it is parsed: a signed note's frame (`notePrefix`), at most `maxValues` values. */
interface LineChecks {
  readonly notePrefix?: string;
  readonly maxValues?: number;
}

function parseLine<T>(
  schema: z.ZodType<T>,
  line: string,
  lineNumber: number,
  { notePrefix, maxValues = Infinity }: LineChecks = {},
): T {
  let json: unknown;
  const content = line.endsWith('\r') ? line.slice(0, -1) : line;
  if (notePrefix !== undefined) checkNoteLineFrame(content, notePrefix, lineNumber);
  const shape = lineShapeProblem(content, MAX_LINE_DEPTH, maxValues);
  if (shape) throw new BundleError(lineNumber, shape);
  try {
    json = JSON.parse(content);
  } catch {
    throw new BundleError(lineNumber, 'not a JSON line');
  }
  // A key twice would show a reader one value and the check another: each line must be exactly as exported.
  // (Data too deep to write again is left to the hash's own check, which names it.)
  if ((written(json) ?? content) !== content)
    throw new BundleError(lineNumber, 'not written as the ledger writes its lines (a key twice, or other spacing)');
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BundleError(lineNumber, `${issue.path.join('.') || 'line'}: ${issue.message}`);
  }
  return parsed.data;
}

/**
 * Whether a JSON text opens more than `maxDepth` arrays and objects at once, or holds more than `maxValues` values,
 * counted as its arrays and objects and the commas between their members and items (what strings hold does not
 * count).
 */
function lineShapeProblem(text: string, maxDepth: number, maxValues: number): string | undefined {
  let depth = 0;
  let values = 0;
  for (let at = 0; at < text.length; at += 1) {
    const code = text.charCodeAt(at);
    if (code === 0x22) at = stringEnd(text, at);
    else if (code === 0x5b || code === 0x7b) {
      if (++depth > maxDepth) return `nests arrays and objects deeper than ${maxDepth} levels`;
      values += 1;
    } else if (code === 0x5d || code === 0x7d) depth -= 1;
    else if (code === 0x2c) values += 1;
    if (values > maxValues)
      return `holds more than ${maxValues} JSON values (arrays, objects, members and items), the verifier's bound`;
  }
  return undefined;
}

/** Where the JSON string opened by the quote at `opening` closes: past escaped characters; the text's length if never. */
function stringEnd(text: string, opening: number): number {
  let at = opening + 1;
  for (; at < text.length && text.charCodeAt(at) !== 0x22; at += 1) if (text.charCodeAt(at) === 0x5c) at += 1;
  return at;
}

function written(json: unknown): string | undefined {
  try {
    return JSON.stringify(json);
  } catch {
    return undefined;
  }
}

function openManifest(line: string, verifier: NoteVerifier): BundleManifest {
  const { note } = parseLine(manifestLine, line, 1, { notePrefix: '{"type":"manifest","note":"' });
  let text: string;
  try {
    text = openNote(note, verifier);
  } catch (error) {
    throw new BundleError(1, `manifest signature: ${(error as Error).message}`);
  }
  return parseLine(manifestSchema, text.slice(0, -1), 1);
}

function openBundleCheckpoint(
  line: string,
  lineNumber: number,
  verifier: NoteVerifier,
  since: string | undefined,
): Checkpoint {
  const parsed = parseLine(checkpointLine, line, lineNumber, { notePrefix: '{"type":"checkpoint","note":"' });
  const signed = (note: string, what: string) => {
    try {
      return openCheckpoint(note, verifier);
    } catch (error) {
      throw new BundleError(lineNumber, `${what} signature: ${(error as Error).message}`);
    }
  };
  const checkpoint = signed(parsed.note, 'checkpoint');
  if (since === undefined) return checkpoint;
  const older = signed(since, "the older checkpoint's");
  if (older.treeSize === checkpoint.treeSize) {
    if (!older.rootHash.equals(checkpoint.rootHash))
      throw new BundleError(lineNumber, 'the log forked: same size, different roots');
    return checkpoint;
  }
  if (parsed.consistency?.from !== String(older.treeSize)) {
    throw new BundleError(
      lineNumber,
      `the bundle holds no consistency proof from tree size ${older.treeSize}: export it with ?since=${older.treeSize}`,
    );
  }
  try {
    verifyConsistency(
      older.treeSize,
      checkpoint.treeSize,
      parsed.consistency.hashes.map((hash) => Buffer.from(hash, 'base64')),
      older.rootHash,
      checkpoint.rootHash,
    );
  } catch (error) {
    throw new BundleError(lineNumber, `the log does not extend the older checkpoint: ${(error as Error).message}`);
  }
  return checkpoint;
}

function chainedEventOf(line: BundleEventLine): ChainedEvent {
  return {
    streamId: line.stream,
    revision: BigInt(line.revision),
    position: BigInt(line.position),
    id: line.id,
    type: line.eventType,
    data: line.data,
    ...line.metadata,
  };
}

/**
 * The streams a session includes, as its own events name them: its stream, a fork's source up to
 * the fork point (recursively), and the tool calls its events update (up to the same point).
 */
export function includedStreamsOf(
  tenant: string,
  sessionId: string,
  eventsOf: (streamId: string) => readonly { type: string; data: unknown; position: bigint }[],
  upToPosition?: bigint,
): { streamId: string; upToPosition?: bigint }[] {
  const streamId = sessionStreamId(tenant, sessionId);
  const events = eventsOf(streamId).filter((event) => upToPosition === undefined || event.position <= upToPosition);
  const included: { streamId: string; upToPosition?: bigint }[] = [{ streamId, upToPosition }];
  const [first] = events;
  if (first?.type === 'session.forked') {
    const { source } = first.data as SessionEventOf<'session.forked'>['data'];
    included.push(...includedStreamsOf(tenant, source.sessionId, eventsOf, BigInt(source.position)));
  }
  const toolCallIds = new Set(
    events
      .filter((event) => event.type === 'message.tool_call_updated')
      .map((event) => (event.data as SessionEventOf<'message.tool_call_updated'>['data']).toolCallId),
  );
  for (const toolCallId of toolCallIds) included.push({ streamId: toolCallStreamId(tenant, toolCallId), upToPosition });
  return included;
}

function checkIncludedStreams(manifest: BundleManifest, streams: VerifiedBundle['streams']): void {
  const byStream = new Map(streams.map((stream) => [stream.stream, stream.events]));
  const included = includedStreamsOf(manifest.tenant, manifest.sessionId, (streamId) => byStream.get(streamId) ?? []);
  const expected = included.map((stream) => stream.streamId);
  const listed = streams.map((stream) => stream.stream);
  if (canonicalJson(expected) !== canonicalJson(listed)) {
    throw new BundleError(
      1,
      `the session's events include the streams ${expected.join(', ')}; the bundle holds ${listed.join(', ')}`,
    );
  }
  const limits = new Map(included.map((stream) => [stream.streamId, stream.upToPosition]));
  for (const stream of streams) {
    const limit = limits.get(stream.stream);
    if (limit !== undefined && stream.events.some((event) => event.position > limit)) {
      throw new BundleError(1, `${stream.stream} holds events past the fork point ${limit}`);
    }
    const foreign = stream.events.find((event) => event.tenant !== manifest.tenant);
    if (foreign) throw new BundleError(1, `${stream.stream} holds an event of another tenant`);
  }
}
