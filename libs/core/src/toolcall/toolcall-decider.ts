import { nameUuid } from '../hashing/name-uuid.js';
import type { FirewallVerdict, Risk, ToolCallEvent, ToolCallEventOf, ToolCallState } from './toolcall-events.js';

/**
 * A tool call's commands and `decide`. The saga sends the steps (firewall, guardian, execution);
 * people send decisions; a scheduler sends `expire` once a deadline has passed. Time and ids
 * come in as data. Impossible transitions throw `ToolCallError`.
 */
export type GuardianFailurePolicy = 'ask' | 'deny' | 'allow';

export type ToolCallCommand =
  | ({ readonly type: 'request' } & ToolCallEventOf<'toolcall.requested'>['data'])
  | { readonly type: 'record_firewall'; readonly verdict: FirewallVerdict; readonly rule: string; readonly policyVersion: string; readonly at: string }
  | {
      readonly type: 'record_guardian';
      readonly review: ToolCallEventOf<'toolcall.guardian_reviewed'>['data'];
      readonly onFailure: GuardianFailurePolicy;
      readonly approvalDeadline: string;
      readonly at: string;
    }
  | { readonly type: 'decide'; readonly approve: boolean; readonly by: string; readonly comment: string | null; readonly argumentsSha256: string; readonly at: string; readonly eventId: string }
  | { readonly type: 'expire'; readonly now: string }
  | { readonly type: 'start_execution'; readonly at: string }
  | { readonly type: 'record_result'; readonly ok: true; readonly result: unknown; readonly durationMs: number }
  | { readonly type: 'record_result'; readonly ok: false; readonly error: string; readonly durationMs: number | null; readonly unknownOutcome: boolean }
  | { readonly type: 'complete' };

export class ToolCallError extends Error {
  constructor(
    readonly code: 'toolcall_not_found' | 'toolcall_exists' | 'wrong_state' | 'already_decided' | 'arguments_mismatch' | 'self_approval' | 'not_due',
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = 'ToolCallError';
  }
}

export interface ToolCallDecidedEvent {
  readonly id: string;
  readonly event: ToolCallEvent;
}

const BLOCKING_RISKS: ReadonlySet<Risk> = new Set(['high', 'critical']);

export function decideToolCall(command: ToolCallCommand, state: ToolCallState): ToolCallDecidedEvent[] {
  if (command.type === 'request') {
    if (state.status !== 'absent') throw new ToolCallError('toolcall_exists', `tool call ${command.toolCallId} already exists`);
    const { type: _type, ...data } = command;
    return [step(data.toolCallId, 'requested', { type: 'toolcall.requested', data })];
  }
  if (state.status === 'absent') throw new ToolCallError('toolcall_not_found', 'no such tool call');
  const id = state.request.toolCallId;
  const expect = (...statuses: ToolCallState['status'][]) => {
    if (!statuses.includes(state.status)) throw new ToolCallError('wrong_state', `tool call ${id} is ${state.status}; ${command.type} needs ${statuses.join(' or ')}`);
  };
  switch (command.type) {
    case 'record_firewall': {
      expect('requested');
      const evaluated = step(id, 'firewall', { type: 'toolcall.firewall_evaluated', data: { verdict: command.verdict, rule: command.rule, policyVersion: command.policyVersion } });
      if (command.verdict !== 'deny') return [evaluated];
      return [evaluated, step(id, 'decision', { type: 'toolcall.denied', data: { by: 'firewall', at: command.at, comment: `firewall rule ${command.rule}`, stage: 'firewall' } })];
    }
    case 'record_guardian': {
      expect('screened');
      if (state.guardian) throw new ToolCallError('wrong_state', `tool call ${id} was already reviewed`);
      const { review } = command;
      const reviewed = step(id, 'guardian', { type: 'toolcall.guardian_reviewed', data: review });
      const enforcing = review.mode === 'enforce';
      const ask = (reason: string) => [reviewed, step(id, 'approval', { type: 'toolcall.approval_requested', data: { reason, deadline: command.approvalDeadline } })];
      if (state.firewall!.verdict === 'ask') return ask(`firewall rule ${state.firewall!.rule} asks a person`);
      if (enforcing && review.failed) {
        if (command.onFailure === 'ask') return ask(`the guardian failed: ${review.rationale}`);
        if (command.onFailure === 'deny') return [reviewed, step(id, 'decision', { type: 'toolcall.denied', data: { by: 'guardian', at: command.at, comment: `the guardian failed: ${review.rationale}`, stage: 'guardian' } })];
      }
      if (enforcing && !review.failed && BLOCKING_RISKS.has(review.risk)) return ask(`the guardian rated the risk ${review.risk}: ${review.rationale}`);
      return [reviewed, step(id, 'decision', { type: 'toolcall.approved', data: { by: 'policy', at: command.at, comment: `firewall ${state.firewall!.rule}; guardian ${review.mode}: ${review.failed ? 'failed' : review.risk}` } })];
    }
    case 'decide': {
      if (state.status === 'ready' || state.status === 'executing' || state.status === 'denied' || state.status === 'succeeded' || state.status === 'failed' || state.status === 'completed') {
        throw new ToolCallError('already_decided', `tool call ${id} was already decided (${state.status})`);
      }
      expect('awaiting_approval');
      if (command.argumentsSha256 !== state.request.argumentsSha256) {
        throw new ToolCallError('arguments_mismatch', `the decision names arguments ${command.argumentsSha256}, the call's are ${state.request.argumentsSha256}`, 'argumentsSha256');
      }
      if (command.approve && command.by === state.request.requestedBy) throw new ToolCallError('self_approval', `${command.by} requested this call and cannot approve it`);
      const data = { by: command.by, at: command.at, comment: command.comment };
      return [{ id: command.eventId, event: command.approve ? { type: 'toolcall.approved', data } : { type: 'toolcall.denied', data: { ...data, stage: 'reviewer' } } }];
    }
    case 'expire': {
      expect('awaiting_approval');
      const deadline = state.approval!.deadline;
      if (Date.parse(command.now) < Date.parse(deadline)) throw new ToolCallError('not_due', `tool call ${id} expires at ${deadline}`);
      return [
        step(id, 'expired', { type: 'toolcall.expired', data: { deadline, at: command.now } }),
        step(id, 'decision', { type: 'toolcall.denied', data: { by: 'expiry', at: command.now, comment: `no decision by ${deadline}`, stage: 'expiry' } }),
      ];
    }
    case 'start_execution':
      expect('ready');
      return [step(id, 'execution_started', { type: 'toolcall.execution_started', data: { at: command.at } })];
    case 'record_result':
      expect('executing');
      return [
        command.ok
          ? step(id, 'execution_finished', { type: 'toolcall.execution_succeeded', data: { result: command.result, durationMs: command.durationMs } })
          : step(id, 'execution_finished', { type: 'toolcall.execution_failed', data: { error: command.error, durationMs: command.durationMs, unknownOutcome: command.unknownOutcome } }),
      ];
    case 'complete':
      expect('succeeded', 'failed', 'denied');
      return [step(id, 'completed', { type: 'toolcall.completed', data: { outcome: state.outcome! } })];
  }
}

/** Saga steps get ids from (call, step): a step retried after a crash is recorded once. */
function step(toolCallId: string, name: string, event: ToolCallEvent): ToolCallDecidedEvent {
  return { id: nameUuid(`toolcall:${toolCallId}:${name}`), event };
}

