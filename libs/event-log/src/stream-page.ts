import type { EventLogReader, RecordedEvent } from './event-log.js';

/**
 * Up to `maxCount` events of one stream whose global position is after `afterPosition`, read in
 * bounded slices on any adapter. Inside a stream positions grow with revisions, so the first
 * revision past `afterPosition` is found by bisecting with single-event reads (about log2 of the
 * stream's length), then one read of `maxCount` events starts there. Nothing reads the whole stream.
 */
export async function readStreamAfterPosition(
  reader: Pick<EventLogReader, 'readStream'>,
  streamId: string,
  afterPosition: bigint,
  maxCount: number,
): Promise<readonly RecordedEvent[]> {
  const eventAt = async (revision: bigint) =>
    (await reader.readStream(streamId, { fromRevision: revision, maxCount: 1 }))[0];
  let first = 0n;
  if (afterPosition > 0n) {
    const [last] = await reader.readStream(streamId, { direction: 'backwards', maxCount: 1 });
    if (!last || last.position <= afterPosition) return [];
    // Invariant: every revision below `first` is at or before `afterPosition`; `beyond` is after it.
    let beyond = last.revision;
    while (first < beyond) {
      const middle = (first + beyond) / 2n;
      if (((await eventAt(middle))?.position ?? 0n) > afterPosition) beyond = middle;
      else first = middle + 1n;
    }
  }
  return reader.readStream(streamId, { fromRevision: first, maxCount });
}
