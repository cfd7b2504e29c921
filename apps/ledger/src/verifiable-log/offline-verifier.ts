import { initialSessionState, verifyBundle, type BundleLimits, type ChainedEvent, type VerifiedBundle } from '#core';
import type { RecordedEvent } from '#event-log';
import { foldSessionEvents, type StreamReader } from '../sessions/session-fold.js';
import { foldedSnapshot, sessionView, treeView } from '../sessions/session-views.js';

export interface VerifiedSession extends VerifiedBundle {
  /** The session as `GET /v1/sessions/:sid` and `/tree` would have shown it at the export. */
  readonly session: Awaited<ReturnType<typeof sessionView>>;
  readonly tree: ReturnType<typeof treeView>;
}

/**
 * Verifies an export bundle with nothing but the log's verifier key (no server, no database; see
 * `verifyBundle`), then folds its events with the core reducer, a fork through its source's
 * events in the bundle, exactly as the service's read path folds the log.
 */
export async function verifySessionBundle(
  text: string,
  verifierKey: string,
  since?: string,
  limits?: BundleLimits,
): Promise<VerifiedSession> {
  const bundle = verifyBundle(text, verifierKey, since, limits);
  const byStream = new Map(bundle.streams.map((stream) => [stream.stream, stream.events.map(recordedEvent)]));
  const reader: StreamReader = {
    readStream: async (streamId, options) => {
      const from = options?.fromRevision ?? 0n;
      const events = (byStream.get(streamId) ?? []).filter((event) => event.revision >= from);
      return options?.maxCount === undefined ? events : events.slice(0, options.maxCount);
    },
  };
  const state = await foldSessionEvents(reader, initialSessionState, byStream.get(bundle.streams[0].stream)!, 'read');
  if (state.status !== 'open') throw new Error('the bundle holds no open session');
  const snapshot = foldedSnapshot(state);
  return { ...bundle, session: await sessionView(snapshot), tree: treeView(snapshot) };
}

function recordedEvent(event: ChainedEvent): RecordedEvent {
  const { streamId, revision, position, id, type, data, ...metadata } = event;
  return { id, type, streamId, revision, position, data, metadata };
}
