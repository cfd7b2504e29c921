import { lstat, readdir, realpath, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isJsonObject, type FirewallVerdict, type Risk, type ToolRef } from '#core';
import { z } from 'zod';
import { loadConfigFile } from '../config/config-file.js';
import type { McpServersConfig } from './mcp-servers-config.js';

/**
 * The firewall: deterministic rules from a policy file, no LLM. Tools are named
 * `<server>/<tool>` and matched with globs (`*` within a segment). A path argument is judged as
 * the target server will open it: the literal string, `~` and relative paths placed the way
 * `@modelcontextprotocol/server-filesystem` places them (its home folder, its allowed
 * directories), then symlinks resolved on disk. Nothing is decoded or normalised first: a string
 * that would read differently once decoded or normalised gets the policy's `paths.ambiguous`
 * verdict. The saga runs it twice: when the call is screened and again right before it runs.
 */
const verdict = z.enum(['allow', 'deny', 'ask']);
const toolGlobs = z.array(z.string()).default([]);
const DEFAULT_PATH_ARGUMENTS = ['path', 'paths', 'source', 'destination', 'file', 'directory'];
const approvalCount = z.number().int().min(1).max(10).optional();

export const firewallPolicySchema = z
  .object({
    version: z.string().min(1),
    default: verdict.default('deny'),
    tools: z.object({ allow: toolGlobs, deny: toolGlobs, ask: toolGlobs }).strict(),
    paths: z
      .object({
        /** Argument names that hold paths, added to those the tool's input schema marks and those named like one. */
        arguments: z.array(z.string()).default(DEFAULT_PATH_ARGUMENTS),
        roots: z.array(z.string()).default([]),
        deny: z.array(z.string()).default([]),
        /** For a path holding percent escapes, backslashes, control or format characters, or text NFKC changes. */
        ambiguous: z.enum(['deny', 'ask']).default('deny'),
      })
      .strict()
      .prefault({}),
    /** Where a server places relative and `~` paths, when the mcpServers entry does not say (or says otherwise). */
    servers: z
      .record(z.string(), z.object({ roots: z.array(z.string()).min(1), home: z.string().optional() }).strict())
      .default({}),
    arguments: z
      .array(z.object({ tool: z.string(), argument: z.string(), pattern: z.string(), verdict }).strict())
      .default([]),
    /**
     * Four-eyes: how many distinct reviewers must approve a call that asks a person, by the
     * guardian's risk and by tool glob (`server/tool`); the highest that applies counts, else 1.
     */
    approvals: z
      .object({
        none: approvalCount,
        low: approvalCount,
        medium: approvalCount,
        high: approvalCount,
        critical: approvalCount,
        tools: z.record(z.string(), z.number().int().min(1).max(10)).default({}),
      })
      .strict()
      .prefault({}),
    limits: z
      .object({
        /** Bytes of the arguments' JSON, per call; `perTool` overrides it for the tools a glob names. */
        argumentBytes: z.number().int().positive().default(1_048_576),
        perTool: z
          .array(z.object({ tool: z.string(), argumentBytes: z.number().int().positive() }).strict())
          .default([]),
        pathLength: z.number().int().positive().default(4096),
        paths: z.number().int().positive().default(256),
        depth: z.number().int().positive().default(32),
      })
      .strict()
      .prefault({}),
  })
  .strict();

export type FirewallPolicy = z.infer<typeof firewallPolicySchema>;

export interface FirewallResult {
  readonly verdict: FirewallVerdict;
  /** The rule that decided, e.g. `tools.deny[0]: fs/delete_file`; it names arguments, never host paths. */
  readonly rule: string;
  readonly policyVersion: string;
  /** Unless denied: the arguments to send, each path argument replaced by the path that was judged. */
  readonly arguments?: Record<string, unknown>;
}

/** Where a server resolves relative paths (its allowed directories, in its order) and `~`. */
export interface ServerPlacement {
  readonly directories: readonly string[];
  readonly home?: string;
}

/** Without a policy file nothing runs unseen: every call asks a person. */
export const DEFAULT_FIREWALL_POLICY: FirewallPolicy = firewallPolicySchema.parse({
  version: 'built-in:ask-everything',
  default: 'ask',
  tools: {},
});

/** Reads the policy file `LEDGER_FIREWALL_POLICY` names: YAML when it is named `.yaml` or `.yml`, JSON otherwise. */
export function loadFirewallPolicy(file: string): FirewallPolicy {
  return loadConfigFile('LEDGER_FIREWALL_POLICY', file, firewallPolicySchema);
}

/**
 * The placement of each configured server-filesystem (`npx @modelcontextprotocol/server-filesystem
 * dir…`, `node …/server-filesystem/dist/index.js dir…`): the directories after the package, read as
 * that server reads them (`~` from its HOME, relative to its working folder). Others are not placed.
 */
export function serverPlacements(config: McpServersConfig): Record<string, ServerPlacement> {
  const placed: Record<string, ServerPlacement> = {};
  for (const [name, entry] of Object.entries(config.mcpServers)) {
    if (!('command' in entry) || typeof entry.command !== 'string') continue;
    type StdioEntry = { command: string; args?: string[]; env?: Record<string, string>; cwd?: string };
    const { command, args = [], env, cwd } = entry as StdioEntry;
    const isFilesystem = (part: string) => part.includes('server-filesystem');
    const packageAt = args.findIndex(isFilesystem);
    if (!isFilesystem(command) && packageAt < 0) continue;
    const home = env?.HOME ?? os.homedir();
    const given = isFilesystem(command) ? args : args.slice(packageAt + 1);
    const directories = given.map((dir) => path.resolve(cwd ?? process.cwd(), expandHome(dir, home)!));
    if (directories.length > 0) placed[name] = { directories, home };
  }
  return placed;
}

const FORMAT_CHARACTERS = /[\p{Cf}\p{Default_Ignorable_Code_Point}]/gu;
const VERDICT_RANK: Record<FirewallVerdict, number> = { allow: 0, ask: 1, deny: 2 };

/** Whether `later` is stricter than `earlier`: a re-check may not run what nobody approved. */
export function stricter(later: FirewallVerdict, earlier: FirewallVerdict): boolean {
  return VERDICT_RANK[later] > VERDICT_RANK[earlier];
}

interface PathArgument {
  readonly label: string;
  readonly value: unknown;
  /** Named as a path (schema, policy, name): its judged path is what the server gets. */
  readonly declared: boolean;
  readonly replace: (resolved: string) => void;
}

class Refusal extends Error {
  constructor(readonly rule: string) {
    super(rule);
  }
}

export class Firewall {
  private readonly pathArguments: Set<string>;
  private readonly placements: Record<string, ServerPlacement>;
  private readonly serverDirectories = new Map<string, Promise<string[]>>();
  private roots: Promise<string[]> | undefined;

  constructor(
    readonly policy: FirewallPolicy,
    placements: Record<string, ServerPlacement> = {},
  ) {
    this.pathArguments = new Set(policy.paths.arguments.map(foldName));
    // What the policy declares wins; a home it leaves out is still the one the server's entry gives.
    const declared = Object.entries(policy.servers).map(([server, { roots, home }]) => {
      const directories = roots.map((root) => path.resolve(root));
      const placement: ServerPlacement = { directories, home: home ?? placements[server]?.home };
      return [server, placement] as const;
    });
    this.placements = { ...placements, ...Object.fromEntries(declared) };
  }

  /** Distinct reviewers an approval of this call needs (the policy's `approvals`). */
  requiredApprovals(tool: ToolRef, risk: Risk): number {
    const { tools, ...byRisk } = this.policy.approvals;
    const name = `${tool.server}/${tool.name}`;
    const byTool = Object.entries(tools)
      .filter(([pattern]) => glob(pattern).test(name))
      .map(([, count]) => count);
    return Math.max(1, byRisk[risk] ?? 1, ...byTool);
  }

  async evaluate(tool: ToolRef, args: unknown, inputSchema?: unknown): Promise<FirewallResult> {
    const name = `${tool.server}/${tool.name}`;
    const result = (verdict: FirewallVerdict, rule: string, resolved?: Record<string, unknown>): FirewallResult => ({
      verdict,
      rule,
      policyVersion: this.policy.version,
      ...(verdict === 'deny' || !resolved ? {} : { arguments: resolved }),
    });
    const { tools, limits } = this.policy;
    const denied = tools.deny.findIndex((pattern) => glob(pattern).test(name));
    if (denied >= 0) return result('deny', `tools.deny[${denied}]: ${tools.deny[denied]}`);
    // Whatever the tool lists say, nobody is asked about arguments no server takes or that are too big.
    if (!isJsonObject(args)) return result('deny', 'arguments: not a JSON object');
    const cap = limits.perTool.find((limit) => glob(limit.tool).test(name))?.argumentBytes ?? limits.argumentBytes;
    if (Buffer.byteLength(JSON.stringify(args)) > cap) {
      return result('deny', `limits.argumentBytes: the arguments exceed ${cap} bytes`);
    }
    const allowed = tools.allow.findIndex((pattern) => glob(pattern).test(name));
    const asked = tools.ask.findIndex((pattern) => glob(pattern).test(name));
    if (allowed < 0 && asked < 0 && this.policy.default !== 'allow') {
      return result(this.policy.default, `default: ${this.policy.default} (${name} is in no tool list)`);
    }
    const resolved = structuredClone(args);
    let ambiguous: string | undefined;
    try {
      const candidates = this.pathCandidates(resolved, pathNamesOf(inputSchema));
      for (const candidate of candidates) ambiguous = (await this.judgePath(tool.server, candidate)) ?? ambiguous;
    } catch (error) {
      if (error instanceof Refusal) return result('deny', error.rule);
      throw error;
    }
    for (const [index, rule] of this.policy.arguments.entries()) {
      if (!glob(rule.tool).test(name) || !Object.hasOwn(args, rule.argument)) continue;
      if (!textsOf(args[rule.argument]).some((text) => new RegExp(rule.pattern, 'iu').test(text))) continue;
      if (rule.verdict === 'allow' && ambiguous) break;
      return result(rule.verdict, `arguments[${index}]: ${rule.argument} ~ /${rule.pattern}/`, resolved);
    }
    if (ambiguous) return result('ask', ambiguous, resolved);
    if (asked >= 0) return result('ask', `tools.ask[${asked}]: ${tools.ask[asked]}`, resolved);
    if (allowed >= 0) return result('allow', `tools.allow[${allowed}]: ${tools.allow[allowed]}`, resolved);
    return result('allow', 'default: allow', resolved);
  }

  /**
   * Every string that names a path: each string (in arrays and nested objects too) under an
   * argument the schema, the policy or its name marks as a path, and any other string that
   * looks like one. Walked without recursion and bounded in depth and count.
   */
  private pathCandidates(args: Record<string, unknown>, schemaNames: ReadonlySet<string>): PathArgument[] {
    const { limits } = this.policy;
    const found: PathArgument[] = [];
    type Holder = Record<string | number, unknown>;
    type Slot = { holder: Holder; key: string | number; label: string; declared: boolean; depth: number };
    const slotsOf = (holder: Holder, label: string, declared: boolean, depth: number): Slot[] =>
      Array.isArray(holder)
        ? holder.map((_, index) => ({ holder, key: index, label: `${label}[${index}]`, declared, depth }))
        : Object.keys(holder).map((key) => {
            const named = label === '' ? shortLabel(key) : `${label}.${shortLabel(key)}`;
            return { holder, key, label: named, declared: declared || this.namesPath(key, schemaNames), depth };
          });
    const pending = slotsOf(args, '', false, 1);
    while (pending.length > 0) {
      const { holder, key, label, declared, depth } = pending.pop()!;
      const value = holder[key];
      if (depth > limits.depth) throw new Refusal(`limits.depth: arguments nest deeper than ${limits.depth}`);
      if (value !== null && typeof value === 'object') {
        for (const slot of slotsOf(value as Holder, label, declared, depth + 1)) pending.push(slot);
      } else if (declared || (typeof value === 'string' && looksLikePath(value))) {
        found.push({ label, value, declared, replace: (resolved) => (holder[key] = resolved) });
        if (found.length > limits.paths) throw new Refusal(`limits.paths: more than ${limits.paths} paths`);
      }
    }
    return found.reverse();
  }

  private namesPath(key: string, schemaNames: ReadonlySet<string>): boolean {
    const folded = foldName(key);
    return this.pathArguments.has(folded) || schemaNames.has(folded) || PATH_NAME.test(folded);
  }

  /**
   * Refuses the path, or returns the `ask` rule an ambiguous one gets. A declared path argument
   * is replaced by the path judged.
   */
  private async judgePath(server: string, candidate: PathArgument): Promise<string | undefined> {
    const { label, value, declared, replace } = candidate;
    const { paths, limits } = this.policy;
    if (typeof value !== 'string') throw new Refusal(`paths.malformed: ${label} is not a string`);
    if (value === '') throw new Refusal(`paths.malformed: ${label} is empty`);
    if (value.length > limits.pathLength) {
      throw new Refusal(`limits.pathLength: ${label} is longer than ${limits.pathLength} characters`);
    }
    const reading = ambiguity(value);
    const ambiguous = reading === undefined ? undefined : `paths.ambiguous: ${label} holds ${reading}`;
    if (ambiguous && paths.ambiguous === 'deny') throw new Refusal(ambiguous);
    const placement = this.placements[server];
    const expanded = expandHome(value, placement?.home);
    if (expanded === undefined) {
      throw new Refusal(`paths.unplaced: ${label} starts with ~ and the home folder of ${server} is unknown`);
    }
    const directories = placement ? await this.directoriesOf(server, placement) : [];
    if (!path.isAbsolute(expanded) && directories.length === 0) {
      throw new Refusal(`paths.unplaced: ${label} is relative and the folders of ${server} are unknown`);
    }
    const absolute = path.isAbsolute(expanded) ? path.resolve(expanded) : placeRelative(expanded, directories);
    const opened = await openedPath(absolute, directories).catch(() => undefined);
    if (opened === undefined) throw new Refusal(`paths.unresolved: ${label} cannot be resolved`);
    const roots = await this.realRoots();
    if (roots.length > 0 && !roots.some((root) => within(opened, root))) {
      throw new Refusal(`paths.roots: ${label} is outside every root`);
    }
    const pattern = paths.deny.findIndex((deny) => glob(deny, true).test(opened));
    if (pattern >= 0) throw new Refusal(`paths.deny[${pattern}]: ${paths.deny[pattern]} (${label})`);
    if (declared) replace(opened);
    return ambiguous;
  }

  private realRoots(): Promise<string[]> {
    this.roots ??= Promise.all(this.policy.paths.roots.map((root) => realpath(root).catch(() => path.resolve(root))));
    return this.roots;
  }

  /** The allowed directories as server-filesystem keeps them: each as given and resolved, if a folder. */
  private directoriesOf(server: string, placement: ServerPlacement): Promise<string[]> {
    let directories = this.serverDirectories.get(server);
    if (!directories) {
      directories = (async () => {
        const listed = await Promise.all(
          placement.directories.map(async (dir) => {
            const real = await realpath(dir).catch(() => dir);
            return real === dir ? [dir] : [dir, real];
          }),
        );
        const isFolder = async (dir: string) => (await stat(dir).catch(() => undefined))?.isDirectory() === true;
        const checked = await Promise.all(listed.flat().map(async (dir) => ((await isFolder(dir)) ? [dir] : [])));
        return checked.flat();
      })();
      this.serverDirectories.set(server, directories);
    }
    return directories;
  }
}

/** Names that mark a path argument whatever the policy lists; descriptions that mark a string one. */
const PATH_NAME = /path|file|dir|folder|source|destination|target|cwd/;
const PATH_DESCRIPTION = /\b(paths?|files?|director(y|ies)|folders?)\b/i;

function foldName(name: string): string {
  return name.normalize('NFKC').replace(FORMAT_CHARACTERS, '').toLowerCase();
}

function shortLabel(key: string): string {
  const cleaned = key.replace(/[^\w.-]/g, '?');
  return cleaned.length > 40 ? `${cleaned.slice(0, 40)}…` : cleaned;
}

/** A string any server could take for a path: absolute, from home, explicitly relative, or a URL/drive. */
function looksLikePath(value: string): boolean {
  return /^(\/|~|\.{1,2}([/\\]|$)|\\|[a-z][a-z0-9+.-]*:[/\\])/i.test(value.trimStart());
}

/** What would make the string read as another path once decoded or normalised, if anything. */
function ambiguity(value: string): string | undefined {
  if (/%[0-9a-f]{2}/i.test(value)) return 'a percent escape';
  if (value.includes('\\')) return 'a backslash';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(value)) return 'a control character';
  if (new RegExp(FORMAT_CHARACTERS.source, 'u').test(value)) return 'a format character';
  if (value.normalize('NFKC') !== value) return 'characters Unicode normalisation changes';
  if (value !== value.trim() || /^["']|["']$/.test(value)) return 'surrounding spaces or quotes';
  if (/^[a-z][a-z0-9+.-]*:/i.test(value)) return 'a URL scheme or drive letter';
  return undefined;
}

/** server-filesystem's `expandHome`: only `~` and `~/…`; `undefined` when that needs a home nobody knows. */
function expandHome(value: string, home: string | undefined): string | undefined {
  if (value !== '~' && !value.startsWith('~/')) return value;
  return home === undefined ? undefined : path.join(home, value.slice(1));
}

/** server-filesystem's relative resolution: the first allowed directory that keeps it inside, else the first. */
function placeRelative(relative: string, directories: readonly string[]): string {
  for (const directory of directories) {
    const candidate = path.resolve(directory, relative);
    if (directories.some((allowed) => within(candidate, allowed))) return candidate;
  }
  return path.resolve(directories[0], relative);
}

function within(candidate: string, directory: string): boolean {
  return candidate === directory || directory === '/' || candidate.startsWith(`${directory}/`);
}

/**
 * The path server-filesystem opens: the real path when it exists; otherwise, from the allowed
 * directory holding it (or `/`), each existing part followed (a missing one may match exactly one
 * NFC-equal entry, as the server does) and the missing rest appended. One lstat per part.
 */
async function openedPath(absolute: string, directories: readonly string[]): Promise<string> {
  try {
    return await realpath(absolute);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const holding = directories.filter((directory) => within(absolute, directory));
  const start = holding.sort((a, b) => b.length - a.length)[0] ?? '/';
  let current = await realpath(start);
  const parts = path.relative(start, absolute).split(path.sep).filter(Boolean);
  for (const [index, part] of parts.entries()) {
    let entry = part;
    if (!(await lstat(path.join(current, part)).catch(() => undefined))) {
      const equal = (await readdir(current)).filter((name) => name.normalize('NFC') === part.normalize('NFC'));
      if (equal.length > 1) throw new Error('ambiguous Unicode path component');
      if (equal.length === 0) return path.join(current, ...parts.slice(index));
      entry = equal[0]!;
    }
    const next = path.join(current, entry);
    current = (await lstat(next)).isSymbolicLink() ? await realpath(next) : next;
  }
  return current;
}

/** Names of the properties an input schema marks as paths: named like one, or a string (list) described as one. */
function pathNamesOf(schema: unknown): Set<string> {
  const names = new Set<string>();
  const pending = [schema];
  for (let visited = 0; pending.length > 0 && visited < 1000; visited += 1) {
    const node = pending.pop();
    if (!isJsonObject(node)) continue;
    for (const [name, property] of Object.entries(isJsonObject(node.properties) ? node.properties : {})) {
      if (!isJsonObject(property)) continue;
      const items = isJsonObject(property.items) ? property.items : {};
      const stringish = property.type === 'string' || (property.type === 'array' && items.type === 'string');
      const { description } = property;
      const described = typeof description === 'string' && PATH_DESCRIPTION.test(description);
      if (PATH_NAME.test(foldName(name)) || (stringish && described)) names.add(foldName(name));
      pending.push(property, items);
    }
    for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
      if (Array.isArray(node[key])) pending.push(...(node[key] as unknown[]));
    }
  }
  return names;
}

/** An argument's strings as a rule matches them: NFKC, format characters removed (case is folded by the `i` flag). */
function textsOf(value: unknown): string[] {
  const clean = (text: string) => text.normalize('NFKC').replace(FORMAT_CHARACTERS, '');
  if (typeof value === 'string') return [clean(value)];
  const texts: string[] = [clean(JSON.stringify(value ?? null))];
  const pending = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next === 'string') texts.push(clean(next));
    else if (next && typeof next === 'object') pending.push(...(Object.values(next) as unknown[]));
  }
  return texts;
}

const globCache = new Map<string, RegExp>();

/** `*` matches within a segment, `**` across segments; for tool names `*` matches anything but `/`. */
function glob(pattern: string, caseInsensitive = false): RegExp {
  const key = `${caseInsensitive}:${pattern}`;
  let compiled = globCache.get(key);
  if (!compiled) {
    const source = pattern
      .split('**')
      .map((part) =>
        part
          .split('*')
          .map((piece) => piece.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
          .join('[^/]*'),
      )
      .join('.*');
    compiled = new RegExp(`^${source}$`, caseInsensitive ? 'i' : '');
    globCache.set(key, compiled);
  }
  return compiled;
}
