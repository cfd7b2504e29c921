/** A governed tool call as `GET /v1/tool-calls` and `GET /v1/tool-calls/:id` give it. */
export interface ToolCall {
  readonly id: string;
  readonly sessionId: string;
  readonly messageId: string;
  readonly tool: { readonly server: string; readonly name: string };
  readonly arguments: unknown;
  readonly argumentsSha256: string;
  readonly requestedBy: string;
  readonly status: string;
  readonly outcome: string | null;
  readonly firewall: { readonly verdict: string; readonly rule: string; readonly policyVersion: string } | null;
  readonly guardian: { readonly risk: string; readonly rationale: string; readonly reviewer: string } | null;
  readonly approval: {
    readonly reason: string;
    readonly deadline: string;
    readonly required?: number;
    readonly approvals?: readonly { readonly by: string; readonly at: string }[];
  } | null;
  readonly decision: unknown;
  readonly execution: unknown;
  readonly position: number;
}

export interface TrailEvent {
  readonly id: string;
  readonly type: string;
  readonly data: unknown;
  readonly revision: number;
  readonly position: number;
  readonly actor: string;
  readonly recordedAt: string;
  readonly prevHash: string;
  readonly hash: string;
}
