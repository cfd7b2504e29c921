import { Inject, Injectable, type BeforeApplicationShutdown } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import {
  nextSagaStep,
  SessionError,
  toolBlockUpdate,
  ToolCallError,
  type SagaStep,
  type ToolCallCommand,
  type ToolCallEventOf,
  type ToolCallState,
} from '#core';
import { Logger } from 'nestjs-pino';
import { LedgerMetrics } from '../metrics/ledger-metrics.js';
import { ExecuteSessionCommand } from '../sessions/session-command.handler.js';
import { stricter } from './firewall.js';
import { GOVERNANCE, type GovernanceParts } from './governance-parts.js';
import { ToolCallRepository, type ToolCallActor, type ToolCallRef } from './toolcall-repository.js';
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
  /** Calls poked again while a run was going: run once more afterwards. */
  private readonly rerun = new Map<string, GovernedRequest | undefined>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly failures = new Map<string, number>();
  /** The log position of the newest state a run worked from, per call. */
  private readonly positions = new Map<string, bigint>();
  private stopped = false;

  constructor(
    private readonly toolCalls: ToolCallRepository,
    private readonly commandBus: CommandBus,
    @Inject(GOVERNANCE) private readonly parts: GovernanceParts,
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
      this.rerun.set(toolCallId, request ?? this.rerun.get(toolCallId));
      return running;
    }
    const run = this.run(ref, request).finally(() => {
      this.running.delete(toolCallId);
      if (!this.rerun.has(toolCallId)) return;
      const again = this.rerun.get(toolCallId);
      this.rerun.delete(toolCallId);
      void this.advance(ref, again);
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

  /** Steps until the call waits or is done. Each step moves the call's status, so a run that does not settle is a bug, retried like a failure. */
  private async runSteps(ref: ToolCallRef, request: GovernedRequest | undefined): Promise<void> {
    const { toolCallId, tenant } = ref;
    let { state } = await this.toolCalls.load(ref);
    for (let steps = 0; steps < MAX_STEPS_PER_RUN; steps += 1) {
      if (this.stopped) return;
      this.seen(toolCallId, state);
      if (state.status === 'absent') {
        if (!request) return;
        const { tenant: _tenant, causationId, ...data } = request;
        state =
          (await this.step(() =>
            this.toolCalls.execute(ref, { type: 'request', ...data }, { actor: SAGA_ACTOR, causationId }),
          )) ?? (await this.toolCalls.load(ref)).state;
        continue;
      }
      await this.showOnBlock(state, tenant);
      const next = nextSagaStep(state);
      if (next.kind === 'done') return;
      if (next.kind === 'await_decision' && Date.now() < Date.parse(next.deadline))
        return this.wakeAt(ref, next.deadline);
      const current = state;
      state = (await this.step(() => this.take(next, current, ref))) ?? (await this.toolCalls.load(ref)).state;
    }
    throw new Error(`tool call ${toolCallId} did not settle in ${MAX_STEPS_PER_RUN} steps`);
  }

  private seen(toolCallId: string, state: ToolCallState): void {
    if (state.status === 'absent') return;
    this.positions.delete(toolCallId);
    this.positions.set(toolCallId, state.position);
    for (const [oldest] of this.positions) {
      if (this.positions.size <= MAX_REMEMBERED_CALLS) break;
      this.positions.delete(oldest);
    }
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

  private async take(
    step: Exclude<SagaStep, { kind: 'done' }>,
    state: OpenToolCall,
    id: ToolCallRef,
  ): Promise<ToolCallState> {
    const { tenant } = id;
    const { tool, arguments: args } = state.request;
    const as = { actor: SAGA_ACTOR };
    const now = () => new Date().toISOString();
    switch (step.kind) {
      case 'screen': {
        // Without the tool list (server down) the schema's hints are missing; the check before the call has them.
        const schema = await this.parts.executor?.inputSchema(tool).catch(() => undefined);
        const { verdict, rule, policyVersion } = await this.parts.firewall.evaluate(tool, args, schema);
        return this.toolCalls.execute(id, { type: 'record_firewall', verdict, rule, policyVersion, at: now() }, as);
      }
      case 'review': {
        const reviewStarted = performance.now();
        const review = await this.parts.guardian.review(tool, args, state.firewall!.policyVersion);
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
        return this.toolCalls.execute(id, command, as);
      }
      case 'await_decision':
        return this.toolCalls.execute(id, { type: 'expire', now: now() }, as);
      case 'execute': {
        // Recorded before the call: if this process dies during it, the log says so and nothing runs it twice.
        const executing = await this.toolCalls.execute(id, { type: 'start_execution', at: now() }, as);
        await this.showOnBlock(executing, tenant);
        const started = performance.now();
        const durationMs = () => Math.round(performance.now() - started);
        let outcome: RecordResult;
        try {
          if (!this.parts.executor) throw new Error('no MCP servers are configured');
          const result = await this.parts.executor.call(tool, await this.screenAgain(state));
          outcome = { type: 'record_result', ok: true, result, durationMs: durationMs() };
        } catch (error) {
          const failure = { error: (error as Error).message, unknownOutcome: outcomeUnknown(error) };
          outcome = { type: 'record_result', ok: false, ...failure, durationMs: durationMs() };
        }
        this.metrics.recordToolCallStep('execute', durationMs());
        return this.recordResult(id, outcome, as);
      }
      case 'execution_in_doubt':
        return this.toolCalls.execute(
          id,
          { type: 'record_result', ok: false, error: IN_DOUBT, durationMs: null, unknownOutcome: true },
          as,
        );
      case 'complete': {
        const completed = await this.toolCalls.execute(id, { type: 'complete' }, as);
        this.metrics.toolCallCompleted(state.outcome!);
        return completed;
      }
    }
  }

  /**
   * Records what the execution gave. The tool ran, so a result the log refuses to store is never
   * a known failure: it is recorded as failed with an unknown outcome. A failure the log refuses
   * is left unrecorded, and the next run finds the call in doubt, with the same unknown outcome.
   */
  private async recordResult(id: ToolCallRef, outcome: RecordResult, as: ToolCallActor): Promise<ToolCallState> {
    try {
      return await this.toolCalls.execute(id, outcome, as);
    } catch (error) {
      if (!outcome.ok || error instanceof ToolCallError) throw error;
      this.logger.warn(
        { err: error, toolCallId: id.toolCallId },
        'tool result not stored; recorded as an unknown outcome',
      );
      const unstored = { error: RESULT_NOT_STORED, durationMs: outcome.durationMs, unknownOutcome: true };
      return this.toolCalls.execute(id, { type: 'record_result', ok: false, ...unstored }, as);
    }
  }

  /**
   * The firewall again, right before the call, on the disk as it is now (a symlink swapped in while a
   * person decided is caught): the arguments to send, with the paths it judged; a refusal if stricter.
   */
  private async screenAgain({ request: { tool, arguments: args }, firewall }: OpenToolCall): Promise<unknown> {
    const again = await this.parts.firewall.evaluate(tool, args, await this.parts.executor!.inputSchema(tool));
    if (stricter(again.verdict, firewall!.verdict)) {
      throw new Error(`firewall rule ${again.rule} (checked again before the call)`);
    }
    return again.arguments ?? args;
  }

  /** Writes the call's state onto its tool block in the session (once per state: the event id comes from the state). */
  private async showOnBlock(state: ToolCallState, tenant: string): Promise<void> {
    const shown = toolBlockUpdate(state);
    if (!shown || state.status === 'absent') return;
    const { sessionId, messageId, toolCallId } = state.request;
    try {
      const command = {
        type: 'update_tool_call' as const,
        eventId: shown.eventId,
        messageId,
        toolCallId,
        ...shown.update,
      };
      await this.commandBus.execute(new ExecuteSessionCommand({ tenant, sessionId }, command, SAGA_AUTHOR));
    } catch (error) {
      // The call stands on its own stream even if its session is gone; the audit trail is there.
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

/** A timeout or a dropped connection leaves open whether the server ran the tool; a refusal before the call does not. */
function outcomeUnknown(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === -32001 || code === -32000;
}
