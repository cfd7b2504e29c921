/**
 * Server-sent events read from a provider's stream as its bytes arrive, for the record only (the
 * client gets the bytes themselves). Only the events the client's SDK reads are taken (`sdk`), up
 * to where it stops reading, so the record holds what the client received. Each event's `data` is
 * read as JSON; OpenAI's `[DONE]` stays the string "[DONE]", as the dialects take it, and ends what
 * is read, as data that is not JSON does (the SDK throws there). An event whose data (or a line of
 * it) is longer than `maxEventLength` is counted, not read. Memory stays within about
 * `maxEventLength` whatever the stream sends: a longer line is dropped as it arrives, to its end,
 * and never read from its middle.
 */
export class SseEventReader {
  private readonly decoder = new TextDecoder();
  /** The line being read, in the pieces it came in (joined once, when it ends). */
  private pending: string[] = [];
  private pendingLength = 0;
  /** The line's first characters: which field a line too long to keep was. */
  private lineStart = '';
  /** In a line too long to read: dropped up to its end. */
  private skippingLine = false;
  /** The last bytes ended with `\r`: a `\n` first in the next ones ends no second line. */
  private afterCarriageReturn = false;
  private data: string[] = [];
  private dataLength = 0;
  /** The current event has a field too long to read: it is counted, not read. */
  private oversized = false;
  /** `[DONE]` was read: the client's SDK reads nothing after it. */
  private done = false;
  private event: string | undefined;
  /** Events whose data was not JSON, or too long to read. */
  unreadable = 0;

  constructor(
    private readonly sdk: SdkReading,
    private readonly maxEventLength = 16 * 1024 * 1024,
  ) {}

  /** The events completed by these bytes, in order. */
  push(bytes: Uint8Array): unknown[] {
    return this.lines(this.decoder.decode(bytes, { stream: true }));
  }

  /** The last event, when the stream ended without the blank line that closes it. */
  end(): unknown[] {
    return [...this.lines(`${this.decoder.decode()}\n`), ...this.dispatch()];
  }

  private lines(text: string): unknown[] {
    const carried = this.afterCarriageReturn && text.startsWith('\n') ? text.slice(1) : text;
    if (text.length > 0) this.afterCarriageReturn = carried.endsWith('\r');
    const pieces = carried.split(/\r\n|\r|\n/);
    const events: unknown[] = [];
    for (const [index, piece] of pieces.entries()) {
      this.hold(piece);
      // The last piece's line goes on in the next bytes.
      if (index === pieces.length - 1) break;
      const line = this.skippingLine ? undefined : this.pending.join('');
      this.pending = [];
      this.pendingLength = 0;
      this.lineStart = '';
      this.skippingLine = false;
      if (line !== undefined) events.push(...this.line(line));
    }
    return events;
  }

  /** Adds to the line being read. Past the limit the line is dropped; a `data:` or `event:` line spoils its event. */
  private hold(piece: string): void {
    if (this.skippingLine || piece === '') return;
    if (this.lineStart.length < FIELD_NAME_LENGTH) this.lineStart += piece.slice(0, FIELD_NAME_LENGTH);
    this.pendingLength += piece.length;
    if (this.pendingLength <= this.maxEventLength) {
      this.pending.push(piece);
      return;
    }
    this.skippingLine = true;
    this.pending = [];
    if (this.lineStart.startsWith('data:') || this.lineStart.startsWith('event:')) this.spoil();
  }

  private line(line: string): unknown[] {
    if (line === '') return this.dispatch();
    // As the SSE spec reads a line: the field's name up to the first colon, or the whole line without one.
    const colon = line.indexOf(':');
    const name = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(line.startsWith(': ', colon) ? colon + 2 : colon + 1);
    if (name === 'data') {
      if (this.oversized) return [];
      this.dataLength += value.length + 1;
      if (this.dataLength > this.maxEventLength) this.spoil();
      else this.data.push(value);
    } else if (name === 'event') this.event = value;
    // `id:`, `retry:` and comments carry nothing for the record.
    return [];
  }

  private spoil(): void {
    this.oversized = true;
    this.data = [];
  }

  private dispatch(): unknown[] {
    const { event, oversized } = this;
    const data = this.data.join('\n');
    const empty = this.data.length === 0;
    this.event = undefined;
    this.data = [];
    this.dataLength = 0;
    this.oversized = false;
    if ((empty && !oversized) || this.done) return [];
    // OpenAI's SDK ends the stream at `[DONE]`, whatever the event's name, and reads nothing after it.
    if (this.sdk.endsAtDone && !oversized && data === '[DONE]') {
      this.done = true;
      return ['[DONE]'];
    }
    if (!this.sdk.reads(event)) return [];
    // The client's SDK read it; the record cannot hold it: counted.
    if (oversized) {
      this.unreadable += 1;
      return [];
    }
    try {
      return [JSON.parse(data) as unknown];
    } catch {
      // The SDK throws on data that is not JSON: the client's stream ends there, and so does what is read.
      this.unreadable += 1;
      this.done = true;
      return [];
    }
  }
}

/** Long enough to tell `data:` and `event:` lines from the rest. */
const FIELD_NAME_LENGTH = 6;

/** How a provider's SDK reads its stream: which events by name, and whether `[DONE]` ends it. */
export interface SdkReading {
  reads(event: string | undefined): boolean;
  readonly endsAtDone: boolean;
}

/** Anthropic's SDK reads its events by their names (never `ping`); OpenAI's reads any but `thread.*`, up to `[DONE]`. */
export const SDK_READING: Record<'anthropic' | 'openai', SdkReading> = {
  anthropic: { reads: (event) => event !== undefined && ANTHROPIC_EVENTS.has(event), endsAtDone: false },
  openai: { reads: (event) => event === undefined || !event.startsWith('thread.'), endsAtDone: true },
};

const ANTHROPIC_EVENTS = new Set([
  'message_start',
  'message_delta',
  'message_stop',
  'content_block_start',
  'content_block_delta',
  'content_block_stop',
  'error',
]);
