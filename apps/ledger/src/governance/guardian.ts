import {
  canonicalJson,
  rememberNewest,
  sha256Hex,
  type GuardianMode,
  type Risk,
  type ToolCallEventOf,
  type ToolRef,
} from '#core';
import type OpenAI from 'openai';
import { z } from 'zod';

export type GuardianReview = ToolCallEventOf<'toolcall.guardian_reviewed'>['data'];

export interface GuardianOptions {
  readonly mode: GuardianMode;
  /** An OpenAI-compatible endpoint; without one the rule-based reviewer judges. */
  readonly endpoint?: { readonly baseUrl: string; readonly apiKey: string; readonly model: string };
  readonly timeoutMs: number;
  /** Verdicts kept per tenant, the most recent (`MAX_CACHED_VERDICTS_PER_TENANT` by default). */
  readonly cachedVerdictsPerTenant?: number;
}

const RISKS = ['none', 'low', 'medium', 'high', 'critical'] as const;
const verdictSchema = z.object({ risk: z.enum(RISKS), rationale: z.string().min(1).max(2_000) }).strict();

const SYSTEM_PROMPT = [
  'You review tool calls an AI agent wants to make, before they run.',
  'Rate the risk of running the call as given: none, low, medium, high or critical.',
  'high or critical: it can destroy or leak data, spend money, reach outside the workspace, or act irreversibly.',
  'Answer with JSON only: {"risk": "...", "rationale": "one or two sentences"}.',
].join(' ');

/**
 * The guardian: an AI risk review of a tool call through an OpenAI-compatible endpoint (the
 * official `openai` client, structured output), or a rule-based reviewer when no endpoint is
 * configured. Verdicts are cached per tenant by SHA-256 of (tool, canonical arguments, policy version), each
 * tenant's most recent: a verdict, and whether one was cached (which a hit's speed tells too), is the tenant's own,
 * never a confirmation of what another tenant's agent asked for, and one tenant's calls never push out another's.
 * A failure (error, timeout, malformed answer) is a review with `failed: true`; what follows is
 * the saga's configured failure policy.
 */
export class Guardian {
  /** Imported only when an endpoint is configured: loading the client's modules takes about 0.2 s of a start-up. */
  private readonly client: Promise<OpenAI> | undefined;
  /** By tenant: tenants are the operator's (a credential's, verified), so their number is the operator's bound. */
  private readonly cache = new Map<string, Map<string, Omit<GuardianReview, 'cacheHit' | 'mode'>>>();

  constructor(private readonly options: GuardianOptions) {
    const { endpoint } = options;
    this.client = endpoint
      ? import('openai').then(
          ({ default: OpenAI }) =>
            new OpenAI({
              baseURL: endpoint.baseUrl,
              apiKey: endpoint.apiKey,
              timeout: options.timeoutMs,
              maxRetries: 0,
            }),
        )
      : undefined;
    // A failed import fails each review that asks the model (`askModel`), not the process.
    this.client?.catch(() => undefined);
  }

  async review(call: ReviewedCall): Promise<GuardianReview> {
    const atOnce = this.reviewAtOnce(call);
    if (atOnce) return atOnce;
    const review = await this.askModel(call.tool, call.arguments);
    if (!review.failed) {
      const tenantCache = this.cache.get(call.tenant) ?? new Map<string, typeof review>();
      this.cache.set(call.tenant, tenantCache);
      const bound = this.options.cachedVerdictsPerTenant ?? MAX_CACHED_VERDICTS_PER_TENANT;
      rememberNewest(tenantCache, reviewKey(call), review, bound);
    }
    return { ...review, cacheHit: false, mode: this.options.mode };
  }

  /**
   * The review when it needs no outside wait: the guardian is off, the verdict is cached, or the
   * rules judge (no endpoint). `undefined` when the model must be asked.
   */
  reviewAtOnce(call: ReviewedCall): GuardianReview | undefined {
    const { mode } = this.options;
    if (mode === 'off')
      return { risk: 'none', rationale: 'the guardian is off', reviewer: 'off', cacheHit: false, mode, failed: false };
    // The rules cost less than a lookup: nothing is cached, and no review claims a hit.
    if (!this.client) return { ...ruleBasedReview(call.tool, call.arguments), cacheHit: false, mode };
    const cached = this.cache.get(call.tenant)?.get(reviewKey(call));
    return cached && { ...cached, cacheHit: true, mode };
  }

  private async askModel(tool: ToolRef, args: unknown): Promise<Omit<GuardianReview, 'cacheHit' | 'mode'>> {
    const model = this.options.endpoint!.model;
    const reviewer = `llm:${model}`;
    const started = performance.now();
    try {
      const client = await this.client!;
      const completion = await client.chat.completions.create({
        model,
        temperature: 0,
        messages: [
          { role: 'system', content: SYSTEM_PROMPT },
          { role: 'user', content: canonicalJson({ tool: `${tool.server}/${tool.name}`, arguments: args ?? null }) },
        ],
        response_format: {
          type: 'json_schema',
          json_schema: {
            name: 'tool_call_risk',
            strict: true,
            schema: {
              type: 'object',
              properties: { risk: { type: 'string', enum: [...RISKS] }, rationale: { type: 'string' } },
              required: ['risk', 'rationale'],
              additionalProperties: false,
            },
          },
        },
      });
      const content = completion.choices?.[0]?.message?.content;
      if (typeof content !== 'string') return failure(reviewer, 'the reviewer sent no answer');
      let parsed: unknown;
      try {
        parsed = JSON.parse(content);
      } catch {
        return failure(reviewer, 'the reviewer did not answer with JSON');
      }
      const verdict = verdictSchema.safeParse(parsed);
      if (!verdict.success)
        return failure(
          reviewer,
          `the reviewer's answer does not fit the verdict schema (${verdict.error.issues[0].path.join('.') || 'answer'})`,
        );
      return { ...verdict.data, reviewer, failed: false };
    } catch (error) {
      // The client reports a timeout as a connection error; the clock tells them apart.
      const timedOut = performance.now() - started >= this.options.timeoutMs;
      return failure(reviewer, timedOut ? `no answer within ${this.options.timeoutMs} ms` : askFailure(error));
    }
  }
}

/** A tool call the guardian reviews: whose, what, and under which firewall policy. */
export interface ReviewedCall {
  readonly tenant: string;
  readonly tool: ToolRef;
  readonly arguments: unknown;
  readonly policyVersion: string;
}

/** Verdicts kept: a few megabytes. */
const MAX_CACHED_VERDICTS_PER_TENANT = 2_000;

const reviewKey = ({ tool, arguments: args, policyVersion }: ReviewedCall) =>
  sha256Hex(canonicalJson({ tool, arguments: args ?? null, policyVersion }));

/**
 * Why the model could not be asked, without the endpoint's or the client's words: an endpoint may quote the key it
 * was sent, and the rationale is recorded in the log, where every reader of the session sees it.
 */
function askFailure(error: unknown): string {
  const { status } = error as { status?: unknown };
  if (typeof status === 'number') return `the reviewer answered HTTP ${status}`;
  const kind = (error as object | undefined)?.constructor?.name;
  return `the reviewer could not be asked (${kind ?? 'no error given'})`;
}

function failure(reviewer: string, rationale: string): Omit<GuardianReview, 'cacheHit' | 'mode'> {
  return { risk: 'high', rationale, reviewer, failed: true };
}

const CRITICAL = /\b(rm\s+-rf|sudo|mkfs|dd\s+if=|chmod\s+777|curl[^|]*\|\s*sh)\b/i;
const HIGH_TOOLS = /(delete|remove|write|edit|move|exec|shell|run|command|deploy|transfer|send)/i;
const LOW_TOOLS = /^(read|list|get|search|echo|find|describe|fetch_docs)|(_read|_list|_get)$/i;

/** Without an endpoint: a conservative rule set over the tool's name and its arguments. */
export function ruleBasedReview(tool: ToolRef, args: unknown): Omit<GuardianReview, 'cacheHit' | 'mode'> {
  const text = canonicalJson(args ?? null);
  const rate = (risk: Risk, rationale: string) => ({ risk, rationale, reviewer: 'rules:v1', failed: false });
  if (CRITICAL.test(text)) return rate('critical', 'the arguments hold a destructive command');
  if (HIGH_TOOLS.test(tool.name)) return rate('high', `${tool.name} changes or sends something`);
  if (LOW_TOOLS.test(tool.name)) return rate('low', `${tool.name} only reads`);
  return rate('medium', `no rule knows ${tool.name}`);
}
