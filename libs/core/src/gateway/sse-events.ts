/**
 * Server-sent events read from a provider's stream as its bytes arrive, for the record only (the
 * client gets the bytes themselves). Lines and events are cut as the client's SDK cuts them, and only
 * the events it reads are taken (`sdk`), up to where it stops reading, so the record holds what the
 * client received. Each event's `data` is read as JSON; OpenAI's `[DONE]` stays the string "[DONE]",
 * as the dialects take it, and ends what is read, as data that is not JSON does (the SDK throws
 * there). Where the SDK raises the provider's error instead of reading on, `raised` says what it
 * raised.
 *
 * Clients read some streams differently (the AI SDK reads on past `[DONE]` and past an error; it drops a
 * line starting with a byte order mark; `openai` reads an event left without its closing blank line).
 * Whatever a supported client might read that this reading does not record is counted in `unreadable`,
 * never dropped silently: the record then marks the gap. So is an event too long to read
 * (`maxEventLength`). Memory stays within about `maxEventLength` whatever the stream sends: a longer line
 * is dropped as it arrives, to its end, and never read from its middle.
 */
export class SseEventReader {
  // A byte order mark is the line's (`hold`): clients differ on it after the stream's first line.
  private readonly decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  /** The line being read, in the pieces it came in (joined once, when it ends). */
  private pending: string[] = [];
  private pendingLength = 0;
  /** The line's first characters: which field a line too long to keep was. */
  private lineStart = '';
  /** In a line too long to read: dropped up to its end. */
  private skippingLine = false;
  /** Nothing of the current line has come yet: a byte order mark first in it is dropped. */
  private atLineStart = true;
  /** No line has ended yet: a byte order mark here is the stream's, which every client drops. */
  private firstLine = true;
  /** The last bytes ended with `\r`: a `\n` first in the next ones ends no second line. */
  private afterCarriageReturn = false;
  private data: string[] = [];
  private dataLength = 0;
  /** The current event has a field too long to read: it is counted, not read. */
  private oversized = false;
  /** Its name was too long to read: whether the SDK skips it is not known. */
  private nameUnknown = false;
  /** A line of the current event started with a byte order mark: clients read it differently. */
  private divergent = false;
  /** The client's SDK stopped reading (`[DONE]`, data it could not parse, an error it raised): nothing after is read. */
  private done = false;
  private event: string | undefined;
  /** Events a client may have read that the record does not hold (see above). */
  unreadable = 0;
  /** The provider's error the client's SDK raised, ending its stream. */
  raised: RaisedError | undefined;

  constructor(
    private readonly sdk: SdkReading,
    private readonly maxEventLength = 16 * 1024 * 1024,
  ) {}

  /** The events completed by these bytes, in order. */
  push(bytes: Uint8Array): unknown[] {
    return this.lines(this.decoder.decode(bytes, { stream: true }));
  }

  /**
   * The stream ended. Cleanly: its last line is completed, and an event left without its closing blank line, which
   * `openai` alone reads, is counted, not recorded. Broken off (`broken`): no client reads what was still open.
   */
  end(broken = false): unknown[] {
    const tail = this.decoder.decode();
    if (broken) return [];
    const events = tail !== '' || !this.atLineStart ? this.lines(`${tail}\n`) : [];
    const open = this.data.length > 0 || this.oversized || this.divergent;
    if (open && !this.done && this.sdk.readsUnterminated) this.count(this.event);
    return events;
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
      this.atLineStart = true;
      this.firstLine = false;
      if (line !== undefined) events.push(...this.line(line));
    }
    return events;
  }

  /** Adds to the line being read. Past the limit the line is dropped; a `data:` or `event:` line spoils its event. */
  private hold(text: string): void {
    if (this.skippingLine || text === '') return;
    let piece = text;
    if (this.atLineStart && text.startsWith(BYTE_ORDER_MARK)) {
      piece = text.slice(1);
      if (!this.firstLine) this.divergent = true;
    }
    this.atLineStart = false;
    if (this.lineStart.length < FIELD_NAME_LENGTH) this.lineStart += piece.slice(0, FIELD_NAME_LENGTH);
    this.pendingLength += piece.length;
    if (this.pendingLength <= this.maxEventLength) {
      this.pending.push(piece);
      return;
    }
    this.skippingLine = true;
    this.pending = [];
    if (this.lineStart.startsWith('data:')) this.spoil();
    if (this.lineStart.startsWith('event:')) {
      this.spoil();
      this.nameUnknown = true;
    }
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

  /** An event a client may read, which the record will not hold. */
  private count(event: string | undefined): void {
    if (this.nameUnknown || !this.sdk.skipsByName(event)) this.unreadable += 1;
  }

  private dispatch(): unknown[] {
    const { event, oversized, divergent } = this;
    const data = this.data.join('\n');
    const empty = this.data.length === 0;
    // Both SDKs dispatch an event with a name or data (an empty name is none); with neither, a name set stays.
    if (empty && !event && !oversized && !divergent) return [];
    this.data = [];
    this.dataLength = 0;
    this.oversized = false;
    this.divergent = false;
    try {
      // Past where the SDK stopped, another client may read on; an oversized event the SDK may have raised on ends
      // what is read; a divergent one is read differently by different clients.
      if (this.done || oversized || divergent) {
        if (!empty || oversized || divergent) this.count(event);
        if (oversized) this.done = true;
        return [];
      }
      const taken = this.sdk.take(event, data);
      if (taken.kind === 'skip') return [];
      if (taken.kind === 'read') return [taken.value];
      if (taken.kind === 'diverges') {
        this.unreadable += 1;
        return [];
      }
      this.done = true;
      if (taken.kind === 'end') return [taken.value];
      // The SDK throws here: the client's stream ends, and so does what is read.
      if (taken.kind === 'unreadable') this.unreadable += 1;
      else this.raised = taken.error;
      return [];
    } finally {
      this.event = undefined;
      this.nameUnknown = false;
    }
  }
}

const BYTE_ORDER_MARK = '\uFEFF';
/** Long enough to tell `data:` and `event:` lines from the rest. */
const FIELD_NAME_LENGTH = 6;

/** What the provider's stream said when the client's SDK raised it as an error. */
export interface RaisedError {
  readonly name: string;
  readonly message: string;
}

/** What an SDK does with an event it dispatched. */
type Taken =
  | { readonly kind: 'skip' }
  | { readonly kind: 'read'; readonly value: unknown }
  /** Read, and nothing after it. */
  | { readonly kind: 'end'; readonly value: unknown }
  /** Thrown on as data it cannot parse. */
  | { readonly kind: 'unreadable' }
  | { readonly kind: 'raise'; readonly error: RaisedError }
  /** Another client reads it differently: counted, not recorded. */
  | { readonly kind: 'diverges' };

/** How a provider's SDK reads its stream (the versions the gateway's tests drive: `openai` 7, `@anthropic-ai/sdk` 1). */
export interface SdkReading {
  take(event: string | undefined, data: string): Taken;
  /** It skips events of this name whatever their data. */
  skipsByName(event: string | undefined): boolean;
  /** A client of this protocol reads an event the stream left without its closing blank line. */
  readonly readsUnterminated: boolean;
}

const SKIP: Taken = { kind: 'skip' };

export const SDK_READING: Record<'anthropic' | 'openai', SdkReading> = {
  // `Stream.fromSSEResponse`: `[DONE]` ends it under any name; any data is parsed; an `error` event, or data with
  // an `error`, is thrown. `thread.*` events are no chunks to it, but are to the AI SDK, which reads by data alone.
  openai: {
    take(event, data) {
      if (data === '[DONE]') return { kind: 'end', value: '[DONE]' };
      const value = parsedJson(data);
      if (value === UNPARSED) return { kind: 'unreadable' };
      if (event?.startsWith('thread.')) return { kind: 'diverges' };
      const error = (value as { error?: unknown } | null)?.error;
      if (event === 'error' || error) return { kind: 'raise', error: raisedError(error ?? value) };
      return { kind: 'read', value };
    },
    skipsByName: () => false,
    readsUnterminated: true,
  },
  // Every named event but `ping`, by its data's type; an `error` event is thrown; empty data is skipped.
  anthropic: {
    take(event, data) {
      if (anthropicSkips(event)) return SKIP;
      if (event === 'error') {
        const body = parsedJson(data);
        return { kind: 'raise', error: raisedError(body === UNPARSED ? data : body) };
      }
      if (data === '') return SKIP;
      const value = parsedJson(data);
      return value === UNPARSED ? { kind: 'unreadable' } : { kind: 'read', value };
    },
    skipsByName: (event) => anthropicSkips(event),
    readsUnterminated: false,
  },
};

const anthropicSkips = (event: string | undefined) => event === undefined || event === 'ping';

const UNPARSED = Symbol('unparsed');

function parsedJson(data: string): unknown {
  try {
    return JSON.parse(data) as unknown;
  } catch {
    return UNPARSED;
  }
}

/** Longest message kept of an error a provider's stream raised. */
const RAISED_MESSAGE_LENGTH = 2_000;

/**
 * The error as the provider named it, `{error: {type, message}}` or `{type: 'error', code, message}`, under a name of
 * its own (`ProviderError`): a provider never writes the ledger's names for how an answer ended (`AbortError`).
 */
function raisedError(body: unknown): RaisedError {
  const error = (body as { error?: unknown } | null)?.error ?? body;
  const text = (key: string) => {
    const value = (error as Record<string, unknown> | null)?.[key];
    return typeof value === 'string' && value !== '' ? value : undefined;
  };
  const type = text('type');
  const kind = (type !== 'error' && type) || text('code');
  const message = text('message') ?? (typeof error === 'string' ? error : 'the provider stream reported an error');
  return { name: 'ProviderError', message: (kind ? `${kind}: ${message}` : message).slice(0, RAISED_MESSAGE_LENGTH) };
}
