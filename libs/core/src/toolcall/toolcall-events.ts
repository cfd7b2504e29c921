import { parseTenantStreamId, tenantStreamId } from '../tenancy/tenant-streams.js';
/**
 * The vocabulary of a tool call's governance stream (`toolcall-<id>`, DESIGN §6). Every step is
 * an event, so replays and rebuilds read each decision and result back instead of asking the
 * firewall, the guardian, a person or an MCP server again.
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
  | {
      readonly type: 'toolcall.firewall_evaluated';
      readonly data: { readonly verdict: FirewallVerdict; readonly rule: string; readonly policyVersion: string };
    }
  | {
      readonly type: 'toolcall.guardian_reviewed';
      readonly data: {
        readonly risk: Risk;
        readonly rationale: string;
        readonly reviewer: string;
        readonly cacheHit: boolean;
        readonly mode: GuardianMode;
        readonly failed: boolean;
      };
    }
  /** `required`: distinct reviewers whose approval the call needs (four-eyes); absent in events recorded before it existed = 1. */
  | {
      readonly type: 'toolcall.approval_requested';
      readonly data: { readonly reason: string; readonly deadline: string; readonly required?: number };
    }
  /** One reviewer's approval of a call that needs more than one; the call waits for the rest. */
  | { readonly type: 'toolcall.approval_recorded'; readonly data: ReviewerApproval }
  | {
      readonly type: 'toolcall.approved';
      readonly data: {
        readonly by: string;
        readonly at: string;
        readonly comment: string | null;
        readonly approvals?: readonly ReviewerApproval[];
      };
    }
  | {
      readonly type: 'toolcall.denied';
      readonly data: {
        readonly by: string;
        readonly at: string;
        readonly comment: string | null;
        readonly stage: 'firewall' | 'guardian' | 'reviewer' | 'expiry';
      };
    }
  | { readonly type: 'toolcall.expired'; readonly data: { readonly deadline: string; readonly at: string } }
  | { readonly type: 'toolcall.execution_started'; readonly data: { readonly at: string } }
  /** `result` as stored: as it came, or wrapped when a JSON column could not hold it (`tool-result-encoding.ts`). */
  | {
      readonly type: 'toolcall.execution_succeeded';
      readonly data: { readonly result: unknown; readonly durationMs: number };
    }
  | {
      readonly type: 'toolcall.execution_failed';
      readonly data: { readonly error: string; readonly durationMs: number | null; readonly unknownOutcome: boolean };
    }
  | { readonly type: 'toolcall.completed'; readonly data: { readonly outcome: 'succeeded' | 'failed' | 'denied' } };

/** A person's approval, with the subject it counts for (separation of duties counts subjects, not keys). */
export interface ReviewerApproval {
  readonly by: string;
  readonly subject: string;
  readonly at: string;
  readonly comment: string | null;
}

export type ToolCallEventOf<Type extends ToolCallEvent['type']> = Extract<ToolCallEvent, { type: Type }>;

export const TOOLCALL_STREAM_PREFIX = 'toolcall-';
export const toolCallStreamId = (tenant: string, toolCallId: string) =>
  tenantStreamId(TOOLCALL_STREAM_PREFIX, tenant, toolCallId);
export const parseToolCallStreamId = (streamId: string) => parseTenantStreamId(TOOLCALL_STREAM_PREFIX, streamId);
