import { matchesFilter } from '../append-plan.js';
import { partitionPoint } from '../partition-point.js';
import type { EventFilter, ReadAllResult, RecordedEvent } from '../event-log.js';

/** What one commit of this instance's writer stored: the events right after log position `after`, in order. */
interface Commit {
  readonly after: bigint;
  readonly events: readonly RecordedEvent[];
  /** Its events' data as JSON, in characters. */
  readonly dataSize: number;
}

/**
 * Commits kept for subscriptions to take (all of one instance's subscriptions share them), by count
 * and by size of their JSON (an event can be as large as a request body; a commit larger than this
 * is not kept at all). They are taken at once by a subscription that keeps up; one that fell
 * further behind reads.
 */
const KEPT_EVENTS = 1_024;
const KEPT_DATA_SIZE = 1024 * 1024;

/**
 * What this event-log instance itself just committed, so that its subscriptions take it from
 * memory instead of reading it back after the notification. Positions are gapless (each commit
 * numbers its events right after the head it saw under the append lock), so a subscription at
 * `checkpoint` may take a commit only if it starts exactly there: anything another process
 * committed in between makes a gap, and the subscription reads the log as before.
 */
export class RecentCommits {
  private commits: Commit[] = [];
  private keptEvents = 0;
  private keptDataSize = 0;
  private underway: Promise<unknown> = Promise.resolve();
  private followers = 0;

  /** `wake`: tells the subscriptions that the log grew (they look here first). */
  constructor(private readonly wake: () => void) {}

  /** Whether any subscription follows the log now: with none, commits are not kept (nor copied). */
  get followed(): boolean {
    return this.followers > 0;
  }

  /** A subscription starts (`+1`) or stops (`-1`) following. */
  follow(change: 1 | -1): void {
    this.followers += change;
  }

  /** The writer's commit under way. Its notification can overtake its answer; see `settled`. */
  committing(commit: Promise<unknown>): void {
    this.underway = commit.catch(() => undefined);
  }

  /**
   * Settles once the commit under way (if any) has been added here, or after `ms`, or on `signal`:
   * a subscription told of a head past its checkpoint waits for this first, as the head may be that
   * very commit's.
   */
  async settled(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    const timer = setTimeout(end, ms);
    signal.addEventListener('abort', end, { once: true });
    try {
      await Promise.race([this.underway, ended]);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', end);
    }
  }

  add(after: bigint, events: readonly RecordedEvent[], dataSize: number): void {
    if (dataSize <= KEPT_DATA_SIZE) {
      this.commits.push({ after, events, dataSize });
      this.keptEvents += events.length;
      this.keptDataSize += dataSize;
      while ((this.keptEvents > KEPT_EVENTS || this.keptDataSize > KEPT_DATA_SIZE) && this.commits.length > 1) {
        const dropped = this.commits.shift()!;
        this.keptEvents -= dropped.events.length;
        this.keptDataSize -= dropped.dataSize;
      }
    }
    this.wake();
  }

  /**
   * The events this instance committed right after `checkpoint` (as many contiguous commits as
   * are kept, up to `maxCount` matching events), or `undefined` when the log's next event after
   * `checkpoint` is not known here.
   */
  after(checkpoint: bigint, filter: EventFilter | undefined, maxCount: number): ReadAllResult | undefined {
    let index = this.startingAt(checkpoint);
    if (index < 0) return undefined;
    const events: RecordedEvent[] = [];
    let reached = checkpoint;
    for (; index < this.commits.length && this.commits[index].after === reached; index += 1) {
      for (const event of this.commits[index].events) {
        reached = event.position;
        if (!matchesFilter(event, filter)) continue;
        events.push(event);
        if (events.length === maxCount) return { events, checkpoint: reached, caughtUp: false };
      }
    }
    return { events, checkpoint: reached, caughtUp: true };
  }

  /** The index of the commit that starts right after `checkpoint`, or -1 (commits are in position order). */
  private startingAt(checkpoint: bigint): number {
    const index = partitionPoint(this.commits, (commit) => commit.after < checkpoint);
    return this.commits[index]?.after === checkpoint ? index : -1;
  }
}
