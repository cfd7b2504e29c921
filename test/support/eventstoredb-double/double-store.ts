/**
 * The double's in-memory log: what an EventStoreDB node keeps, reduced to what the client
 * protocol exposes. It survives a restart of the gRPC server (the test "stops the server and
 * starts it again" keeps the data, as a real node does).
 */

export type Expected =
  { readonly kind: 'any' | 'no_stream' | 'stream_exists' } | { readonly kind: 'revision'; readonly revision: bigint };

export interface ProposedEvent {
  readonly id: string;
  readonly type: string;
  readonly contentType: string;
  readonly data: Uint8Array;
  readonly customMetadata: Uint8Array;
}

export interface StoredEvent extends ProposedEvent {
  readonly streamName: string;
  readonly revision: bigint;
  readonly position: bigint;
  /** Ticks (100 ns) since the Unix epoch, as the server puts them in `created`. */
  readonly created: bigint;
}

export type AppendOutcome =
  | { readonly ok: true; readonly currentRevision: bigint; readonly position: bigint }
  | {
      readonly ok: false;
      readonly refused: 'wrong_expected_version';
      readonly current: bigint | 'no_stream';
      readonly expected: Expected;
    }
  | { readonly ok: false; readonly refused: 'maximum_append_size_exceeded'; readonly maxAppendSize: number };

/** A node's default `MaxAppendSize` (1 MiB): a larger append is refused whole. */
export const DEFAULT_MAX_APPEND_SIZE = 1_048_576;

/** The server's `Event.SizeOnDisk`: data and metadata bytes, two per character of the type name. */
const sizeOnDisk = (event: ProposedEvent) => event.data.length + event.customMetadata.length + event.type.length * 2;

export class DoubleStore {
  readonly all: StoredEvent[] = [];
  private readonly streams = new Map<string, StoredEvent[]>();
  // Positions are byte-offset-like, as on a real node: increasing, never contiguous.
  private nextPosition = 4_096n;
  private readonly listeners = new Set<() => void>();
  private readonly cutsIn = new Map<string, () => void>();
  private cuttingIn = false;

  constructor(readonly maxAppendSize = DEFAULT_MAX_APPEND_SIZE) {}

  stream(name: string): readonly StoredEvent[] | undefined {
    return this.streams.get(name);
  }

  append(streamName: string, expected: Expected, proposed: readonly ProposedEvent[]): AppendOutcome {
    const cutIn = this.cuttingIn ? undefined : this.cutsIn.get(streamName);
    if (cutIn) {
      this.cuttingIn = true;
      try {
        cutIn();
      } finally {
        this.cuttingIn = false;
      }
    }
    const stream = this.streams.get(streamName) ?? [];
    const current = stream.length === 0 ? -1n : BigInt(stream.length - 1);
    // The server measures the request as the events arrive, before it looks at the stream.
    if (proposed.reduce((size, event) => size + sizeOnDisk(event), 0) > this.maxAppendSize) {
      return { ok: false, refused: 'maximum_append_size_exceeded', maxAppendSize: this.maxAppendSize };
    }

    // Idempotent retry, as the server decides it: the proposed ids already stand, in order,
    // right after the expected revision (or, with `any`, from where the first one stands).
    const firstIndex =
      expected.kind === 'revision'
        ? Number(expected.revision) + 1
        : expected.kind === 'no_stream'
          ? 0
          : stream.findIndex((event) => event.id === proposed[0]?.id);
    if (
      firstIndex >= 0 &&
      proposed.length > 0 &&
      firstIndex + proposed.length <= stream.length &&
      proposed.every((event, offset) => stream[firstIndex + offset].id === event.id)
    ) {
      const last = stream[firstIndex + proposed.length - 1];
      return { ok: true, currentRevision: last.revision, position: last.position };
    }

    const accepted =
      expected.kind === 'any' ||
      (expected.kind === 'no_stream' && current === -1n) ||
      (expected.kind === 'stream_exists' && current >= 0n) ||
      (expected.kind === 'revision' && expected.revision === current);
    if (!accepted) {
      const actual = current === -1n ? 'no_stream' : current;
      return { ok: false, refused: 'wrong_expected_version', current: actual, expected };
    }

    const created = BigInt(Date.now()) * 10_000n;
    for (const event of proposed) {
      const stored: StoredEvent = {
        ...event,
        streamName,
        revision: BigInt(stream.length),
        position: this.nextPosition,
        created,
      };
      this.nextPosition += 64n + BigInt(event.data.length + event.customMetadata.length);
      stream.push(stored);
      this.all.push(stored);
    }
    this.streams.set(streamName, stream);
    for (const listener of [...this.listeners]) listener();
    const last = stream.at(-1)!;
    return { ok: true, currentRevision: last.revision, position: last.position };
  }

  /**
   * Runs `write` before every other append to `streamName` is decided, until the returned function is called: another
   * process that always gets there first. Its own appends go through unhindered.
   */
  cutInBeforeAppends(streamName: string, write: () => void): () => void {
    this.cutsIn.set(streamName, write);
    return () => this.cutsIn.delete(streamName);
  }

  /** Calls `listener` after every append until the returned function is called. */
  onAppend(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
