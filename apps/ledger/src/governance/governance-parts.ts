import type { GuardianFailurePolicy } from '#core';
import { DEFAULT_FIREWALL_POLICY, Firewall, loadFirewallPolicy, serverPlacements } from './firewall.js';
import { Guardian } from './guardian.js';
import { McpExecutor } from './mcp-executor.js';
import { loadMcpServers } from './mcp-servers-config.js';
import type { GovernanceConfig } from '../config/ledger-config.js';
import { StartupError } from '../database/embedded-postgres.js';

export const GOVERNANCE = Symbol('GOVERNANCE');

/** What the saga consults, built once from the configuration. */
export interface GovernanceParts {
  /** `undefined`: no MCP servers configured, so the ledger governs no tool. */
  readonly executor: McpExecutor | undefined;
  readonly firewall: Firewall;
  readonly guardian: Guardian;
  readonly guardianOnFailure: GuardianFailurePolicy;
  readonly approvalTimeoutMs: number;
}

/** Reads the policy and server files; a bad file stops the service at startup with its name and field. */
export function governanceParts(config: GovernanceConfig): GovernanceParts {
  try {
    return buildParts(config);
  } catch (error) {
    throw new StartupError((error as Error).message);
  }
}

function buildParts(config: GovernanceConfig): GovernanceParts {
  const { guardian } = config;
  const servers = config.mcpServersFile ? loadMcpServers(config.mcpServersFile) : undefined;
  const policy = config.firewallPolicyFile ? loadFirewallPolicy(config.firewallPolicyFile) : DEFAULT_FIREWALL_POLICY;
  return {
    executor: servers && new McpExecutor(servers, { callTimeoutMs: config.mcpCallTimeoutMs, toolListTtlMs: 60_000 }),
    // The firewall places relative and `~` paths where each server-filesystem will.
    firewall: new Firewall(policy, servers ? serverPlacements(servers) : {}),
    guardian: new Guardian({ mode: guardian.mode, endpoint: guardian.endpoint, timeoutMs: guardian.timeoutMs }),
    guardianOnFailure: guardian.onFailure,
    approvalTimeoutMs: config.approvalTimeoutMs,
  };
}
