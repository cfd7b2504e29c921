import { messageStatus, type OpenSession } from './session-events.js';
import { addUsage, NO_TOKENS, type TokenUsage } from './token-usage.js';

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

/** Over every message the session holds, every branch (and a fork's inherited messages) included. */
export function summarizeSession(session: OpenSession): SessionSummary {
  let model: string | null = null;
  let status: SessionStatus = 'empty';
  let hasErrors = false;
  let usage = NO_TOKENS;
  for (const message of session.messages.values()) {
    model = message.model ?? model;
    status = messageStatus(message);
    hasErrors ||= status === 'error' || message.blocks.blocks.some((block) => block.status === 'error');
    usage = addUsage(usage, message.usage);
  }
  return { messageCount: session.messages.size, model, status, hasErrors, usage };
}
