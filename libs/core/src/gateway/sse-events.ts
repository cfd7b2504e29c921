/**
 * Server-sent events read from a provider's stream as its bytes arrive, for the record only (the
 * client gets the bytes themselves). Only the events the client's SDK reads are taken (`reads`,
 * by event name), so the record holds what the client received. Each event's `data` is read as
 * JSON; OpenAI's `[DONE]` stays the string "[DONE]", as the dialects take it. Data that is not
 * JSON, or a line longer than `maxLineLength`, is counted, not guessed at.
 */
export class SseEventReader {
  private readonly decoder = new TextDecoder();
  private pending = '';
  private data: string[] = [];
  private event: string | undefined;
  /** Events whose data was not JSON, or too long to read. */
  unreadable = 0;

  constructor(
    private readonly reads: (event: string | undefined) => boolean,
    private readonly maxLineLength = 16 * 1024 * 1024,
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
    const lines = (this.pending + text).split(/\r\n|\r|\n/);
    this.pending = lines.pop()!;
    if (this.pending.length > this.maxLineLength) {
      this.unreadable += 1;
      this.pending = '';
    }
    return lines.flatMap((line) => this.line(line));
  }

  private line(line: string): unknown[] {
    if (line === '') return this.dispatch();
    if (line.startsWith('data:')) this.data.push(field(line, 'data:'));
    else if (line.startsWith('event:')) this.event = field(line, 'event:');
    // `id:`, `retry:` and comments carry nothing for the record.
    return [];
  }

  private dispatch(): unknown[] {
    const event = this.event;
    this.event = undefined;
    if (this.data.length === 0) return [];
    const data = this.data.join('\n');
    this.data = [];
    if (!this.reads(event)) return [];
    if (data.trim() === '[DONE]') return ['[DONE]'];
    try {
      return [JSON.parse(data) as unknown];
    } catch {
      this.unreadable += 1;
      return [];
    }
  }
}

function field(line: string, name: string): string {
  return line.slice(line.startsWith(`${name} `) ? name.length + 1 : name.length);
}

/** The events each provider's SDK reads: Anthropic's by their names (never `ping`), OpenAI's unless named `thread.*`. */
export const SDK_READS = {
  anthropic: (event: string | undefined) => event !== undefined && ANTHROPIC_EVENTS.has(event),
  openai: (event: string | undefined) => event === undefined || !event.startsWith('thread.'),
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
