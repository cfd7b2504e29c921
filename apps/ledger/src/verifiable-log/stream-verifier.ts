import { Inject, Injectable } from '@nestjs/common';
import {
  chainBreak,
  firstChainBreak,
  includedStreamsOf,
  leafHash,
  openCheckpoint,
  parseVerifierKey,
  toolCallStreamId,
  verifyInclusion,
  type ChainBreak,
  type ChainedEvent,
  type Checkpoint,
} from '#core';
import type { EventLog, RecordedEvent } from '#event-log';
import type pg from 'pg';
import { PG_POOL } from '../database/pg-pool-token.js';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { ApiError } from '../http/api-error.js';
import { streamPagesUpTo } from '../sessions/session-fold.js';
import { chainedEvent } from './chained-event.js';
import { isLeafOf, leafIndexesAtPositions, leavesOfStream, type StoredLeaf } from './merkle-store.js';
import { VerifiableLog } from './verifiable-log.js';

/** A stream as far as the checked object includes it: a fork's source only up to the fork point. */
export interface IncludedStream {
  readonly streamId: string;
  readonly events: readonly RecordedEvent[];
  readonly upToPosition?: bigint;
}

export interface VerifyReport {
  readonly ok: boolean;
  readonly checkedEvents: number;
  readonly streams: readonly { readonly stream: string; readonly events: number; readonly headHash: string | null }[];
  readonly checkpoint: { readonly treeSize: string; readonly rootHash: string; readonly note: string };
  readonly firstBroken?: ChainBreak;
}

/**
 * Recomputes every hash chain a session or a tool call involves, and checks each event against
 * the Merkle log: its leaf holds the event's hash, and its inclusion proof leads to the root of a
 * checkpoint signed with the service's key. The first break (lowest position) is reported.
 */
@Injectable()
export class StreamVerifier {
  private readonly verifier;

  constructor(
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
    @Inject(PG_POOL) private readonly pool: pg.Pool,
    @Inject(VerifiableLog) private readonly log: VerifiableLog,
  ) {
    this.verifier = parseVerifierKey(log.key.verifierKey);
  }

  async verifySession(tenant: string, sessionId: string): Promise<VerifyReport> {
    const streams = await this.sessionStreams(tenant, sessionId);
    if (!(await this.everRecorded(streams[0]))) throw new ApiError(404, 'session_not_found', 'no such session', 'sid');
    return this.verify(streams);
  }

  async verifyToolCall(tenant: string, toolCallId: string): Promise<VerifyReport> {
    const streamId = toolCallStreamId(tenant, toolCallId);
    const events = await this.eventLog.readStream(streamId);
    if (!(await this.everRecorded({ streamId, events })))
      throw new ApiError(404, 'toolcall_not_found', 'no such tool call', 'id');
    return this.verify([{ streamId, events }]);
  }

  /**
   * Whether the stream has events, or had them: the Merkle log holds leaves of events that reads no
   * longer return (rows deleted, or hidden by a deleted envelope or stream row), which are missing.
   */
  private async everRecorded({ streamId, events }: IncludedStream): Promise<boolean> {
    return events.length > 0 || (await leavesOfStream(this.pool, streamId)).length > 0;
  }

  /**
   * The streams the session's events include (see `includedStreamsOf`), read from the log until
   * none is missing, each only up to where the session includes it (a fork's source).
   */
  async sessionStreams(tenant: string, sessionId: string): Promise<IncludedStream[]> {
    const read = new Map<string, { readonly upTo: bigint | undefined; readonly events: RecordedEvent[] }>();
    const covers = (upTo: bigint | undefined, wanted: bigint | undefined) =>
      upTo === undefined || (wanted !== undefined && wanted <= upTo);
    for (;;) {
      const included = includedStreamsOf(tenant, sessionId, (streamId) => read.get(streamId)?.events ?? []);
      const missing = included.filter(({ streamId, upToPosition }) => {
        const done = read.get(streamId);
        return !done || !covers(done.upTo, upToPosition);
      });
      if (missing.length === 0) {
        return included.map(({ streamId, upToPosition }) => ({
          streamId,
          upToPosition,
          events: read
            .get(streamId)!
            .events.filter((event) => upToPosition === undefined || event.position <= upToPosition),
        }));
      }
      for (const { streamId, upToPosition } of missing) {
        const events: RecordedEvent[] = [];
        for await (const page of streamPagesUpTo(this.eventLog, streamId, upToPosition)) events.push(...page);
        read.set(streamId, { upTo: upToPosition, events });
      }
    }
  }

  async verify(streams: readonly IncludedStream[]): Promise<VerifyReport> {
    const events = streams.flatMap((stream) => stream.events.map(chainedEvent));
    const lastPosition = events.reduce((max, event) => (event.position > max ? event.position : max), 0n);
    const { stored, checkpoint } = await this.checkpointFor(lastPosition);
    const breaks: ChainBreak[] = [];
    for (const stream of streams) {
      const chained = events.filter((event) => event.streamId === stream.streamId);
      const chainBroken = firstChainBreak(chained);
      if (chainBroken) breaks.push(chainBroken);
      breaks.push(...(await this.leafBreaks(stream, chained)));
    }
    breaks.push(...(await this.checkpointBreaks(events, checkpoint)));
    const firstBroken = breaks.reduce<ChainBreak | undefined>(
      (first, next) => (!first || BigInt(next.position) < BigInt(first.position) ? next : first),
      undefined,
    );
    return {
      ok: !firstBroken,
      checkedEvents: events.length,
      streams: streams.map((stream) => ({
        stream: stream.streamId,
        events: stream.events.length,
        headHash: stream.events.at(-1)?.metadata.hash ?? null,
      })),
      checkpoint: {
        treeSize: String(checkpoint.treeSize),
        rootHash: checkpoint.rootHash.toString('base64'),
        note: stored.note,
      },
      ...(firstBroken && { firstBroken }),
    };
  }

  /**
   * Events the signed checkpoint does not hold as they are: all of them checked in one pass
   * against its root, and only when that fails, each by its inclusion proof, to name which.
   */
  private async checkpointBreaks(events: readonly ChainedEvent[], checkpoint: Checkpoint): Promise<ChainBreak[]> {
    const leafIndexes = await leafIndexesAtPositions(
      this.pool,
      events.map((event) => event.position),
    );
    // A leaf row's index is the database's word: one outside the tree (negative, or past it: the row was
    // edited) names its event here, and no proof is asked for it.
    const inTree: ChainedEvent[] = [];
    const breaks: ChainBreak[] = [];
    for (const event of events) {
      const leafIndex = leafIndexes.get(event.position);
      if (isLeafOf(checkpoint.treeSize, leafIndex)) inTree.push(event);
      else {
        const actual = leafIndex === undefined ? 'none' : `leaf ${leafIndex}`;
        breaks.push(chainBreak(event, 'not_in_checkpoint', `a leaf in [0, ${checkpoint.treeSize})`, actual));
      }
    }
    const leafHashes = new Map(
      inTree.map((event) => [leafIndexes.get(event.position)!, leafHash(Buffer.from(event.hash, 'hex'))]),
    );
    // Two events claiming one leaf (the database's leaf table edited) would leave only one of them in
    // the one-pass check: then every event is checked by its own proof.
    if (leafHashes.size === inTree.length && (await this.log.includesAll(leafHashes, checkpoint))) return breaks;
    const proofs = await this.log.inclusionProofs(
      inTree.map((event) => event.position),
      checkpoint.treeSize,
    );
    const root = checkpoint.rootHash.toString('base64');
    for (const event of inTree) {
      const proof = proofs.get(event.position);
      if (!proof) {
        breaks.push(chainBreak(event, 'not_in_checkpoint', root, 'no proof: the stored tree lacks a node it needs'));
        continue;
      }
      try {
        verifyInclusion(
          leafHash(Buffer.from(event.hash, 'hex')),
          proof.leafIndex,
          checkpoint.treeSize,
          proof.hashes,
          checkpoint.rootHash,
        );
      } catch (error) {
        breaks.push(chainBreak(event, 'not_in_checkpoint', root, (error as Error).message));
      }
    }
    return breaks;
  }

  /**
   * Events against the leaves the consumer recorded for their stream: an event removed, or one whose
   * hash is not its leaf's.
   */
  private async leafBreaks(stream: IncludedStream, events: readonly ChainedEvent[]): Promise<ChainBreak[]> {
    const byPosition = new Map(events.map((event) => [event.position, event]));
    const leaves = await leavesOfStream(this.pool, stream.streamId, stream.upToPosition);
    const appended = await this.appendedSinceRead(stream.streamId, events, leaves);
    const breaks: ChainBreak[] = [];
    for (const leaf of leaves) {
      const event = byPosition.get(leaf.position);
      const at = { streamId: leaf.streamId, revision: leaf.revision, position: leaf.position } as ChainedEvent;
      if (event) {
        if (event.hash !== leaf.eventHash) breaks.push(chainBreak(event, 'not_in_log', leaf.eventHash, event.hash));
      } else if (appended.get(leaf.position) !== leaf.eventHash) {
        breaks.push(chainBreak(at, 'missing_event', leaf.eventHash, 'none'));
      }
    }
    const logged = new Set(leaves.map((leaf) => leaf.position));
    for (const event of events)
      if (!logged.has(event.position)) breaks.push(chainBreak(event, 'not_in_log', 'a leaf', 'none'));
    return breaks;
  }

  /**
   * The hashes (by position) of events appended to the stream since `events` were read: the consumer
   * may have recorded their leaves already, and they are not missing. Read only when such a leaf exists.
   */
  private async appendedSinceRead(
    streamId: string,
    events: readonly ChainedEvent[],
    leaves: readonly StoredLeaf[],
  ): Promise<Map<bigint, string>> {
    const next = (events.at(-1)?.revision ?? -1n) + 1n;
    if (!leaves.some((leaf) => leaf.revision >= next)) return new Map();
    const appended = await this.eventLog.readStream(streamId, { fromRevision: next });
    return new Map(appended.map((event) => [event.position, event.metadata.hash]));
  }

  /** A checkpoint covering the events (or the last one signed), its signature checked with the service's own key. */
  private async checkpointFor(position: bigint): Promise<{ stored: { note: string }; checkpoint: Checkpoint }> {
    const stored = await this.log.checkpointCovering(position);
    return { stored, checkpoint: openCheckpoint(stored.note, this.verifier) };
  }
}
