import { nameUuid } from '../hashing/name-uuid.js';
import type { GovernedToolUpdate } from '../blocks/block-rules.js';
import { decodeToolResult, encodeToolResult } from './tool-result-encoding.js';
import type { FirewallVerdict, ReviewerApproval, Risk, ToolCallEvent, ToolCallEventOf } from './toolcall-events.js';

/**
 * A tool call's state machine (DESIGN §6), in one place: its state, `evolve`, `decide`, the
 * step the saga takes next from any state, and what the call's tool block shows.
 *
 * requested → screened (firewall allowed or asked) → reviewed → awaiting_approval | ready →
 * executing → succeeded | failed; denied from the firewall, the guardian, a reviewer or expiry;
 * completed once the result went back to the session.
 */
export type ToolCallStatus =
  | 'requested'
  | 'screened'
  | 'awaiting_approval'
  | 'ready'
  | 'executing'
  | 'succeeded'
  | 'failed'
  | 'denied'
  | 'completed';

export interface ToolCallRecord {
  readonly request: ToolCallEventOf<'toolcall.requested'>['data'];
  readonly firewall: ToolCallEventOf<'toolcall.firewall_evaluated'>['data'] | null;
  readonly guardian: ToolCallEventOf<'toolcall.guardian_reviewed'>['data'] | null;
  /** The request for a person's decision, with the approvals recorded so far while it waits for more reviewers. */
  readonly approval:
    | (ToolCallEventOf<'toolcall.approval_requested'>['data'] & { readonly approvals?: readonly ReviewerApproval[] })
    | null;
  readonly decision:
    | (ToolCallEventOf<'toolcall.approved'>['data'] & { readonly approved: true })
    | (ToolCallEventOf<'toolcall.denied'>['data'] & { readonly approved: false })
    | null;
  readonly execution: {
    readonly startedAt: string;
    readonly result?: unknown;
    readonly error?: string;
    readonly durationMs?: number | null;
    readonly unknownOutcome?: boolean;
  } | null;
}

export type ToolCallState =
  | { readonly status: 'absent' }
  | (ToolCallRecord & {
      readonly status: ToolCallStatus;
      readonly outcome: 'succeeded' | 'failed' | 'denied' | null;
      readonly position: bigint;
    });

export const initialToolCallState: ToolCallState = { status: 'absent' };

export const TERMINAL_STATUSES: ReadonlySet<ToolCallStatus> = new Set(['succeeded', 'failed', 'denied', 'completed']);

/** Total and never throws: an event that does not fit the current status leaves the state as it is. */
export function evolveToolCall(
  state: ToolCallState,
  event: { readonly type: string; readonly data: unknown; readonly position: bigint },
): ToolCallState {
  const { position } = event;
  if (event.type === 'toolcall.requested') {
    if (state.status !== 'absent') return state;
    const request = event.data as ToolCallEventOf<'toolcall.requested'>['data'];
    return {
      status: 'requested',
      request,
      firewall: null,
      guardian: null,
      approval: null,
      decision: null,
      execution: null,
      outcome: null,
      position,
    };
  }
  if (state.status === 'absent') return state;
  const to = (
    status: ToolCallStatus,
    changes: Partial<ToolCallRecord> & { outcome?: 'succeeded' | 'failed' | 'denied' } = {},
  ): ToolCallState => ({ ...state, ...changes, status, position });
  switch (event.type) {
    case 'toolcall.firewall_evaluated': {
      if (state.status !== 'requested') return state;
      return to('screened', { firewall: event.data as ToolCallRecord['firewall'] });
    }
    case 'toolcall.guardian_reviewed':
      return state.status === 'screened'
        ? to('screened', { guardian: event.data as ToolCallRecord['guardian'] })
        : state;
    case 'toolcall.approval_requested':
      return state.status === 'screened'
        ? to('awaiting_approval', { approval: event.data as ToolCallRecord['approval'] })
        : state;
    case 'toolcall.approval_recorded':
      if (state.status !== 'awaiting_approval') return state;
      return to('awaiting_approval', {
        approval: {
          ...state.approval!,
          approvals: [...(state.approval!.approvals ?? []), event.data as ReviewerApproval],
        },
      });
    case 'toolcall.approved': {
      const data = event.data as ToolCallEventOf<'toolcall.approved'>['data'];
      return state.status === 'screened' || state.status === 'awaiting_approval'
        ? to('ready', { decision: { ...data, approved: true } })
        : state;
    }
    case 'toolcall.denied': {
      const data = event.data as ToolCallEventOf<'toolcall.denied'>['data'];
      if (state.status !== 'requested' && state.status !== 'screened' && state.status !== 'awaiting_approval')
        return state;
      return to('denied', { decision: { ...data, approved: false }, outcome: 'denied' });
    }
    case 'toolcall.expired':
      return state;
    case 'toolcall.execution_started':
      return state.status === 'ready'
        ? to('executing', { execution: { startedAt: (event.data as { at: string }).at } })
        : state;
    case 'toolcall.execution_succeeded': {
      if (state.status !== 'executing') return state;
      const data = event.data as ToolCallEventOf<'toolcall.execution_succeeded'>['data'];
      return to('succeeded', {
        execution: { ...state.execution!, result: data.result, durationMs: data.durationMs },
        outcome: 'succeeded',
      });
    }
    case 'toolcall.execution_failed': {
      if (state.status !== 'executing') return state;
      const data = event.data as ToolCallEventOf<'toolcall.execution_failed'>['data'];
      return to('failed', {
        execution: {
          ...state.execution!,
          error: data.error,
          durationMs: data.durationMs,
          unknownOutcome: data.unknownOutcome,
        },
        outcome: 'failed',
      });
    }
    case 'toolcall.completed':
      return state.status === 'succeeded' || state.status === 'failed' || state.status === 'denied'
        ? to('completed')
        : state;
    default:
      return state;
  }
}

/**
 * Commands and `decide`: the saga sends the steps (firewall, guardian, execution); people send
 * decisions; a scheduler sends `expire` once a deadline has passed. Time and ids come in as
 * data. Impossible transitions throw `ToolCallError`.
 */
export type GuardianFailurePolicy = 'ask' | 'deny' | 'allow';

export type ToolCallCommand =
  | ({ readonly type: 'request' } & ToolCallEventOf<'toolcall.requested'>['data'])
  | {
      readonly type: 'record_firewall';
      readonly verdict: FirewallVerdict;
      readonly rule: string;
      readonly policyVersion: string;
      readonly at: string;
    }
  | {
      readonly type: 'record_guardian';
      readonly review: ToolCallEventOf<'toolcall.guardian_reviewed'>['data'];
      readonly onFailure: GuardianFailurePolicy;
      readonly approvalDeadline: string;
      /** Distinct reviewers a person's approval needs, from the policy for this tool and risk (four-eyes when 2). */
      readonly requiredApprovals: number;
      readonly at: string;
    }
  | {
      readonly type: 'decide';
      readonly approve: boolean;
      readonly comment: string | null;
      readonly argumentsSha256: string;
      readonly at: string;
      readonly eventId: string;
      /** The deciding principal: its actor (recorded) and subject; and the subject behind the requester's actor. */
      readonly by: string;
      readonly bySubject: string;
      readonly requesterSubject: string;
    }
  | { readonly type: 'expire'; readonly now: string }
  | { readonly type: 'start_execution'; readonly at: string }
  | { readonly type: 'record_result'; readonly ok: true; readonly result: unknown; readonly durationMs: number }
  | {
      readonly type: 'record_result';
      readonly ok: false;
      readonly error: string;
      readonly durationMs: number | null;
      readonly unknownOutcome: boolean;
    }
  | { readonly type: 'complete' };

export class ToolCallError extends Error {
  constructor(
    readonly code:
      | 'toolcall_not_found'
      | 'toolcall_exists'
      | 'wrong_state'
      | 'already_decided'
      | 'expired'
      | 'arguments_mismatch'
      | 'self_approval'
      | 'not_due'
      | 'already_approved',
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
    if (state.status !== 'absent')
      throw new ToolCallError('toolcall_exists', `tool call ${command.toolCallId} already exists`);
    const { type: _type, ...data } = command;
    return [step(data.toolCallId, 'requested', { type: 'toolcall.requested', data })];
  }
  if (state.status === 'absent') throw new ToolCallError('toolcall_not_found', 'no such tool call');
  const id = state.request.toolCallId;
  const expect = (...statuses: ToolCallState['status'][]) => {
    if (!statuses.includes(state.status))
      throw new ToolCallError(
        'wrong_state',
        `tool call ${id} is ${state.status}; ${command.type} needs ${statuses.join(' or ')}`,
      );
  };
  switch (command.type) {
    case 'record_firewall': {
      expect('requested');
      const evaluated = step(id, 'firewall', {
        type: 'toolcall.firewall_evaluated',
        data: { verdict: command.verdict, rule: command.rule, policyVersion: command.policyVersion },
      });
      if (command.verdict !== 'deny') return [evaluated];
      return [
        evaluated,
        step(id, 'decision', {
          type: 'toolcall.denied',
          data: { by: 'firewall', at: command.at, comment: `firewall rule ${command.rule}`, stage: 'firewall' },
        }),
      ];
    }
    case 'record_guardian': {
      expect('screened');
      if (state.guardian) throw new ToolCallError('wrong_state', `tool call ${id} was already reviewed`);
      const { review } = command;
      const reviewed = step(id, 'guardian', { type: 'toolcall.guardian_reviewed', data: review });
      const enforcing = review.mode === 'enforce';
      const ask = (reason: string) => [
        reviewed,
        step(id, 'approval', {
          type: 'toolcall.approval_requested',
          data: { reason, deadline: command.approvalDeadline, required: command.requiredApprovals },
        }),
      ];
      if (state.firewall!.verdict === 'ask') return ask(`firewall rule ${state.firewall!.rule} asks a person`);
      if (enforcing && review.failed) {
        if (command.onFailure === 'ask') return ask(`the guardian failed: ${review.rationale}`);
        if (command.onFailure === 'deny')
          return [
            reviewed,
            step(id, 'decision', {
              type: 'toolcall.denied',
              data: {
                by: 'guardian',
                at: command.at,
                comment: `the guardian failed: ${review.rationale}`,
                stage: 'guardian',
              },
            }),
          ];
      }
      if (enforcing && !review.failed && BLOCKING_RISKS.has(review.risk))
        return ask(`the guardian rated the risk ${review.risk}: ${review.rationale}`);
      return [
        reviewed,
        step(id, 'decision', {
          type: 'toolcall.approved',
          data: {
            by: 'policy',
            at: command.at,
            comment: `firewall ${state.firewall!.rule}; guardian ${review.mode}: ${review.failed ? 'failed' : review.risk}`,
          },
        }),
      ];
    }
    case 'decide': {
      if (
        state.status === 'ready' ||
        state.status === 'executing' ||
        state.status === 'denied' ||
        state.status === 'succeeded' ||
        state.status === 'failed' ||
        state.status === 'completed'
      ) {
        throw new ToolCallError('already_decided', `tool call ${id} was already decided (${state.status})`);
      }
      expect('awaiting_approval');
      checkDecision(command, state);
      const data = { by: command.by, at: command.at, comment: command.comment };
      if (!command.approve)
        return [{ id: command.eventId, event: { type: 'toolcall.denied', data: { ...data, stage: 'reviewer' } } }];
      // Four-eyes: the call runs after the required number of distinct subjects approved; any denial ends it.
      const approvals = [...(state.approval!.approvals ?? []), { ...data, subject: command.bySubject }];
      if (approvals.length < (state.approval!.required ?? 1))
        return [{ id: command.eventId, event: { type: 'toolcall.approval_recorded', data: approvals.at(-1)! } }];
      return [
        {
          id: command.eventId,
          event: { type: 'toolcall.approved', data: approvals.length > 1 ? { ...data, approvals } : data },
        },
      ];
    }
    case 'expire': {
      expect('awaiting_approval');
      const deadline = state.approval!.deadline;
      if (Date.parse(command.now) < Date.parse(deadline))
        throw new ToolCallError('not_due', `tool call ${id} expires at ${deadline}`);
      return [
        step(id, 'expired', { type: 'toolcall.expired', data: { deadline, at: command.now } }),
        step(id, 'decision', {
          type: 'toolcall.denied',
          data: { by: 'expiry', at: command.now, comment: `no decision by ${deadline}`, stage: 'expiry' },
        }),
      ];
    }
    case 'start_execution':
      expect('ready');
      return [step(id, 'execution_started', { type: 'toolcall.execution_started', data: { at: command.at } })];
    case 'record_result':
      expect('executing');
      return [
        command.ok
          ? step(id, 'execution_finished', {
              type: 'toolcall.execution_succeeded',
              data: { result: encodeToolResult(command.result), durationMs: command.durationMs },
            })
          : step(id, 'execution_finished', {
              type: 'toolcall.execution_failed',
              data: { error: command.error, durationMs: command.durationMs, unknownOutcome: command.unknownOutcome },
            }),
      ];
    case 'complete':
      expect('succeeded', 'failed', 'denied');
      return [step(id, 'completed', { type: 'toolcall.completed', data: { outcome: state.outcome! } })];
  }
}

/**
 * The rules a person's decision must pass, in order. Time is the decision's own timestamp: a
 * decision stamped at or after the stored deadline is refused whether or not the saga's timer
 * has recorded the expiry yet.
 */
function checkDecision(command: Extract<ToolCallCommand, { type: 'decide' }>, state: ToolCallRecord): void {
  const { deadline } = state.approval!;
  if (Date.parse(command.at) >= Date.parse(deadline)) {
    throw new ToolCallError('expired', `the approval deadline ${deadline} passed before this decision (${command.at})`);
  }
  const { argumentsSha256, requestedBy } = state.request;
  if (command.argumentsSha256 !== argumentsSha256) {
    const message = `the decision names arguments ${command.argumentsSha256}, the call's are ${argumentsSha256}`;
    throw new ToolCallError('arguments_mismatch', message, 'argumentsSha256');
  }
  // Separation of duties: neither the requesting credential nor any credential of the same subject decides the call.
  if (command.by === requestedBy || command.bySubject === command.requesterSubject) {
    throw new ToolCallError('self_approval', 'the principal that requested this call cannot decide it');
  }
  if (command.approve && state.approval!.approvals?.some((approval) => approval.subject === command.bySubject)) {
    throw new ToolCallError(
      'already_approved',
      'this reviewer approved the call already; another reviewer must approve it',
    );
  }
}

/** Saga steps get ids from (call, step): a step retried after a crash is recorded once. */
function step(toolCallId: string, name: string, event: ToolCallEvent): ToolCallDecidedEvent {
  return { id: nameUuid(`toolcall:${toolCallId}:${name}`), event };
}

/**
 * A governed call's id: one per tool call of a message, so a repeated `mcp_tool_pending` starts
 * nothing new. The parts go in as a JSON array, so ids holding any separator cannot collide.
 */
export const governedToolCallId = (tenant: string, sessionId: string, messageId: string, toolId: string) =>
  nameUuid(`toolcall:${JSON.stringify([tenant, sessionId, messageId, toolId])}`);

/**
 * What the saga does next for a call in this state. `execution_in_doubt`: an execution was
 * started and never recorded as finished; the process running it is gone, so the saga records
 * the outcome as unknown instead of running the tool again.
 */
export type SagaStep =
  | { readonly kind: 'screen' }
  | { readonly kind: 'review' }
  | { readonly kind: 'await_decision'; readonly deadline: string }
  | { readonly kind: 'execute' }
  | { readonly kind: 'execution_in_doubt' }
  | { readonly kind: 'complete' }
  | { readonly kind: 'done' };

export function nextSagaStep(state: ToolCallState): SagaStep {
  switch (state.status) {
    case 'absent':
    case 'completed':
      return { kind: 'done' };
    case 'requested':
      return { kind: 'screen' };
    case 'screened':
      return { kind: 'review' };
    case 'awaiting_approval':
      return { kind: 'await_decision', deadline: state.approval!.deadline };
    case 'ready':
      return { kind: 'execute' };
    case 'executing':
      return { kind: 'execution_in_doubt' };
    case 'succeeded':
    case 'failed':
    case 'denied':
      return { kind: 'complete' };
  }
}

/** The governance record a tool block carries in `metadata.governance`, and the approval queue shows. */
export function governanceRecord(state: Exclude<ToolCallState, { status: 'absent' }>) {
  const { request, firewall, guardian, approval, decision, execution, status } = state;
  return {
    toolCallId: request.toolCallId,
    status,
    tool: request.tool,
    argumentsSha256: request.argumentsSha256,
    requestedBy: request.requestedBy,
    firewall,
    guardian,
    approval,
    decision,
    execution,
  };
}

/**
 * The tool block's update for a call in this state, with a step-derived event id, or nothing
 * when the block has nothing new to show. Pending while governed, invoking while executing,
 * done or error at the end; a denial or a failure is an error result the model can read. The
 * first update comes as soon as the call is requested: from then on the block is the saga's.
 */
const SHOWN_ON_BLOCK: ReadonlySet<ToolCallStatus> = new Set([
  'requested',
  'awaiting_approval',
  'executing',
  'succeeded',
  'failed',
  'denied',
]);

export function toolBlockUpdate(
  state: ToolCallState,
): { readonly eventId: string; readonly update: GovernedToolUpdate } | undefined {
  if (state.status === 'absent' || !SHOWN_ON_BLOCK.has(state.status)) return undefined;
  const { request } = state;
  const raw = (status: 'pending' | 'invoking' | 'done' | 'error', response?: unknown) => ({
    eventId: nameUuid(`toolcall:${request.toolCallId}:block:${state.status}`),
    update: {
      response: {
        id: request.toolId,
        tool: { name: request.tool.name, serverName: request.tool.server },
        arguments: request.arguments,
        status,
        ...(response === undefined ? {} : { response }),
      },
      governance: governanceRecord(state),
    },
  });
  const errorResult = (text: string) => ({ content: [{ type: 'text', text }], isError: true });
  switch (state.status) {
    case 'requested':
    case 'awaiting_approval':
      return raw('pending');
    case 'executing':
      return raw('invoking');
    case 'succeeded': {
      const result = state.execution!.result;
      const { isError } = (decodeToolResult(result) ?? {}) as { isError?: unknown };
      return raw(isError === true ? 'error' : 'done', result);
    }
    case 'failed':
      return raw('error', errorResult(`the tool call failed: ${state.execution!.error}`));
    case 'denied': {
      const { stage, by, comment } = state.decision as Extract<ToolCallRecord['decision'], { approved: false }>;
      return raw('error', errorResult(`the tool call was denied (${stage}, by ${by})${comment ? `: ${comment}` : ''}`));
    }
  }
}
