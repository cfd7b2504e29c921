import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LiveItem } from './live-items.js';
import { LiveWriteBudget, type BudgetedStream } from './live-write-budget.js';

export interface SseOptions {
  /** At most one update per key per this many ms; the last state wins. */
  readonly coalesceMs: number;
  /** All streams together make about this many writes a second: the held-back ones' windows stretch to fit (decision 0033). */
  readonly writesPerSecond: number;
  readonly heartbeatMs: number;
  /** Bytes written but not yet taken by the client beyond which it is cut off with its resume id. */
  readonly maxBufferedBytes: number;
}

/** How long a raw feed waits for its client to take a batch before cutting it off. */
const RAW_STALL_MS = 10_000;
/** A raw feed's batch is written in parts of about this many characters (one event may be more). */
const RAW_PART_CHARS = 1_048_576;

/** An item goes to every watcher of its session: it is serialized once, not once per watcher. */
const serializedItems = new WeakMap<LiveItem, string>();

export type CloseReason =
  'client_closed' | 'slow_client' | 'credential_ended' | 'live_feeds_full' | 'live_feed_failed' | 'shutdown';

/** The last event a stream cut off by the service sends: why, and where to resume. */
const PARTING_EVENTS: Partial<Record<CloseReason, { readonly event: string; readonly reason: string }>> = {
  slow_client: { event: 'overflow', reason: 'the client did not keep up; reconnect with Last-Event-ID' },
  live_feeds_full: {
    event: 'live_feeds_full',
    reason: 'the session outgrew what this instance follows in memory; reconnect with Last-Event-ID later',
  },
  live_feed_failed: {
    event: 'live_feed_failed',
    reason: 'this instance could not follow the session; reconnect with Last-Event-ID',
  },
  credential_ended: {
    event: 'credential_ended',
    reason:
      'the credential was revoked, expired or no longer admits this feed; reconnect with a valid one and Last-Event-ID',
  },
};

/**
 * One client's Server-Sent Events stream. Updates are coalesced per key for `coalesceMs`
 * (the last state wins, and the last one always goes out), written in position order with
 * `id:` = the log position on the last update of each position, so `Last-Event-ID` only ever
 * names a position whose updates all arrived. (A resume after a cut inside a position repeats
 * that position's earlier updates; they carry whole states, so applying them twice is harmless.)
 *
 * A client that does not take what it is sent is cut off once `maxBufferedBytes` pile up beyond
 * its catch-up, or when it takes nothing for a heartbeat interval while over that: it gets an
 * `overflow` event with the id to resume from, and nobody else waits for it.
 *
 * `budget` gives the coalescing window now: it stretches when many streams are writing, since each
 * write is a system call per client; with thousands of busy watchers, writing every change to every
 * one of them would take the CPU that ingest needs, so they get fewer, fuller updates instead.
 */
export class SseStream implements BudgetedStream {
  private pending = new Map<string, LiveItem>();
  private timer: NodeJS.Timeout | undefined;
  private lastFlush = Number.NEGATIVE_INFINITY;
  /**
   * What was written since the catch-up: only that counts against the slow-client limit. The buffer
   * is first in, first out, so whatever is buffered beyond these is the catch-up, which a client that
   * reads may take a while to take whole. Before a catch-up, everything counts.
   */
  private writtenSinceCatchUp = Number.POSITIVE_INFINITY;
  private bufferedAtLastBeat = 0;
  private lastId: string | undefined;
  private readonly heartbeat: NodeJS.Timeout;
  private closed = false;
  /** Ends a raw batch's wait for its window when the stream closes. */
  private readonly closing = new AbortController();

  constructor(
    private readonly response: ServerResponse,
    private readonly options: SseOptions,
    private readonly onClose: (reason: CloseReason) => void,
    resumedFrom: bigint | undefined,
    private readonly budget = new LiveWriteBudget(options),
    /** Whose stream this is: the budget shares writes fairly between tenants. */
    readonly tenant = '',
  ) {
    this.lastId = resumedFrom?.toString();
    response.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    response.write('retry: 1000\n\n');
    this.heartbeat = setInterval(() => this.beat(), options.heartbeatMs);
    response.on('close', () => this.close('client_closed'));
    // HEAD asks for the headers alone (the guard judges it as the GET): the stream ends with them.
    // (Node ignores writes to a HEAD response meanwhile.)
    // A client that hung up while the stream was being set up has no 'close' left to emit.
    if (response.req?.method === 'HEAD' || response.destroyed) setImmediate(() => this.close('client_closed'));
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * The catch-up as the client joins: written at once, and it opens no coalescing window, so the
   * first change after it is not held back either (a crowd's window can be a second long). However
   * large, it does not count against the slow-client limit (`writtenSinceCatchUp`).
   */
  start(items: readonly LiveItem[]): void {
    this.push(items);
    this.writtenSinceCatchUp = 0;
    this.lastFlush = Number.NEGATIVE_INFINITY;
  }

  /**
   * Queues updates; the first after a quiet spell goes out at once, later ones at most once per
   * window, unless one is urgent and the budget allows it (`mayWriteUrgently`: no burst, nothing
   * past the tenant's part): then everything pending goes out at once. Otherwise urgent items wait
   * like the rest: a producer creating messages as fast as its rate limit allows gets no write per
   * watcher per request.
   */
  push(items: readonly LiveItem[]): void {
    if (this.closed || items.length === 0) return;
    let urgent = false;
    for (const item of items) {
      this.pending.delete(item.key);
      this.pending.set(item.key, item);
      urgent ||= item.urgent === true;
    }
    if (urgent && this.budget.mayWriteUrgently(this)) {
      clearTimeout(this.timer);
      return this.flush(false);
    }
    if (this.timer) return;
    const wait = this.lastFlush + this.budget.windowMs(this) - performance.now();
    if (wait <= 0) this.flush(false);
    else this.timer = setTimeout(() => this.flush(true), wait);
  }

  /**
   * Raw events (no coalescing: each is written, with its own id). The first batch after a quiet spell
   * goes out at once; later ones wait for the window, as a session feed's updates do. Written in parts
   * of about `RAW_PART_CHARS`, the next made only when the socket takes more, so a page of large events
   * is never one string in memory. Resolves when the client has taken them, so a slow reader slows
   * only its own feed.
   */
  async send(
    events: readonly { readonly id: bigint; readonly event?: string; readonly data: unknown }[],
  ): Promise<void> {
    if (this.closed || events.length === 0) return;
    const wait = this.lastFlush + this.budget.windowMs(this) - performance.now();
    if (wait > 0) await sleep(wait, undefined, { signal: this.closing.signal }).catch(() => undefined);
    if (this.closed) return;
    this.lastFlush = performance.now();
    this.budget.wrote(this, wait > 0, this.lastFlush);
    let part = '';
    for (const [index, event] of events.entries()) {
      part += frame(event.event, json(event.data), event.id.toString());
      if (part.length < RAW_PART_CHARS && index < events.length - 1) continue;
      this.lastId = event.id.toString();
      if (!(await this.taken(part))) return this.close('slow_client');
      part = '';
    }
  }

  /** Writes `text`; false if the stream is closed or the client did not take it within `RAW_STALL_MS`. */
  private async taken(text: string): Promise<boolean> {
    if (this.write(text)) return true;
    if (this.closed) return false;
    return new Promise<boolean>((resolve) => {
      // Both listeners go whichever way it ends: a long feed would otherwise gather one per batch.
      const settle = (taken: boolean) => {
        clearTimeout(timer);
        this.response.off('drain', onTaken);
        this.response.off('close', onTaken);
        resolve(taken);
      };
      const onTaken = () => settle(true);
      const timer = setTimeout(() => settle(false), RAW_STALL_MS);
      this.response.once('drain', onTaken);
      this.response.once('close', onTaken);
    });
  }

  close(reason: CloseReason): void {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort();
    this.budget.closed(this);
    clearInterval(this.heartbeat);
    clearTimeout(this.timer);
    const parting = PARTING_EVENTS[reason];
    if (parting) {
      const resumeFrom = this.lastId === undefined ? null : Number(this.lastId);
      this.response.end(frame(parting.event, json({ reason: parting.reason, resumeFrom }), undefined));
      // If it does not even take that, let it go: it resumes from its own Last-Event-ID.
      setTimeout(() => this.response.destroy(), 5_000).unref();
    } else this.response.end();
    this.onClose(reason);
  }

  /** Writes what is pending; `heldBack` when it waited for the window (the stream had more to send than it lets out). */
  private flush(heldBack: boolean): void {
    this.timer = undefined;
    if (this.closed || this.pending.size === 0) return;
    const buffered = Math.min(this.response.writableLength, this.writtenSinceCatchUp);
    if (buffered > this.options.maxBufferedBytes) return this.close('slow_client');
    const items = [...this.pending.values()].sort((a, b) =>
      a.position < b.position ? -1 : a.position > b.position ? 1 : 0,
    );
    this.pending = new Map();
    this.lastFlush = performance.now();
    this.budget.wrote(this, heldBack, this.lastFlush);
    let text = '';
    items.forEach((item, index) => {
      const lastOfPosition = items[index + 1]?.position !== item.position;
      text += frame(item.event, serialized(item), lastOfPosition ? item.position.toString() : undefined);
    });
    this.lastId = items.at(-1)!.position.toString();
    this.write(text);
  }

  /**
   * A heartbeat keeps an idle stream open. A client that took nothing in a whole interval while over
   * the limit is cut off here: on a quiet session no flush would notice it, nor behind a catch-up.
   */
  private beat(): void {
    const buffered = this.response.writableLength;
    if (buffered > this.options.maxBufferedBytes && buffered >= this.bufferedAtLastBeat)
      return this.close('slow_client');
    this.write(': heartbeat\n\n');
    this.bufferedAtLastBeat = this.response.writableLength;
  }

  private write(text: string): boolean {
    if (this.closed) return false;
    this.writtenSinceCatchUp += text.length;
    return this.response.write(text);
  }
}

function frame(event: string | undefined, data: string, id: string | undefined): string {
  return `${event ? `event: ${event}\n` : ''}${id !== undefined ? `id: ${id}\n` : ''}data: ${data}\n\n`;
}

function serialized(item: LiveItem): string {
  let text = serializedItems.get(item);
  if (text === undefined) serializedItems.set(item, (text = json(item.data)));
  return text;
}

function json(data: unknown): string {
  return JSON.stringify(data, (_key, value) => (typeof value === 'bigint' ? value.toString() : (value as unknown)));
}
