import type { SessionChanges } from './session-changes.js';
import { messageStatus, type MessageState, type OpenSession } from './session-events.js';
import { addUsage, MAX_TOKEN_COUNT, NO_TOKENS, subtractUsage, type TokenUsage } from './token-usage.js';

/** What a list of sessions shows of one: the session's messages, summed up. */
export interface SessionSummary {
  readonly messageCount: number;
  /** The model of the newest message that names one. */
  readonly model: string | null;
  /** The newest message's status (`processing`, `success`, `error`, `paused`), `empty` before any message. */
  readonly status: SessionStatus;
  /** A message ended in error, or holds a block in error (a failed tool call). */
  readonly hasErrors: boolean;
  readonly usage: TokenUsage;
}

export const SESSION_STATUSES = ['empty', 'processing', 'success', 'error', 'paused'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/** A summary with what the next one is made from, so that it is kept beside its session's fold (`summarizeChanges`). */
export interface SessionTally extends SessionSummary {
  /** How many messages make `hasErrors`. */
  readonly erroredMessages: number;
  /** The creation ordinal (from 1) of the message `model` is taken from; 0 when none names one. */
  readonly modelOrdinal: number;
}

/** Over every message the session holds, every branch (and a fork's inherited messages) included. */
export function summarizeSession(session: OpenSession): SessionTally {
  let model: string | null = null;
  let modelOrdinal = 0;
  let status: SessionStatus = 'empty';
  let erroredMessages = 0;
  let usage = NO_TOKENS;
  let ordinal = 0;
  for (const message of session.messages.values()) {
    ordinal += 1;
    if (message.model !== null) [model, modelOrdinal] = [message.model, ordinal];
    status = messageStatus(message);
    erroredMessages += errored(message);
    usage = addUsage(usage, message.usage);
  }
  return tally(session, model, modelOrdinal, status, erroredMessages, usage);
}

/**
 * The summary after `changes`, made from the summary before them (of the state they were taken
 * from) and the messages they name, not from every message: a batch for a session of thousands of
 * messages costs what it changed. Messages are never removed, a message's model is set when it is
 * created, and each message not named is the same in both states. Summed whole instead when a
 * count leaves the integers a double holds exactly, so that a summary never depends on how the
 * batches fell, nor the projection on a count too large for its column (each held at `MAX_TOKEN_COUNT`).
 */
export function summarizeChanges(before: SessionTally, changes: SessionChanges): SessionTally {
  const { session } = changes;
  let { model, modelOrdinal, status, erroredMessages, usage } = before;
  if (!countsExactly(usage)) return summarizeSession(session);
  for (const { message, ordinal, previous } of changes.messages) {
    if (previous) {
      erroredMessages -= errored(previous);
      usage = subtractUsage(usage, previous.usage);
    }
    erroredMessages += errored(message);
    usage = addUsage(usage, message.usage);
    if (message.model !== null && ordinal > modelOrdinal) [model, modelOrdinal] = [message.model, ordinal];
    if (ordinal === session.messages.size) status = messageStatus(message);
    if (!countsExactly(usage)) return summarizeSession(session);
  }
  return tally(session, model, modelOrdinal, status, erroredMessages, usage);
}

const tally = (
  session: OpenSession,
  model: string | null,
  modelOrdinal: number,
  status: SessionStatus,
  erroredMessages: number,
  usage: TokenUsage,
): SessionTally => ({
  messageCount: session.messages.size,
  model,
  status,
  hasErrors: erroredMessages > 0,
  usage,
  erroredMessages,
  modelOrdinal,
});

/** 1 when the message ended in error or holds a block in error, else 0. */
const errored = (message: MessageState): number =>
  messageStatus(message) === 'error' || message.blocks.blocks.some((block) => block.status === 'error') ? 1 : 0;

/** Below `MAX_TOKEN_COUNT`, where counts are held: one held there cannot be subtracted from. */
const countsExactly = (usage: TokenUsage): boolean =>
  usage.promptTokens < MAX_TOKEN_COUNT &&
  usage.completionTokens < MAX_TOKEN_COUNT &&
  usage.totalTokens < MAX_TOKEN_COUNT;
