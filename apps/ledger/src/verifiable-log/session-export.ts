import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import {
  BUNDLE_VERSION,
  bundleCheckpointLine,
  bundleEventLine,
  bundleManifestLine,
  tenantStreamId,
  type BundleManifest,
} from '#core';
import { ANY, type EventLog } from '#event-log';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { ApiError } from '../http/api-error.js';
import type { Principal } from '../identity/principal.js';
import { chainedEvent } from './chained-event.js';
import { StreamVerifier } from './stream-verifier.js';
import { VerifiableLog } from './verifiable-log.js';

/**
 * Each session's exports are recorded in a stream of their own: who exported what, when, proven
 * against which checkpoint.
 */
export const EXPORT_STREAM_PREFIX = 'export-';

/**
 * Builds a session's export bundle (see `verifyBundle` in the core for its format) against a
 * checkpoint covering every included event, and records the export as an event before handing
 * it out. `since`: the tree size of an older checkpoint the auditor holds; the bundle then
 * carries a consistency proof from it.
 */
@Injectable()
export class SessionExporter {
  constructor(
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
    @Inject(StreamVerifier) private readonly streams: StreamVerifier,
    @Inject(VerifiableLog) private readonly log: VerifiableLog,
  ) {}

  async export(principal: Principal, sessionId: string, since: bigint | undefined, now: Date): Promise<string[]> {
    const streams = await this.streams.sessionStreams(principal.tenant, sessionId);
    if (streams[0].events.length === 0) throw new ApiError(404, 'session_not_found', 'no such session', 'sid');
    const events = streams.flatMap((stream) => stream.events);
    const lastPosition = events.reduce((max, event) => (event.position > max ? event.position : max), 0n);
    const checkpoint = await this.log.checkpointCovering(lastPosition);
    if (since !== undefined && since > checkpoint.treeSize) {
      throw new ApiError(
        422,
        'beyond_checkpoint',
        `since: the bundle's checkpoint holds ${checkpoint.treeSize} leaves`,
        'since',
      );
    }
    const proofs = await this.log.inclusionProofs(
      events.map((event) => event.position),
      checkpoint.treeSize,
    );
    const unproven = events.find((event) => !proofs.has(event.position));
    if (unproven)
      throw new ApiError(
        409,
        'not_in_log',
        'an event of this session is not in the signed log: run the verify route',
        'sid',
      );
    const manifest: BundleManifest = {
      version: BUNDLE_VERSION,
      sessionId,
      tenant: principal.tenant,
      exporter: principal.actor,
      exportedAt: now.toISOString(),
      events: events.length,
      streams: streams.map((stream) => ({
        stream: stream.streamId,
        events: stream.events.length,
        headHash: stream.events.at(-1)?.metadata.hash ?? null,
        positions: stream.events.map((event) => String(event.position)),
      })),
      origin: this.log.key.signer.name,
      keyId: this.log.key.keyId,
      treeSize: String(checkpoint.treeSize),
    };
    const consistency =
      since === undefined || since === checkpoint.treeSize
        ? undefined
        : { from: since, hashes: await this.log.consistencyProof(since, checkpoint.treeSize) };
    await this.eventLog.append(
      tenantStreamId(EXPORT_STREAM_PREFIX, principal.tenant, sessionId),
      [
        {
          id: randomUUID(),
          type: 'session.exported',
          data: {
            sessionId,
            exportedAt: manifest.exportedAt,
            events: manifest.events,
            treeSize: manifest.treeSize,
            streams: manifest.streams.map(({ stream, headHash }) => ({ stream, headHash })),
          },
          actor: principal.actor,
          tenant: principal.tenant,
        },
      ],
      ANY,
    );
    return [
      bundleManifestLine(manifest, this.log.key.signer),
      ...events.map((event) => {
        const proof = proofs.get(event.position)!;
        return bundleEventLine(chainedEvent(event), proof.leafIndex, proof.hashes);
      }),
      bundleCheckpointLine(checkpoint.note, consistency),
    ];
  }
}
