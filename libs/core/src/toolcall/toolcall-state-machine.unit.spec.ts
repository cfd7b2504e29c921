import {
  decideToolCall,
  evolveToolCall,
  governedToolCallId,
  initialToolCallState,
  nextSagaStep,
  toolBlockUpdate,
  ToolCallError,
  type ToolCallCommand,
  type ToolCallState,
} from './toolcall-state-machine.js';
import type { ToolCallEvent } from './toolcall-events.js';

const at = '2026-01-01T00:00:00.000Z';
const requested: ToolCallEvent = {
  type: 'toolcall.requested',
  data: {
    toolCallId: 't1',
    sessionId: 's1',
    messageId: 'a1',
    toolId: 'call_1',
    tool: { server: 'fs', name: 'read_file' },
    arguments: { path: '/x' },
    argumentsSha256: 'abc',
    requestedBy: 'producer',
  },
};
const firewall = (verdict: 'allow' | 'ask' | 'deny'): ToolCallEvent => ({
  type: 'toolcall.firewall_evaluated',
  data: { verdict, rule: `rule-${verdict}`, policyVersion: 'v1' },
});
const review = (risk: 'low' | 'high', failed = false) => ({
  risk,
  rationale: 'because',
  reviewer: 'rules',
  cacheHit: false,
  mode: 'enforce' as const,
  failed,
});
const awaiting: ToolCallEvent[] = [
  requested,
  firewall('ask'),
  { type: 'toolcall.guardian_reviewed', data: review('low') },
  { type: 'toolcall.approval_requested', data: { reason: 'ask', deadline: '2026-01-01T00:10:00.000Z' } },
];

function given(...events: ToolCallEvent[]) {
  const state = events.reduce<ToolCallState>(
    (current, event, index) => evolveToolCall(current, { ...event, position: BigInt(index + 1) }),
    initialToolCallState,
  );
  return {
    state,
    when: (command: ToolCallCommand) => ({
      then: (...types: ToolCallEvent['type'][]) =>
        expect(decideToolCall(command, state).map((decided) => decided.event.type)).toEqual(types),
      thenThrows(code: ToolCallError['code']) {
        let thrown: unknown;
        try {
          decideToolCall(command, state);
        } catch (error) {
          thrown = error;
        }
        expect(thrown).toBeInstanceOf(ToolCallError);
        expect(thrown).toMatchObject({ code });
      },
    }),
  };
}

const decide = (
  approve: boolean,
  by = 'reviewer',
  argumentsSha256 = 'abc',
  bySubject = `subject:${by}`,
): ToolCallCommand => ({
  type: 'decide',
  approve,
  by,
  bySubject,
  requesterSubject: 'subject:producer',
  comment: null,
  argumentsSha256,
  at,
  eventId: '00000000-0000-4000-8000-000000000001',
});
const guardian = (
  risk: 'low' | 'high',
  onFailure: 'ask' | 'deny' | 'allow' = 'ask',
  failed = false,
): ToolCallCommand => ({
  type: 'record_guardian',
  review: review(risk, failed),
  onFailure,
  approvalDeadline: '2026-01-01T00:10:00.000Z',
  requiredApprovals: 1,
  at,
});

describe('tool-call state machine', () => {
  it('firewall: deny ends the call; allow and ask go on to the guardian', () => {
    given(requested)
      .when({ type: 'record_firewall', verdict: 'deny', rule: 'r', policyVersion: 'v1', at })
      .then('toolcall.firewall_evaluated', 'toolcall.denied');
    given(requested)
      .when({ type: 'record_firewall', verdict: 'allow', rule: 'r', policyVersion: 'v1', at })
      .then('toolcall.firewall_evaluated');
    expect(
      given(requested, firewall('deny'), {
        type: 'toolcall.denied',
        data: { by: 'firewall', at, comment: null, stage: 'firewall' },
      }).state.status,
    ).toBe('denied');
  });

  it('guardian: low risk runs, high risk or a firewall ask waits for a person, a failure follows the configured policy', () => {
    given(requested, firewall('allow')).when(guardian('low')).then('toolcall.guardian_reviewed', 'toolcall.approved');
    given(requested, firewall('allow'))
      .when(guardian('high'))
      .then('toolcall.guardian_reviewed', 'toolcall.approval_requested');
    given(requested, firewall('ask'))
      .when(guardian('low'))
      .then('toolcall.guardian_reviewed', 'toolcall.approval_requested');
    given(requested, firewall('allow'))
      .when(guardian('low', 'ask', true))
      .then('toolcall.guardian_reviewed', 'toolcall.approval_requested');
    given(requested, firewall('allow'))
      .when(guardian('low', 'deny', true))
      .then('toolcall.guardian_reviewed', 'toolcall.denied');
    given(requested, firewall('allow'))
      .when({ ...guardian('high'), review: { ...review('high'), mode: 'monitor' } } as ToolCallCommand)
      .then('toolcall.guardian_reviewed', 'toolcall.approved');
  });

  it('four-eyes: the call runs after the N-th distinct subject approves; the same subject never counts twice; any denial ends it', () => {
    const twoEyes: ToolCallEvent[] = [
      ...awaiting.slice(0, 3),
      {
        type: 'toolcall.approval_requested',
        data: { reason: 'ask', deadline: '2026-01-01T00:10:00.000Z', required: 2 },
      },
    ];
    given(...twoEyes)
      .when(decide(true, 'alice'))
      .then('toolcall.approval_recorded');
    const oneApproval: ToolCallEvent = {
      type: 'toolcall.approval_recorded',
      data: { by: 'alice', subject: 'subject:alice', at, comment: null },
    };
    expect(given(...twoEyes, oneApproval).state).toMatchObject({
      status: 'awaiting_approval',
      approval: { required: 2, approvals: [{ by: 'alice' }] },
    });
    // alice again, with the same key or another key of hers: refused, nothing recorded.
    given(...twoEyes, oneApproval)
      .when(decide(true, 'alice'))
      .thenThrows('already_approved');
    given(...twoEyes, oneApproval)
      .when(decide(true, 'alice-laptop', 'abc', 'subject:alice'))
      .thenThrows('already_approved');
    given(...twoEyes, oneApproval)
      .when(decide(true, 'bob'))
      .then('toolcall.approved');
    expect(decideToolCall(decide(true, 'bob'), given(...twoEyes, oneApproval).state)[0].event.data).toMatchObject({
      by: 'bob',
      approvals: [
        { by: 'alice', subject: 'subject:alice' },
        { by: 'bob', subject: 'subject:bob' },
      ],
    });
    given(...twoEyes, oneApproval)
      .when(decide(false, 'bob'))
      .then('toolcall.denied');
    // The requester's subject neither approves nor denies, also with a second approval pending.
    given(...twoEyes, oneApproval)
      .when(decide(true, 'producer'))
      .thenThrows('self_approval');
    // The policy's count is what record_guardian carries.
    const asked = decideToolCall(
      { ...guardian('high'), requiredApprovals: 2 } as ToolCallCommand,
      given(requested, firewall('allow')).state,
    );
    expect(asked[1].event).toMatchObject({ type: 'toolcall.approval_requested', data: { required: 2 } });
  });

  it('approval: first decision wins, arguments must match, the requester cannot approve, expiry only after the deadline', () => {
    given(...awaiting)
      .when(decide(true))
      .then('toolcall.approved');
    given(...awaiting)
      .when(decide(false))
      .then('toolcall.denied');
    given(...awaiting)
      .when(decide(true, 'reviewer', 'other'))
      .thenThrows('arguments_mismatch');
    given(...awaiting)
      .when(decide(true, 'producer'))
      .thenThrows('self_approval');
    // Another credential of the requester's subject, deciding either way.
    given(...awaiting)
      .when(decide(true, 'producer-laptop', 'abc', 'subject:producer'))
      .thenThrows('self_approval');
    given(...awaiting)
      .when(decide(false, 'producer-laptop', 'abc', 'subject:producer'))
      .thenThrows('self_approval');
    given(...awaiting, { type: 'toolcall.denied', data: { by: 'r', at, comment: null, stage: 'reviewer' } })
      .when(decide(true))
      .thenThrows('already_decided');
    given(...awaiting, { type: 'toolcall.approved', data: { by: 'r', at, comment: null } })
      .when(decide(false))
      .thenThrows('already_decided');
    given(...awaiting)
      .when({ type: 'expire', now: '2026-01-01T00:09:59.000Z' })
      .thenThrows('not_due');
    given(...awaiting)
      .when({ type: 'expire', now: '2026-01-01T00:10:00.000Z' })
      .then('toolcall.expired', 'toolcall.denied');
  });

  describe('a decision respects the stored deadline, by its own timestamp', () => {
    // The clock: the deadline stored with the approval request, and decisions stamped around it.
    const deadline = Date.parse('2026-01-01T00:10:00.000Z');
    const stampedAt = (offsetMs: number) => new Date(deadline + offsetMs).toISOString();
    const decideAt = (approve: boolean, offsetMs: number): ToolCallCommand => {
      return { ...(decide(approve) as Extract<ToolCallCommand, { type: 'decide' }>), at: stampedAt(offsetMs) };
    };

    it('before the deadline, an approval or a denial is recorded', () => {
      given(...awaiting)
        .when(decideAt(true, -1))
        .then('toolcall.approved');
      given(...awaiting)
        .when(decideAt(false, -1))
        .then('toolcall.denied');
    });

    it('at or after the deadline, whatever the timer did, both are refused as expired', () => {
      for (const offsetMs of [0, 1, 60_000]) {
        given(...awaiting)
          .when(decideAt(true, offsetMs))
          .thenThrows('expired');
        given(...awaiting)
          .when(decideAt(false, offsetMs))
          .thenThrows('expired');
      }
    });

    it('once the expiry is recorded, a late decision finds the call decided', () => {
      const expired: ToolCallEvent[] = [
        { type: 'toolcall.expired', data: { deadline: stampedAt(0), at: stampedAt(5) } },
        { type: 'toolcall.denied', data: { by: 'expiry', at: stampedAt(5), comment: null, stage: 'expiry' } },
      ];
      given(...awaiting, ...expired)
        .when(decideAt(true, 10))
        .thenThrows('already_decided');
    });
  });

  it('governed ids are unambiguous: ids holding the separator do not collide', () => {
    expect(governedToolCallId('t', 's', 'a:b', 'c')).not.toBe(governedToolCallId('t', 's', 'a', 'b:c'));
    expect(governedToolCallId('t', 's:a', 'b', 'c')).not.toBe(governedToolCallId('t', 's', 'a:b', 'c'));
    expect(governedToolCallId('t', 's', 'a:b/c', 'x')).not.toBe(governedToolCallId('t', 's', 'a/b:c', 'x'));
    expect(governedToolCallId('t:s', 'x', 'm', 't')).not.toBe(governedToolCallId('t', 's:x', 'm', 't'));
    expect(governedToolCallId('acme', 's', 'm', 't')).not.toBe(governedToolCallId('default', 's', 'm', 't'));
    expect(governedToolCallId('t', 's', 'm', 't')).toBe(governedToolCallId('t', 's', 'm', 't'));
  });

  it('executes once: a second start is refused, and a denied call never starts', () => {
    const ready = [...awaiting, { type: 'toolcall.approved', data: { by: 'r', at, comment: null } } as ToolCallEvent];
    given(...ready)
      .when({ type: 'start_execution', at })
      .then('toolcall.execution_started');
    given(...ready, { type: 'toolcall.execution_started', data: { at } })
      .when({ type: 'start_execution', at })
      .thenThrows('wrong_state');
    given(...awaiting, { type: 'toolcall.denied', data: { by: 'r', at, comment: null, stage: 'reviewer' } })
      .when({ type: 'start_execution', at })
      .thenThrows('wrong_state');
    given(...ready, { type: 'toolcall.execution_started', data: { at } })
      .when({ type: 'record_result', ok: false, error: 'restart', durationMs: null, unknownOutcome: true })
      .then('toolcall.execution_failed');
  });

  it('evolve ignores events that do not fit: approving a denied call changes nothing', () => {
    const denied = given(...awaiting, {
      type: 'toolcall.denied',
      data: { by: 'r', at, comment: null, stage: 'reviewer' },
    }).state;
    expect(
      evolveToolCall(denied, { type: 'toolcall.approved', data: { by: 'x', at, comment: null }, position: 99n }),
    ).toBe(denied);
  });

  describe("the saga's next step and the tool block", () => {
    const approved: ToolCallEvent = { type: 'toolcall.approved', data: { by: 'r', at, comment: null } };
    const started: ToolCallEvent = { type: 'toolcall.execution_started', data: { at } };
    const succeeded = (result: unknown): ToolCallEvent => ({
      type: 'toolcall.execution_succeeded',
      data: { result, durationMs: 5 },
    });

    it('names one step per state, and waits for a person until the stored deadline', () => {
      expect(nextSagaStep(initialToolCallState)).toEqual({ kind: 'done' });
      expect(nextSagaStep(given(requested).state)).toEqual({ kind: 'screen' });
      expect(nextSagaStep(given(requested, firewall('ask')).state)).toEqual({ kind: 'review' });
      expect(nextSagaStep(given(...awaiting).state)).toEqual({
        kind: 'await_decision',
        deadline: '2026-01-01T00:10:00.000Z',
      });
      expect(nextSagaStep(given(...awaiting, approved).state)).toEqual({ kind: 'execute' });
      // Found executing by a run that did not start it: the process that did is gone.
      expect(nextSagaStep(given(...awaiting, approved, started).state)).toEqual({ kind: 'execution_in_doubt' });
      expect(
        nextSagaStep(given(...awaiting, approved, started, succeeded({ content: [], isError: false })).state),
      ).toEqual({
        kind: 'complete',
      });
      const completed = given(...awaiting, approved, started, succeeded({ content: [], isError: false }), {
        type: 'toolcall.completed',
        data: { outcome: 'succeeded' },
      }).state;
      expect(nextSagaStep(completed)).toEqual({ kind: 'done' });
      expect(toolBlockUpdate(completed)).toBeUndefined();
    });

    it('shows pending when requested or awaiting a person, invoking while executing, the result or the denial', () => {
      const statusOf = (state: ToolCallState) =>
        (toolBlockUpdate(state)?.update.response as { status?: string } | undefined)?.status;
      // Shown as soon as it is requested: from then on the block is the saga's, whatever the producer sends.
      expect(statusOf(given(requested).state)).toBe('pending');
      expect(toolBlockUpdate(given(requested, firewall('allow')).state)).toBeUndefined();
      expect(statusOf(given(...awaiting).state)).toBe('pending');
      expect(statusOf(given(...awaiting, approved, started).state)).toBe('invoking');
      const result = { content: [{ type: 'text', text: 'hello' }], isError: false };
      const done = toolBlockUpdate(given(...awaiting, approved, started, succeeded(result)).state)!;
      expect(done.update.response).toEqual({
        id: 'call_1',
        tool: { name: 'read_file', serverName: 'fs' },
        arguments: { path: '/x' },
        status: 'done',
        response: result,
      });
      expect(done.update.governance).toMatchObject({
        toolCallId: 't1',
        status: 'succeeded',
        firewall: { verdict: 'ask' },
        decision: { approved: true, by: 'r' },
      });
      expect(statusOf(given(...awaiting, approved, started, succeeded({ content: [], isError: true })).state)).toBe(
        'error',
      );
      const denied = toolBlockUpdate(
        given(...awaiting, { type: 'toolcall.denied', data: { by: 'alice', at, comment: 'no', stage: 'reviewer' } })
          .state,
      )!;
      expect(denied.update.response).toMatchObject({
        status: 'error',
        response: {
          isError: true,
          content: [{ type: 'text', text: 'the tool call was denied (reviewer, by alice): no' }],
        },
      });
      // One event id per state: a step repeated after a crash shows once.
      expect(toolBlockUpdate(given(...awaiting).state)!.eventId).toBe(
        toolBlockUpdate(given(...awaiting).state)!.eventId,
      );
      expect(toolBlockUpdate(given(...awaiting).state)!.eventId).not.toBe(denied.eventId);
    });
  });
});
