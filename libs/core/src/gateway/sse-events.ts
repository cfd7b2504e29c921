/**
 * Server-sent events read from a provider's stream as its bytes arrive, for the record only (the
 * client gets the bytes themselves). Each event's `data` is read as JSON; OpenAI's `[DONE]`
 * stays the string "[DONE]", as the dialects take it. Data that is not JSON is counted, not
 * guessed at.
 */
export class SseEventReader {
  private readonly decoder = new TextDecoder();
  private pending = '';
  private data: string[] = [];
  /** Events whose data was not JSON. */
  unreadable = 0;

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
    return lines.flatMap((line) => this.line(line));
  }

  private line(line: string): unknown[] {
    if (line === '') return this.dispatch();
    if (line.startsWith('data:')) this.data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
    // `event:`, `id:`, `retry:` and comments: the JSON data names its own type.
    return [];
  }

  private dispatch(): unknown[] {
    if (this.data.length === 0) return [];
    const data = this.data.join('\n');
    this.data = [];
    if (data.trim() === '[DONE]') return ['[DONE]'];
    try {
      return [JSON.parse(data) as unknown];
    } catch {
      this.unreadable += 1;
      return [];
    }
  }
}
