import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import type { FirewallVerdict, ToolRef } from '#core';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

/**
 * The firewall: deterministic rules from a policy file, no LLM. Tools are named
 * `<server>/<tool>` and matched with globs (`*` within a segment). Path arguments are
 * normalised before any rule sees them — percent-decoding until stable, Unicode NFKC,
 * backslashes as separators, `.`/`..`/repeated slashes resolved, symlinks resolved on disk — so
 * the rules judge the file that would really be touched.
 */
const verdict = z.enum(['allow', 'deny', 'ask']);
export const firewallPolicySchema = z
  .object({
    version: z.string().min(1),
    default: verdict.default('deny'),
    tools: z.object({ allow: z.array(z.string()).default([]), deny: z.array(z.string()).default([]), ask: z.array(z.string()).default([]) }).strict(),
    paths: z
      .object({
        /** Argument names that hold paths (a string or an array of strings). */
        arguments: z.array(z.string()).default(['path', 'paths', 'source', 'destination', 'file', 'directory']),
        roots: z.array(z.string()).default([]),
        deny: z.array(z.string()).default([]),
      })
      .strict()
      .default({ arguments: ['path', 'paths', 'source', 'destination', 'file', 'directory'], roots: [], deny: [] }),
    arguments: z.array(z.object({ tool: z.string(), argument: z.string(), pattern: z.string(), verdict }).strict()).default([]),
  })
  .strict();

export type FirewallPolicy = z.infer<typeof firewallPolicySchema>;

export interface FirewallResult {
  readonly verdict: FirewallVerdict;
  /** The rule that decided, e.g. `tools.deny[0]: fs/delete_file` or `paths.roots: …`. */
  readonly rule: string;
  readonly policyVersion: string;
}

/** Without a policy file nothing runs unseen: every call asks a person. */
export const DEFAULT_FIREWALL_POLICY: FirewallPolicy = firewallPolicySchema.parse({ version: 'built-in:ask-everything', default: 'ask', tools: {} });

/** Reads a policy file: YAML when it is named `.yaml` or `.yml`, JSON otherwise. */
export function loadFirewallPolicy(file: string): FirewallPolicy {
  const text = readFileSync(file, 'utf8');
  const parsed = firewallPolicySchema.safeParse(/\.ya?ml$/i.test(file) ? parseYaml(text) : JSON.parse(text));
  if (!parsed.success) throw new Error(`firewall policy ${file}: ${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`);
  return parsed.data;
}

export class Firewall {
  private readonly roots: string[];

  constructor(readonly policy: FirewallPolicy) {
    this.roots = policy.paths.roots.map((root) => realPath(path.resolve(root)));
  }

  evaluate(tool: ToolRef, args: unknown): FirewallResult {
    const name = `${tool.server}/${tool.name}`;
    const result = (verdict: FirewallVerdict, rule: string): FirewallResult => ({ verdict, rule, policyVersion: this.policy.version });
    const { tools, paths } = this.policy;
    const denied = tools.deny.findIndex((pattern) => glob(pattern).test(name));
    if (denied >= 0) return result('deny', `tools.deny[${denied}]: ${tools.deny[denied]}`);
    const allowed = tools.allow.findIndex((pattern) => glob(pattern).test(name));
    const asked = tools.ask.findIndex((pattern) => glob(pattern).test(name));
    if (allowed < 0 && asked < 0 && this.policy.default !== 'allow') return result(this.policy.default, `default: ${this.policy.default} (${name} is in no tool list)`);
    const values = args && typeof args === 'object' ? (args as Record<string, unknown>) : {};
    for (const argument of paths.arguments) {
      const raw = values[argument];
      if (raw === undefined) continue;
      for (const [index, candidate] of (Array.isArray(raw) ? raw : [raw]).entries()) {
        const label = Array.isArray(raw) ? `${argument}[${index}]` : argument;
        const resolved = typeof candidate === 'string' ? normalizePath(candidate, this.roots[0] ?? '/') : undefined;
        if (resolved === undefined) return result('deny', `paths: ${label} is not a usable path`);
        if (this.roots.length > 0 && !this.roots.some((root) => resolved === root || resolved.startsWith(`${root}/`))) return result('deny', `paths.roots: ${label} resolves outside every root (${resolved})`);
        const pattern = paths.deny.findIndex((deny) => glob(deny, true).test(resolved));
        if (pattern >= 0) return result('deny', `paths.deny[${pattern}]: ${paths.deny[pattern]} (${label} → ${resolved})`);
      }
    }
    for (const [index, rule] of this.policy.arguments.entries()) {
      if (!glob(rule.tool).test(name)) continue;
      const value = values[rule.argument];
      const text = typeof value === 'string' ? value.normalize('NFKC') : JSON.stringify(value ?? null);
      if (new RegExp(rule.pattern, 'iu').test(text)) return result(rule.verdict, `arguments[${index}]: ${rule.argument} ~ /${rule.pattern}/`);
    }
    if (asked >= 0) return result('ask', `tools.ask[${asked}]: ${tools.ask[asked]}`);
    if (allowed >= 0) return result('allow', `tools.allow[${allowed}]: ${tools.allow[allowed]}`);
    return result('allow', 'default: allow');
  }
}

/**
 * The absolute, symlink-free path a raw argument names, or undefined when it cannot be one
 * (control characters, undecodable escapes). Relative paths are taken from `base`.
 */
export function normalizePath(raw: string, base: string): string | undefined {
  let value = raw;
  for (let round = 0; round < 5; round += 1) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(value);
    } catch {
      return undefined;
    }
    if (decoded === value) break;
    value = decoded;
  }
  value = value.normalize('NFKC').replaceAll('\\', '/');
  if (value.startsWith('file://')) value = value.slice('file://'.length);
  // eslint-disable-next-line no-control-regex
  if (value === '' || /[\u0000-\u001f\u007f]/.test(value)) return undefined;
  return realPath(path.posix.resolve(base, value));
}

/** Resolves symlinks in the longest part of the path that exists; the rest cannot be a link yet. */
function realPath(absolute: string): string {
  const rest: string[] = [];
  let current = absolute;
  for (;;) {
    try {
      return path.posix.join(realpathSync.native(current), ...rest.reverse());
    } catch {
      const parent = path.posix.dirname(current);
      if (parent === current) return absolute;
      rest.push(path.posix.basename(current));
      current = parent;
    }
  }
}

const globCache = new Map<string, RegExp>();

/** `*` matches within a segment, `**` across segments; for tool names `*` matches anything but `/`. */
function glob(pattern: string, caseInsensitive = false): RegExp {
  const key = `${caseInsensitive}:${pattern}`;
  let compiled = globCache.get(key);
  if (!compiled) {
    const source = pattern
      .split('**')
      .map((part) => part.split('*').map((piece) => piece.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*'))
      .join('.*');
    compiled = new RegExp(`^${source}$`, caseInsensitive ? 'i' : '');
    globCache.set(key, compiled);
  }
  return compiled;
}
