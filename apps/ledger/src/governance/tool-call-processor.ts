import { Inject, Injectable, type BeforeApplicationShutdown } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import {
  nextSagaStep,
  rememberNewest,
  SessionError,
  toolBlockUpdate,
  ToolCallError,
  type SagaStep,
  type ToolCallCommand,
  type ToolCallEventOf,
  type ToolCallState,
  type ToolRef,
} from '#core';
import type { AppendResult, EventLog, StreamAppend } from '#event-log';
import { Logger } from 'nestjs-pino';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { LedgerMetrics } from '../metrics/ledger-metrics.js';
import { ExecuteSessionCommand } from '../sessions/session-command.handler.js';
import type { CommandOutcome } from '../sessions/session-repository.js';
import { stricter, type FirewallResult } from './firewall.js';
import { GOVERNANCE, type GovernanceParts } from './governance-parts.js';
import type { ReviewedCall } from './guardian.js';
import { ToolCallRepository, type ToolCallActor, type ToolCallDraft, type ToolCallRef } from './toolcall-repository.js';
import { systemActor } from '../identity/principal.js';

/** A tool call the saga found in a session's `mcp_tool_pending`, before its stream exists. */
export type GovernedRequest = ToolCallEventOf<'toolcall.requested'>['data'] & {
  readonly tenant: string;
  readonly causationId: string;
};

type OpenToolCall = Exclude<ToolCallState, { status: 'absent' }>;
type RecordResult = Extract<ToolCallCommand, { type: 'record_result' }>;

const SAGA_ACTOR = systemActor('governance-saga');
const SAGA_AUTHOR = { actor: SAGA_ACTOR, subject: null };
const MAX_STEPS_PER_RUN = 16;
const MAX_RESULT_ATTEMPTS = 5;
const MAX_REMEMBERED_CALLS = 10_000;
const MAX_RETRY_DELAY_MS = 30_000;
const MAX_TIMER_MS = 2 ** 31 - 1;
const RESULT_NOT_STORED = 'the tool ran but its result could not be stored';
const IN_DOUBT =
  'the execution started but its outcome was never recorded (the service stopped while it ran); it is not run again';

/**
 * Takes each tool call through its saga, one step at a time: load the call from its stream,
 * show its state on the session's tool block, take the step `nextSagaStep` names, repeat until
 * the call waits (for a person, until its deadline) or is complete. The stream is the saga's
 * state, so a restart resumes every call where its log stops. Runs for one call are serialized
 * in this process; across processes the optimistic append decides (only the instance leading
 * the saga consumer runs steps at all).
 */
@Injectable()
export class ToolCallProcessor implements BeforeApplicationShutdown {
  private readonly running = new Map<string, Promise<void>>();
  /**
   * Calls poked again while a run was going: run once more afterwards, unless every poke was a log
   * event the run itself stored (`position` at most where it left the call).
   */
  private readonly rerun = new Map<string, { request?: GovernedRequest; position?: bigint }>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly failures = new Map<string, number>();
  /** The log position of the newest state a run worked from, per call. */
  private readonly positions = new Map<string, bigint>();
  private stopped = false;

  constructor(
    private readonly toolCalls: ToolCallRepository,
    private readonly commandBus: CommandBus,
    @Inject(GOVERNANCE) private readonly parts: GovernanceParts,
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
    private readonly logger: Logger,
    private readonly metrics: LedgerMetrics,
  ) {}

  /**
   * Moves the call on as far as it can go now. Never rejects: a failed run is logged and retried
   * later. `position`: the log event that prompted this; nothing to do if a run already saw it
   * (the saga hears of its own steps too).
   */
  advance(ref: ToolCallRef, request?: GovernedRequest, position?: bigint): Promise<void> {
    const { toolCallId } = ref;
    if (this.stopped) return Promise.resolve();
    if (position !== undefined && position <= (this.positions.get(toolCallId) ?? -1n)) return Promise.resolve();
    const running = this.running.get(toolCallId);
    if (running) {
      const poked = this.rerun.get(toolCallId);
      // A poke without a position (a decision, a timer) always runs again; log events, if newer than the run left.
      const always = position === undefined || (poked !== undefined && poked.position === undefined);
      const newest = poked?.position !== undefined && poked.position > position! ? poked.position : position;
      this.rerun.set(toolCallId, { request: request ?? poked?.request, position: always ? undefined : newest });
      return running;
    }
    const run = this.run(ref, request).finally(() => {
      this.running.delete(toolCallId);
      const again = this.rerun.get(toolCallId);
      if (!again) return;
      this.rerun.delete(toolCallId);
      void this.advance(ref, again.request, again.position);
    });
    this.running.set(toolCallId, run);
    return run;
  }

  /** Before the pools close: runs under way finish (an execution is recorded, not left in doubt); timers stop. */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    while (this.running.size > 0) await Promise.all(this.running.values());
    await this.parts.executor?.close();
  }

  private async run(ref: ToolCallRef, request: GovernedRequest | undefined): Promise<void> {
    const { toolCallId } = ref;
    try {
      await this.runSteps(ref, request);
      this.failures.delete(toolCallId);
    } catch (error) {
      const failures = (this.failures.get(toolCallId) ?? 0) + 1;
      this.failures.set(toolCallId, failures);
      const delay = Math.min(MAX_RETRY_DELAY_MS, 250 * 2 ** failures);
      this.logger.warn({ err: error, toolCallId, retryInMs: delay }, 'tool-call saga step failed; retrying');
      this.schedule(ref, delay);
    }
  }

  /**
   * Steps until the call waits or is done. A step that waits for nothing outside (the firewall, a
   * guardian verdict at hand, an automatic decision, the start) is decided in memory, and the
   * steps so far are stored in one append, with the block update for where they leave the call,
   * only before something that waits: the model's review, a person, the MCP call (so the start is
   * durable before the call is made), and, where the log stores an append's parts one at a time,
   * the completion (so the result is on the block first). Each step moves the call's status, so a
   * run that does not settle is a bug, retried like a failure.
   */
  private async runSteps(ref: ToolCallRef, request: GovernedRequest | undefined): Promise<void> {
    const { toolCallId } = ref;
    // A run for a new request needs no read; any other was prompted by something another writer may have stored.
    let draft = await this.toolCalls.draft(ref, request ? 'new' : 'log');
    this.seen(toolCallId, draft.state);
    // Shown again on a resumed call: an update lost with a crash, or never stored beside its step (EventStoreDB).
    await this.showOnBlock(draft.state, ref.tenant);
    for (let steps = 0; steps < MAX_STEPS_PER_RUN; steps += 1) {
      if (this.stopped) return;
      const state = draft.state;
      const next: SagaStep | { kind: 'request' } =
        state.status === 'absent' ? { kind: 'request' } : nextSagaStep(state);
      if (next.kind === 'request' && !request) return;
      if (this.waitsOutside(next, state, ref.tenant) && draft.decided.length > 0) {
        await this.flush(draft);
        draft = await this.toolCalls.draft(ref);
        continue;
      }
      if (next.kind === 'done') return;
      if (next.kind === 'await_decision' && Date.now() < Date.parse(next.deadline))
        return this.wakeAt(ref, next.deadline);
      const stepped = await this.step(() => this.take(next, draft, request));
      // Refused on what this process knew: another writer moved the call on, so read where it is.
      draft = stepped ?? (await this.toolCalls.draft(ref, 'log'));
    }
    throw new Error(`tool call ${toolCallId} did not settle in ${MAX_STEPS_PER_RUN} steps`);
  }

  /**
   * Stores the draft's steps with the block update for where they leave the call: the call's state
   * after them, or `undefined` when another writer was first (the next draft reads the log).
   */
  private async flush(draft: ToolCallDraft): Promise<ToolCallState | undefined> {
    // The block shows the last drafted state it has something to show for (requested, while the guardian is asked).
    const shown = draft.steps.findLast((step) => blockCommand(step) !== undefined) ?? draft.state;
    const state = await this.toolCalls.record(draft, (part) => this.storeWithBlock(shown, draft.ref.tenant, part));
    if (state) this.seen(draft.ref.toolCallId, state);
    if (state?.status === 'completed' && draft.stored.status !== 'completed')
      this.metrics.toolCallCompleted(state.outcome!);
    return state;
  }

  private seen(toolCallId: string, state: ToolCallState): void {
    if (state.status === 'absent') return;
    rememberNewest(this.positions, toolCallId, state.position, MAX_REMEMBERED_CALLS);
  }

  /** A step another process (or a decision) overtook is not an error: `undefined`, and the caller reads where the call is. */
  private async step<T>(work: () => Promise<T>): Promise<T | undefined> {
    try {
      return await work();
    } catch (error) {
      if (!(error instanceof ToolCallError)) throw error;
      return undefined;
    }
  }

  /** Takes one step on the draft: in memory, except the execution, which stores the start, then the result. */
  private async take(
    step: Exclude<SagaStep, { kind: 'done' }> | { kind: 'request' },
    draft: ToolCallDraft,
    request: GovernedRequest | undefined,
  ): Promise<ToolCallDraft> {
    const as = { actor: SAGA_ACTOR };
    const now = () => new Date().toISOString();
    if (step.kind === 'request') {
      const { tenant: _tenant, causationId, ...data } = request!;
      return this.toolCalls.decide(draft, { type: 'request', ...data }, { actor: SAGA_ACTOR, causationId });
    }
    const state = draft.state as OpenToolCall;
    const { tool, arguments: args } = state.request;
    switch (step.kind) {
      case 'screen': {
        // Without the tool list (server down) the schema's hints are missing; the check before the call has them.
        const schema = await this.parts.executor?.inputSchema(tool).catch(() => undefined);
        const { verdict, rule, policyVersion } = await this.screen(tool, args, schema, draft.ref.tenant);
        return this.toolCalls.decide(draft, { type: 'record_firewall', verdict, rule, policyVersion, at: now() }, as);
      }
      case 'review': {
        const reviewStarted = performance.now();
        const review = await this.parts.guardian.review(reviewedCall(state, draft.ref.tenant));
        this.metrics.recordToolCallStep('review', performance.now() - reviewStarted);
        const approvalDeadline = new Date(Date.now() + this.parts.approvalTimeoutMs).toISOString();
        const requiredApprovals = this.parts.firewall.requiredApprovals(tool, review.risk);
        const command = {
          type: 'record_guardian' as const,
          review,
          onFailure: this.parts.guardianOnFailure,
          approvalDeadline,
          requiredApprovals,
          at: now(),
        };
        return this.toolCalls.decide(draft, command, as);
      }
      case 'await_decision':
        return this.toolCalls.decide(draft, { type: 'expire', now: now() }, as);
      case 'execute': {
        // Stored before the call: if this process dies during it, the log says so and nothing runs it twice.
        // Run only by the run that stored the start.
        const starting = this.toolCalls.decide(draft, { type: 'start_execution', at: now() }, as);
        if (!(await this.flush(starting))) return this.toolCalls.draft(draft.ref);
        const executing = await this.toolCalls.draft(draft.ref);
        const started = performance.now();
        const durationMs = () => Math.round(performance.now() - started);
        let outcome: RecordResult;
        try {
          if (!this.parts.executor) throw new Error('no MCP servers are configured');
          const result = await this.parts.executor.call(tool, await this.screenAgain(state, draft.ref.tenant));
          outcome = { type: 'record_result', ok: true, result, durationMs: durationMs() };
        } catch (error) {
          const failure = { error: (error as Error).message, unknownOutcome: outcomeUnknown(error) };
          outcome = { type: 'record_result', ok: false, ...failure, durationMs: durationMs() };
        }
        this.metrics.recordToolCallStep('execute', durationMs());
        return this.recordResult(executing, outcome, as);
      }
      case 'execution_in_doubt':
        return this.toolCalls.decide(
          draft,
          { type: 'record_result', ok: false, error: IN_DOUBT, durationMs: null, unknownOutcome: true },
          as,
        );
      case 'complete': {
        await this.flush(this.toolCalls.decide(draft, { type: 'complete' }, as));
        return this.toolCalls.draft(draft.ref);
      }
    }
  }

  /**
   * Records what the execution gave, with its block update (and the completion, where one append
   * stores both at once). The tool ran, so a result the log refuses to store is never a known
   * failure: it is recorded as failed with an unknown outcome.
   * A failure the log refuses is left unrecorded, and the next run finds the call in doubt, with
   * the same unknown outcome. Another writer first (another instance): decided again on the log.
   */
  private async recordResult(
    executing: ToolCallDraft,
    outcome: RecordResult,
    as: ToolCallActor,
  ): Promise<ToolCallDraft> {
    const { toolCallId } = executing.ref;
    let draft = executing;
    for (let attempt = 1; draft.state.status === 'executing' && attempt <= MAX_RESULT_ATTEMPTS; attempt += 1) {
      try {
        await this.flush(this.withResult(draft, outcome, as));
      } catch (error) {
        if (!outcome.ok || error instanceof ToolCallError) throw error;
        this.logger.warn({ err: error, toolCallId }, 'tool result not stored; recorded as an unknown outcome');
        const unstored = { error: RESULT_NOT_STORED, durationMs: outcome.durationMs, unknownOutcome: true };
        await this.flush(this.withResult(draft, { type: 'record_result', ok: false, ...unstored }, as));
      }
      draft = await this.toolCalls.draft(executing.ref);
    }
    return draft;
  }

  /**
   * The draft with the result decided, and its completion too where the log stores an append's parts all or none:
   * the result is then on the block in the same commit as the completion (decision 0052).
   */
  private withResult(draft: ToolCallDraft, outcome: RecordResult, as: ToolCallActor): ToolCallDraft {
    const recorded = this.toolCalls.decide(draft, outcome, as);
    return this.eventLog.appendsManyAtomically ? this.toolCalls.decide(recorded, { type: 'complete' }, as) : recorded;
  }

  /**
   * Whether the next step waits for something outside the process (so the steps drafted so far are
   * stored first): a person, the model's review when no verdict is at hand, the MCP call, or, where
   * the log stores an append's parts one at a time, the completion, which follows the result on the block.
   */
  private waitsOutside(next: SagaStep | { kind: 'request' }, state: ToolCallState, tenant: string): boolean {
    switch (next.kind) {
      case 'request':
      case 'screen':
      case 'execution_in_doubt':
      case 'execute':
        return false;
      case 'review': {
        return !this.parts.guardian.reviewAtOnce(reviewedCall(state as OpenToolCall, tenant));
      }
      case 'complete':
        return !this.eventLog.appendsManyAtomically;
      case 'await_decision':
      case 'done':
        return true;
    }
  }

  /**
   * The firewall again, right before the call, on the disk as it is now (a symlink swapped in while a
   * person decided is caught): the arguments to send, with the paths it judged; a refusal if stricter.
   */
  /**
   * The firewall's verdict on the call, denied outright when its server does not serve the call's tenant: the
   * configuration may have changed since the call was requested (decision 0062), and every step checks it again.
   */
  private async screen(tool: ToolRef, args: unknown, schema: unknown, tenant: string): Promise<FirewallResult> {
    const screened = await this.parts.firewall.evaluate(tool, args, schema);
    if (this.parts.executor?.serves(tool.server, tenant) !== false) return screened;
    const rule = `mcpServers.${tool.server}.tenants: the server does not serve this tenant`;
    return { verdict: 'deny', rule, policyVersion: screened.policyVersion };
  }

  private async screenAgain({ request: { tool, arguments: args }, firewall }: OpenToolCall, tenant: string) {
    const again = await this.screen(tool, args, await this.parts.executor!.inputSchema(tool), tenant);
    if (stricter(again.verdict, firewall!.verdict)) {
      throw new Error(`firewall rule ${again.rule} (checked again before the call)`);
    }
    return again.arguments ?? args;
  }

  /**
   * Stores a call's part with the update of its tool block in the session, in one append (one
   * transaction on PostgreSQL; on EventStoreDB the call's part first, and the block update, derived
   * from it, is shown again when a run resumes). Without a block update, or when the session
   * refuses it (the session is gone: the call stands on its own stream, the audit trail is there),
   * the part alone.
   */
  private async storeWithBlock(state: ToolCallState, tenant: string, part: StreamAppend): Promise<AppendResult> {
    const command = blockCommand(state);
    if (command) {
      const { sessionId, toolCallId } = (state as OpenToolCall).request;
      try {
        const outcome: CommandOutcome = await this.commandBus.execute(
          new ExecuteSessionCommand({ tenant, sessionId }, command, SAGA_AUTHOR, [part]),
        );
        return outcome.alongside![0];
      } catch (error) {
        if (!(error instanceof SessionError)) throw error;
        this.logger.warn({ toolCallId, code: error.code }, 'tool block not updated');
      }
    }
    const [appended] = await this.eventLog.appendMany([part]);
    return appended;
  }

  /** Writes the call's state onto its tool block in the session (once per state: the event id comes from the state). */
  private async showOnBlock(state: ToolCallState, tenant: string): Promise<void> {
    const command = blockCommand(state);
    if (!command) return;
    const { sessionId, toolCallId } = (state as OpenToolCall).request;
    try {
      await this.commandBus.execute(new ExecuteSessionCommand({ tenant, sessionId }, command, SAGA_AUTHOR));
    } catch (error) {
      if (!(error instanceof SessionError)) throw error;
      this.logger.warn({ toolCallId, code: error.code }, 'tool block not updated');
    }
  }

  private wakeAt(ref: ToolCallRef, deadline: string): void {
    this.schedule(ref, Math.min(MAX_TIMER_MS, Math.max(0, Date.parse(deadline) - Date.now())));
  }

  private schedule(ref: ToolCallRef, delayMs: number): void {
    const { toolCallId } = ref;
    if (this.stopped) return;
    clearTimeout(this.timers.get(toolCallId));
    const timer = setTimeout(() => {
      this.timers.delete(toolCallId);
      void this.advance(ref);
    }, delayMs);
    timer.unref();
    this.timers.set(toolCallId, timer);
  }
}

/** The session command that shows the call's state on its tool block, if the state has something to show. */
function blockCommand(state: ToolCallState) {
  const shown = toolBlockUpdate(state);
  if (!shown || state.status === 'absent') return undefined;
  const { messageId, toolCallId } = state.request;
  return { type: 'update_tool_call' as const, eventId: shown.eventId, messageId, toolCallId, ...shown.update };
}

/** A timeout or a dropped connection leaves open whether the server ran the tool; a refusal before the call does not. */
/** What the guardian reviews of a call: whose, what, under the firewall policy that screened it. */
function reviewedCall({ request, firewall }: OpenToolCall, tenant: string): ReviewedCall {
  return { tenant, tool: request.tool, arguments: request.arguments, policyVersion: firewall!.policyVersion };
}

function outcomeUnknown(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === -32001 || code === -32000;
}
