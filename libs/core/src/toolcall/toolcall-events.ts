/**
 * A tool call's governance stream (`toolcall-<id>`, DESIGN §6): its events, its state machine
 * and `evolve`. Every step is an event, so replays and rebuilds read each decision and result
 * back instead of asking the firewall, the guardian, a person or an MCP server again.
 */
export type FirewallVerdict = 'allow' | 'deny' | 'ask';
export type Risk = 'none' | 'low' | 'medium' | 'high' | 'critical';
export type GuardianMode = 'off' | 'monitor' | 'enforce';

export interface ToolRef {
  /** The MCP server's name in the `mcpServers` configuration. */
  readonly server: string;
  readonly name: string;
}

export type ToolCallEvent =
  | {
      readonly type: 'toolcall.requested';
      readonly data: {
        readonly toolCallId: string;
        readonly sessionId: string;
        readonly messageId: string;
        readonly toolId: string;
        readonly tool: ToolRef;
        readonly arguments: unknown;
        /** SHA-256 of the canonical JSON of the arguments: what a reviewer's decision must name. */
        readonly argumentsSha256: string;
        readonly requestedBy: string;
      };
    }
  | { readonly type: 'toolcall.firewall_evaluated'; readonly data: { readonly verdict: FirewallVerdict; readonly rule: string; readonly policyVersion: string } }
  | {
      readonly type: 'toolcall.guardian_reviewed';
      readonly data: { readonly risk: Risk; readonly rationale: string; readonly reviewer: string; readonly cacheHit: boolean; readonly mode: GuardianMode; readonly failed: boolean };
    }
  | { readonly type: 'toolcall.approval_requested'; readonly data: { readonly reason: string; readonly deadline: string } }
  | { readonly type: 'toolcall.approved'; readonly data: { readonly by: string; readonly at: string; readonly comment: string | null } }
  | { readonly type: 'toolcall.denied'; readonly data: { readonly by: string; readonly at: string; readonly comment: string | null; readonly stage: 'firewall' | 'guardian' | 'reviewer' | 'expiry' } }
  | { readonly type: 'toolcall.expired'; readonly data: { readonly deadline: string; readonly at: string } }
  | { readonly type: 'toolcall.execution_started'; readonly data: { readonly at: string } }
  | { readonly type: 'toolcall.execution_succeeded'; readonly data: { readonly result: unknown; readonly durationMs: number } }
  | { readonly type: 'toolcall.execution_failed'; readonly data: { readonly error: string; readonly durationMs: number | null; readonly unknownOutcome: boolean } }
  | { readonly type: 'toolcall.completed'; readonly data: { readonly outcome: 'succeeded' | 'failed' | 'denied' } };

export type ToolCallEventOf<Type extends ToolCallEvent['type']> = Extract<ToolCallEvent, { type: Type }>;

export const TOOLCALL_STREAM_PREFIX = 'toolcall-';
export const toolCallStreamId = (toolCallId: string) => `${TOOLCALL_STREAM_PREFIX}${toolCallId}`;

/**
 * requested → screened (firewall allowed or asked) → reviewed → awaiting_approval | ready →
 * executing → succeeded | failed; denied from the firewall, the guardian, a reviewer or expiry;
 * completed once the result went back to the session.
 */
export type ToolCallStatus = 'requested' | 'screened' | 'awaiting_approval' | 'ready' | 'executing' | 'succeeded' | 'failed' | 'denied' | 'completed';

export interface ToolCallRecord {
  readonly request: ToolCallEventOf<'toolcall.requested'>['data'];
  readonly firewall: ToolCallEventOf<'toolcall.firewall_evaluated'>['data'] | null;
  readonly guardian: ToolCallEventOf<'toolcall.guardian_reviewed'>['data'] | null;
  readonly approval: ToolCallEventOf<'toolcall.approval_requested'>['data'] | null;
  readonly decision: (ToolCallEventOf<'toolcall.approved'>['data'] & { readonly approved: true }) | (ToolCallEventOf<'toolcall.denied'>['data'] & { readonly approved: false }) | null;
  readonly execution: { readonly startedAt: string; readonly result?: unknown; readonly error?: string; readonly durationMs?: number | null; readonly unknownOutcome?: boolean } | null;
}

export type ToolCallState =
  | { readonly status: 'absent' }
  | (ToolCallRecord & { readonly status: ToolCallStatus; readonly outcome: 'succeeded' | 'failed' | 'denied' | null; readonly position: bigint });

export const initialToolCallState: ToolCallState = { status: 'absent' };

export const TERMINAL_STATUSES: ReadonlySet<ToolCallStatus> = new Set(['succeeded', 'failed', 'denied', 'completed']);

/** Total and never throws: an event that does not fit the current status leaves the state as it is. */
export function evolveToolCall(state: ToolCallState, event: { readonly type: string; readonly data: unknown; readonly position: bigint }): ToolCallState {
  const { position } = event;
  if (event.type === 'toolcall.requested') {
    if (state.status !== 'absent') return state;
    const request = event.data as ToolCallEventOf<'toolcall.requested'>['data'];
    return { status: 'requested', request, firewall: null, guardian: null, approval: null, decision: null, execution: null, outcome: null, position };
  }
  if (state.status === 'absent') return state;
  const to = (status: ToolCallStatus, changes: Partial<ToolCallRecord> & { outcome?: 'succeeded' | 'failed' | 'denied' } = {}): ToolCallState => ({ ...state, ...changes, status, position });
  switch (event.type) {
    case 'toolcall.firewall_evaluated': {
      if (state.status !== 'requested') return state;
      return to('screened', { firewall: event.data as ToolCallRecord['firewall'] });
    }
    case 'toolcall.guardian_reviewed':
      return state.status === 'screened' ? to('screened', { guardian: event.data as ToolCallRecord['guardian'] }) : state;
    case 'toolcall.approval_requested':
      return state.status === 'screened' ? to('awaiting_approval', { approval: event.data as ToolCallRecord['approval'] }) : state;
    case 'toolcall.approved': {
      const data = event.data as ToolCallEventOf<'toolcall.approved'>['data'];
      return state.status === 'screened' || state.status === 'awaiting_approval' ? to('ready', { decision: { ...data, approved: true } }) : state;
    }
    case 'toolcall.denied': {
      const data = event.data as ToolCallEventOf<'toolcall.denied'>['data'];
      if (state.status !== 'requested' && state.status !== 'screened' && state.status !== 'awaiting_approval') return state;
      return to('denied', { decision: { ...data, approved: false }, outcome: 'denied' });
    }
    case 'toolcall.expired':
      return state;
    case 'toolcall.execution_started':
      return state.status === 'ready' ? to('executing', { execution: { startedAt: (event.data as { at: string }).at } }) : state;
    case 'toolcall.execution_succeeded': {
      if (state.status !== 'executing') return state;
      const data = event.data as ToolCallEventOf<'toolcall.execution_succeeded'>['data'];
      return to('succeeded', { execution: { ...state.execution!, result: data.result, durationMs: data.durationMs }, outcome: 'succeeded' });
    }
    case 'toolcall.execution_failed': {
      if (state.status !== 'executing') return state;
      const data = event.data as ToolCallEventOf<'toolcall.execution_failed'>['data'];
      return to('failed', { execution: { ...state.execution!, error: data.error, durationMs: data.durationMs, unknownOutcome: data.unknownOutcome }, outcome: 'failed' });
    }
    case 'toolcall.completed':
      return state.status === 'succeeded' || state.status === 'failed' || state.status === 'denied' ? to('completed') : state;
    default:
      return state;
  }
}
