import { SessionError, type DialectName, type ModelCallRequest } from '#core';
import type { SessionAuthor, SessionRef, SessionRepository } from '../sessions/session-repository.js';

/** What the gateway reports of its records (LedgerMetrics). */
export interface RecordingObserver {
  /** Provider events the log did not take (the message is marked when the log takes anything again). */
  unrecordedEvents(count: number): void;
  recordingFailed(error: unknown): void;
}

export interface AnswerPlace {
  readonly messageId: string;
  readonly nextEventSeq: number;
  /** Log position of the request's record. */
  readonly position: bigint;
}

/**
 * One model call's record, beside the stream the client reads: the request's place in the tree
 * first, then the provider's events in batches — one append per `batchMs` at most, holding
 * whatever arrived meanwhile — and at the end, how the answer ended if it did not end well. A
 * record lost on the way is counted, and marked on the message as an error, never left silent.
 */
export class AnswerRecording {
  private readonly placed: Promise<AnswerPlace | undefined>;
  /** Why the session refused the request's record, if it did. */
  private refused: SessionError | undefined;
  private buffered: unknown[] = [];
  private appending: Promise<void> | undefined;
  private nextBatch: NodeJS.Timeout | undefined;
  private nextSeq = 0;
  private unrecorded = 0;
  /** The session refused a batch: later events would not translate without it, so none is appended. */
  private refusedBatch = false;
  /** Position of the record's last event so far. */
  private position = 0n;
  private finished: Promise<AnswerPlace | undefined> | undefined;
  private markEnded!: () => void;
  /** Settles once the record is complete: the next call on the session is placed after it. */
  readonly ended = new Promise<void>((resolve) => (this.markEnded = resolve));

  constructor(
    private readonly sessions: SessionRepository,
    private readonly session: SessionRef,
    private readonly author: SessionAuthor,
    private readonly dialect: DialectName,
    private readonly observer: RecordingObserver,
    request: ModelCallRequest,
    answerMessageId: string,
    /** Events are appended at most once per this many milliseconds while the answer streams. */
    private readonly batchMs: number,
  ) {
    this.placed = this.placeRequest(request, answerMessageId);
  }

  /** Once the request's record is settled: the session's refusal of it, or `undefined` when it was placed (or the log failed). */
  async refusal(): Promise<SessionError | undefined> {
    await this.placed;
    return this.refused;
  }

  push(events: readonly unknown[]): void {
    if (events.length === 0) return;
    this.buffered.push(...events);
    if (!this.appending) this.nextBatch ??= setTimeout(() => this.appendBuffered(), this.batchMs);
  }

  /**
   * Everything pushed is appended (or counted lost); then `failure`, or the gap a loss left, is
   * recorded on the message. Resolves to the answer's place as of its record's last event. The
   * first call decides how the answer ended; later calls get its result.
   */
  finish(failure?: { name: string; message: string }): Promise<AnswerPlace | undefined> {
    this.finished ??= this.complete(failure).finally(() => this.markEnded());
    return this.finished;
  }

  private async complete(failure: { name: string; message: string } | undefined): Promise<AnswerPlace | undefined> {
    for (this.appendBuffered(); this.appending; this.appendBuffered()) await this.appending;
    const place = await this.placed;
    // A gap is what the message says first; how the answer ended, if it did not end well, goes with it.
    const ended = failure ? ` (the answer ended in ${failure.name}: ${failure.message})` : '';
    const gap =
      this.unrecorded > 0
        ? {
            name: 'RecordingGap',
            message: `${this.unrecorded} provider events of this answer were not recorded${ended}`,
          }
        : undefined;
    const error = gap ?? failure;
    if (place && error) {
      try {
        const command = { type: 'record_answer_failure' as const, messageId: place.messageId, error };
        this.position = (await this.sessions.execute(this.session, command, this.author)).position;
      } catch (recordError) {
        this.observer.recordingFailed(recordError);
      }
    }
    return place && { ...place, position: this.position };
  }

  private async placeRequest(request: ModelCallRequest, answerMessageId: string): Promise<AnswerPlace | undefined> {
    try {
      const command = { type: 'record_model_call' as const, request, dialect: this.dialect, answerMessageId };
      const { decision, position } = await this.sessions.execute(this.session, command, this.author);
      this.nextSeq = decision.answer!.nextEventSeq;
      this.position = position;
      return { ...decision.answer!, position };
    } catch (error) {
      if (error instanceof SessionError) this.refused = error;
      this.observer.recordingFailed(error);
      return undefined;
    }
  }

  /** Starts appending what is buffered, unless an append is under way (its end schedules the next). */
  private appendBuffered(): void {
    clearTimeout(this.nextBatch);
    this.nextBatch = undefined;
    if (this.appending || this.buffered.length === 0) return;
    this.appending = this.append(this.buffered).finally(() => {
      this.appending = undefined;
      if (this.buffered.length > 0) this.nextBatch ??= setTimeout(() => this.appendBuffered(), this.batchMs);
    });
    this.buffered = [];
  }

  private async append(events: readonly unknown[]): Promise<void> {
    const place = await this.placed;
    if (!place || this.refusedBatch) return this.lose(events.length);
    try {
      const command = {
        type: 'append_dialect_events' as const,
        messageId: place.messageId,
        dialect: this.dialect,
        firstSeq: this.nextSeq,
        events,
      };
      this.position = (await this.sessions.execute(this.session, command, this.author)).position;
      this.nextSeq += events.length;
    } catch (error) {
      this.observer.recordingFailed(error);
      const refusedAt = firstRefusedEvent(error) ?? 0;
      // The events before the one the session refused are what the client received first: they are recorded.
      if (refusedAt > 0) await this.append(events.slice(0, refusedAt));
      // Later events would not translate without the refused one: none is appended from here on.
      this.refusedBatch = true;
      this.lose(events.length - refusedAt);
    }
  }

  /**
   * Events of the answer that could not be recorded (unreadable, or refused by the log): counted, marked at the
   * end. Unreadable ones stop nothing: the events read around them are recorded.
   */
  lose(count: number): void {
    if (count === 0) return;
    this.unrecorded += count;
    this.observer.unrecordedEvents(count);
  }
}

/** The index of the event a session refused a batch of provider events for (`events[i]…`), if it named one. */
function firstRefusedEvent(error: unknown): number | undefined {
  const index = error instanceof SessionError ? /^events\[(\d+)\]/.exec(error.field ?? '')?.[1] : undefined;
  return index === undefined ? undefined : Number(index);
}
