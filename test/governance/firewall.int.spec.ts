import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import {
  DEFAULT_FIREWALL_POLICY,
  Firewall,
  firewallPolicySchema,
  loadFirewallPolicy,
  serverPlacements,
} from '../../apps/ledger/src/governance/firewall.js';
import { McpExecutor } from '../../apps/ledger/src/governance/mcp-executor.js';
import { mcpServersSchema } from '../../apps/ledger/src/governance/mcp-servers-config.js';
import { mcpServerBin } from '../support/governance-fixture.js';

/**
 * The firewall corpus. Each case names its class; a case's arguments go to `fs/<tool>` on a
 * server-filesystem placed at `base` (one level above the policy root `base/workspace`), with
 * `base` as its home folder, so relative and `~` paths land where that server would open them.
 */
describe('firewall', () => {
  const base = realpathSync(mkdtempSync(path.join(tmpdir(), 'firewall-')));
  const root = path.join(base, 'workspace');
  const at = (...parts: string[]) => path.join(root, ...parts);
  mkdirSync(at('docs'), { recursive: true });
  mkdirSync(at('.ssh'), { recursive: true });
  mkdirSync(path.join(base, 'secret'));
  mkdirSync(path.join(base, '.aws'));
  writeFileSync(at('docs', 'notes.md'), 'x');
  writeFileSync(at('.ssh', 'id_rsa'), 'PRIVATE');
  writeFileSync(at('.env'), 'TOKEN=1');
  writeFileSync(path.join(base, 'secret', 'key'), 'SECRET');
  writeFileSync(path.join(base, '.aws', 'credentials'), 'AWS');
  symlinkSync(path.join(base, 'secret'), at('link-out'));
  symlinkSync('/etc', at('etc-link'));
  // Names a decoding or normalising firewall reads as something else than the server opens.
  symlinkSync(path.join(base, 'secret'), at('ｋｅｙｓ'));
  symlinkSync(at('.env'), at('cfg%41.txt'));
  symlinkSync(at('.ssh'), at('k\\s'));
  symlinkSync(at('.ssh'), at('innocent'));
  // NFD on disk: the server matches an NFC request to it when the exact name is missing.
  symlinkSync(at('.ssh'), at('cafe\u0301'));
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  const policy = {
    version: 'test-1',
    tools: { allow: ['fs/*', 'bare/*', 'shell/*'], deny: ['fs/delete_*'], ask: ['fs/write_file'] },
    paths: { roots: [root], deny: ['**/.ssh/**', '**/.ssh', '**/.env', '**/*.pem'] },
    arguments: [
      { tool: 'shell/*', argument: 'command', pattern: '\\brm\\s+-rf\\b', verdict: 'deny' },
      { tool: 'shell/*', argument: 'note', pattern: 'password', verdict: 'ask' },
    ],
    limits: { perTool: [{ tool: 'fs/tiny', argumentBytes: 64 }] },
  };
  const placements = { fs: { directories: [base], home: base } };
  const firewall = new Firewall(firewallPolicySchema.parse(policy), placements);
  const withPolicy = (changes: object) =>
    new Firewall(firewallPolicySchema.parse({ ...policy, ...changes }), placements);
  const asking = withPolicy({ paths: { ...policy.paths, ambiguous: 'ask' } });

  type Case = readonly [cls: string, args: unknown, verdict: 'allow' | 'deny' | 'ask', rule?: RegExp, tool?: string];
  const read = (cls: string, value: unknown, verdict: Case[2], rule?: RegExp): Case => [
    cls,
    { path: value },
    verdict,
    rule,
    'read_text_file',
  ];

  const traversal = [
    '../secret/key',
    '../../etc/passwd',
    '/etc/passwd',
    '//etc/passwd',
    '/etc//passwd',
    `${root}/../secret`,
    `${root}/docs/../../secret`,
    'link-out/key',
    'link-out',
    `${root}/link-out/key`,
    'etc-link/passwd',
    './etc-link/shadow',
    'docs/../etc-link/passwd',
    'docs/./../../secret',
    'docs/////../../secret',
    './../secret',
    '.../../../secret',
    `${root}2/file`,
    `${root}-other/file`,
    '/',
    '/root/.bashrc',
    '/proc/self/environ',
    'secret/key',
    'secret',
    '.aws/credentials',
    'workspace/../secret/key',
    '.',
    'workspace/link-out/key',
    `${base}/secret/key`,
  ].map((value) => read('traversal outside the root', value, 'deny', /^paths\.roots/));
  const denyGlobs = [
    'workspace/.ssh/id_rsa',
    'workspace/.ssh',
    `${root}/.ssh/id_rsa`,
    'workspace/docs/../.ssh/id_rsa',
    'workspace/.SSH/id_rsa',
    'workspace/docs/.env',
    'workspace/.env',
    'workspace/x/server.pem',
    'workspace/X/SERVER.PEM',
    'workspace/innocent/id_rsa',
    'workspace/innocent',
    `${root}/innocent/authorized_keys`,
    'workspace/caf\u00e9/id_rsa',
  ].map((value) => read('deny glob on the resolved path', value, 'deny', /^paths\.deny/));
  const literalNames = [
    'workspace/ｋｅｙｓ/key',
    'workspace/cfg%41.txt',
    'workspace/k\\s/id_rsa',
    `${root}/ｋｅｙｓ/key`,
    `${root}/cfg%41.txt`,
    `${root}/k\\s/id_rsa`,
    'workspace/..%2fsecret',
    'workspace/%2e%2e/secret',
    '%2e%2e%2fsecret',
    '%2E%2E%2Fsecret',
    '..%252fsecret',
    '%25252e%25252e%25252fsecret',
    'workspace/..\\secret',
    '..\\..\\etc\\passwd',
    'docs\\..\\..\\secret',
    '．．/secret',
    '．．／secret',
    '..／secret',
    '%EF%BC%8E%EF%BC%8E/secret',
    '%2fetc%2fpasswd',
    '/%65tc/passwd',
    '\\etc\\passwd',
    'workspace/．ssh/id_rsa',
    'workspace/docs%2fnotes.md',
    'workspace/ﬁle.txt',
    'workspace/docs/notes\u200b.md',
    'workspace/\u202egnp.exe',
    'workspace/docs/\u00adnotes.md',
    'file:///etc/passwd',
    ' workspace/docs/notes.md',
    'workspace/docs/notes.md ',
    '"workspace/docs/notes.md"',
    'workspace/cafe\u0301.txt',
  ].map((value) => read('reads differently once decoded or normalised', value, 'deny', /^paths\.ambiguous/));
  const literalNamesAsked = [
    ['workspace/ｋｅｙｓ/key', 'deny', /^paths\.roots/],
    ['workspace/cfg%41.txt', 'deny', /^paths\.deny/],
    ['workspace/k\\s/id_rsa', 'deny', /^paths\.deny/],
    ['workspace/docs%2fnotes.md', 'ask', /^paths\.ambiguous/],
    ['workspace/ﬁle.txt', 'ask', /^paths\.ambiguous/],
    ['workspace/..%2fsecret', 'ask', /^paths\.ambiguous/],
  ] as const;
  const malformed = [
    ['workspace/docs/notes.md\u0000.png', /^paths\.ambiguous/],
    ['workspace/docs\nnotes', /^paths\.ambiguous/],
    ['', /^paths\.malformed/],
    [42, /^paths\.malformed/],
    [null, /^paths\.malformed/],
    [true, /^paths\.malformed/],
    [['workspace/docs/a', '../secret'], /^paths\.roots/],
  ].map(([value, rule]) => read('malformed path argument', value, 'deny', rule as RegExp));
  const home = [
    '~/.aws/credentials',
    '~',
    '~/secret/key',
    '~/workspace/.ssh/id_rsa',
    '~/workspace/../secret',
    '~/.aws',
  ].map((value) => read('home folder of the server', value, 'deny'));
  const unplaced: Case[] = ['docs/notes.md', '~/notes', './x', 'x', '~', '~/.ssh/id_rsa'].map((value) => [
    'relative or ~ on a server whose directories are unknown',
    { path: value },
    'deny',
    /^paths\.unplaced/,
    'bare:read_file',
  ]);
  const unlisted: Case[] = [
    [{ paths: ['workspace/docs/notes.md', 'workspace/.env'] }, 'read_multiple_files'],
    [{ paths: ['workspace/docs/notes.md', '.ssh/id_rsa'] }, 'read_multiple_files'],
    [{ paths: ['secret/key'] }, 'read_multiple_files'],
    [{ files: ['workspace/.env'] }, 'read_many'],
    [{ options: { target: 'workspace/.ssh/id_rsa' } }, 'copy'],
    [{ options: { nested: [{ file: '../secret/key' }] } }, 'copy'],
    [{ note: '/etc/passwd' }, 'note'],
    [{ note: '~/.aws/credentials' }, 'note'],
    [{ list: ['ok', './secret/key'] }, 'note'],
    [{ deep: { deeper: { deepest: '../secret' } } }, 'note'],
    [{ outputDir: 'secret' }, 'export'],
    [{ folder: 'secret' }, 'export'],
    [{ cwd: '/etc' }, 'run'],
    [{ where: 'secret/key' }, 'schema_marked'],
  ].map(([args, tool]) => ['path in an argument the policy does not list', args, 'deny', /^paths\./, tool as string]);
  const notObjects: Case[] = [[], ['workspace/docs/notes.md'], 'workspace/docs/notes.md', 42, null, true].map(
    (args) => ['arguments that are not a JSON object', args, 'deny', /^arguments: not a JSON object/, 'read_text_file'],
  );
  const bounded: Case[] = [
    read('bounded cost', 'a/'.repeat(100_000), 'deny', /^limits\.pathLength/),
    read('bounded cost', `workspace/${'x'.repeat(5000)}`, 'deny', /^limits\.pathLength/),
    [
      'bounded cost',
      { paths: Array.from({ length: 2000 }, (_, index) => `workspace/docs/${index}`) },
      'deny',
      /^limits\.paths/,
      'read_multiple_files',
    ],
    [
      'bounded cost',
      { path: 'workspace/docs/notes.md', content: 'x'.repeat(1_100_000) },
      'deny',
      /^limits\.argumentBytes/,
      'write_file',
    ],
    [
      'bounded cost',
      { path: 'workspace/docs/notes.md', content: 'x'.repeat(100) },
      'deny',
      /^limits\.argumentBytes/,
      'tiny',
    ],
    [
      'bounded cost',
      { path: 'workspace/docs/notes.md', deep: JSON.parse(`${'['.repeat(200)}${']'.repeat(200)}`) },
      'deny',
      /^limits\.depth/,
      'tiny2',
    ],
  ];
  const ruleClass = 'argument rule after format characters and case';
  const argumentRules: Case[] = [
    'please rm -rf /',
    'please RM -RF /',
    'rm\u200b -rf',
    'r\u200bm -rf x',
    'rm\u00ad -rf',
    'ｒｍ -rf x',
    'rm\u2060 -rf x',
  ]
    .map((command): Case => [ruleClass, { command }, 'deny', /^arguments\[0\]/, 'shell:run'])
    .concat(
      [
        'password',
        'PASSWORD',
        'pass\u200bword',
        'passwords',
        'Pass\uFEFFWord',
        'ｐａｓｓｗｏｒｄ',
        'my pass\u200cword is',
      ].map((note): Case => [ruleClass, { note }, 'ask', /^arguments\[1\]/, 'shell:run']),
    );
  const legitimate: Case[] = [
    'workspace/docs/notes.md',
    `${root}/docs/notes.md`,
    './workspace/docs/new-file.md',
    'workspace/docs/sub/../notes.md',
    'workspace/docs//notes.md',
    'workspace/ünïcödé.txt',
    '~/workspace/notes',
    'workspace/a..b/c',
    ['workspace/docs/a', 'workspace/docs/b'],
    `${root}/new/deeper/file.txt`,
    'workspace',
    root,
    `${root}/`,
    'workspace/café-new.txt',
  ]
    .map((value) => read('legitimate path inside the root', value, 'allow'))
    .concat(
      [
        [{ paths: ['workspace/docs/notes.md', `${root}/docs/x`] }, 'read_multiple_files'],
        [{ note: 'and/or', list: ['a/b', 'plain'] }, 'note'],
        [{ path: 'workspace/docs/notes.md', tail: 5 }, 'read_text_file'],
      ].map(([args, tool]): Case => ['legitimate path inside the root', args, 'allow', undefined, tool as string]),
    );
  const toolLists: Case[] = [
    ['tool lists', { path: 'workspace/docs/notes.md' }, 'deny', /^tools\.deny\[0\]: fs\/delete_\*$/, 'delete_file'],
    ['tool lists', { path: 'workspace/docs/notes.md' }, 'ask', /^tools\.ask\[0\]: fs\/write_file$/, 'write_file'],
    ['tool lists', { path: '../x' }, 'deny', /^paths\.roots/, 'write_file'],
    ['tool lists', {}, 'deny', /^default/, 'web:fetch'],
  ];
  const corpus: Case[] = [
    ...traversal,
    ...denyGlobs,
    ...literalNames,
    ...malformed,
    ...home,
    ...unplaced,
    ...unlisted,
    ...notObjects,
    ...bounded,
    ...argumentRules,
    ...legitimate,
    ...toolLists,
  ];
  const schemas: Record<string, unknown> = {
    schema_marked: { type: 'object', properties: { where: { type: 'string', description: 'A file path to copy' } } },
  };
  /** `tool` names a tool of `fs`; `server:tool` one of another server. */
  const toolOf = (name = 'read_text_file') => {
    const [server, tool] = name.includes(':') ? name.split(':') : ['fs', name];
    return { server: server, name: tool };
  };

  const cases = corpus.length + literalNamesAsked.length;
  it(`judges ${cases} cases, each by its class, and never names a host path`, async () => {
    expect(cases).toBeGreaterThanOrEqual(150);
    const wrong: unknown[] = [];
    for (const [cls, args, verdict, rule, tool] of corpus) {
      const result = await firewall.evaluate(toolOf(tool), args, schemas[tool ?? '']);
      const leaks = result.rule.includes(base) || /\/etc|secret\/key|\.aws/.test(result.rule);
      if (result.verdict !== verdict || (rule && !rule.test(result.rule)) || leaks) {
        const shown = JSON.stringify(args).slice(0, 100);
        wrong.push({ cls, args: shown, expected: verdict, got: result.verdict, rule: result.rule.slice(0, 160) });
      }
    }
    for (const [value, verdict, rule] of literalNamesAsked) {
      const result = await asking.evaluate(toolOf(), { path: value });
      if (result.verdict === verdict && rule.test(result.rule)) continue;
      wrong.push({ cls: 'ambiguous asked', value, got: result.verdict, rule: result.rule });
    }
    expect(wrong).toEqual([]);
  });

  it('hands the server the resolved path it judged, symlinks followed', async () => {
    const paths = ['workspace/docs/notes.md', '~/workspace/docs/../docs/x'];
    const result = await firewall.evaluate(toolOf('read_multiple_files'), { paths, other: 1 });
    const judged = [at('docs', 'notes.md'), at('docs', 'x')];
    expect(result).toMatchObject({ verdict: 'allow', arguments: { paths: judged, other: 1 } });
    const dir = mkdtempSync(path.join(root, 'swap-'));
    const write = await firewall.evaluate(toolOf('write_file'), { path: `${dir}/drop/authorized_keys`, content: 'k' });
    expect(write).toMatchObject({ verdict: 'ask', arguments: { path: `${dir}/drop/authorized_keys`, content: 'k' } });
    symlinkSync(at('.ssh'), path.join(dir, 'drop'));
    const again = await firewall.evaluate(toolOf('write_file'), { path: `${dir}/drop/authorized_keys`, content: 'k' });
    expect(again).toMatchObject({ verdict: 'deny', rule: expect.stringMatching(/^paths\.deny/) });
    expect(again.rule).not.toContain('.ssh/authorized_keys');
  });

  it('places relative paths in the directories and home an mcpServers entry gives server-filesystem', async () => {
    const placed = serverPlacements(
      mcpServersSchema.parse({
        mcpServers: {
          fs: {
            command: 'npx',
            args: ['-y', '@modelcontextprotocol/server-filesystem', base, '/nonexistent-dir'],
            env: { HOME: base },
          },
          local: { command: process.execPath, args: [mcpServerBin('server-filesystem'), 'workspace'], cwd: base },
          other: { command: 'some-server', args: ['/tmp'] },
        },
      }),
    );
    expect(placed).toEqual({
      fs: { directories: [base, '/nonexistent-dir'], home: base },
      local: { directories: [root], home: expect.any(String) },
    });
    const anyTool = { ...policy, tools: { allow: ['*/*'] } };
    const derived = new Firewall(firewallPolicySchema.parse(anyTool), placed);
    expect((await derived.evaluate(toolOf(), { path: '~/.aws/credentials' })).verdict).toBe('deny');
    expect((await derived.evaluate(toolOf('local:read_text_file'), { path: 'docs/notes.md' })).verdict).toBe('allow');
    const unplaced = await derived.evaluate(toolOf('other:read_text_file'), { path: 'docs/notes.md' });
    expect(unplaced.rule).toMatch(/^paths\.unplaced/);
    // The policy can declare a server's roots and home itself; that wins over what the config says.
    const declaredPolicy = firewallPolicySchema.parse({ ...anyTool, servers: { other: { roots: [root] } } });
    const declared = new Firewall(declaredPolicy, placed);
    expect((await declared.evaluate(toolOf('other:read_text_file'), { path: 'docs/notes.md' })).verdict).toBe('allow');
    expect((await declared.evaluate(toolOf('other:read_text_file'), { path: '~/x' })).rule).toMatch(/^paths\.unplaced/);
  });

  it('finds path arguments in the input schemas the real server-filesystem lists', async () => {
    const executor = new McpExecutor(
      mcpServersSchema.parse({
        mcpServers: { fs: { command: process.execPath, args: [mcpServerBin('server-filesystem'), base] } },
      }),
      { callTimeoutMs: 20_000, toolListTtlMs: 60_000 },
    );
    try {
      const schema = await executor.inputSchema({ server: 'fs', name: 'read_multiple_files' });
      const withoutListedNames = withPolicy({ paths: { ...policy.paths, arguments: [] } });
      const args = { paths: ['workspace/.env'] };
      const judged = await withoutListedNames.evaluate(toolOf('read_multiple_files'), args, schema);
      expect(judged).toMatchObject({ verdict: 'deny' });
      expect(await executor.inputSchema({ server: 'fs', name: 'no_such_tool' })).toBeUndefined();
    } finally {
      await executor.close();
    }
  });

  it('reads JSON or YAML policies, names the bad field of a broken one, asks for everything without one', async () => {
    const example = path.resolve('config/firewall-policy.example.json');
    const yamlFile = path.join(base, 'policy.yaml');
    writeFileSync(yamlFile, stringify(JSON.parse(readFileSync(example, 'utf8'))));
    expect(loadFirewallPolicy(yamlFile)).toEqual(loadFirewallPolicy(example));
    const broken = path.join(base, 'broken.yml');
    writeFileSync(broken, 'version: x\ntools:\n  allow: read_file\n');
    expect(() => loadFirewallPolicy(broken)).toThrow(/tools\.allow/);
    const builtIn = new Firewall(DEFAULT_FIREWALL_POLICY);
    expect((await builtIn.evaluate({ server: 'fs', name: 'read_file' }, { path: '/tmp' })).verdict).toBe('ask');
    expect((await builtIn.evaluate({ server: 'fs', name: 'read_file' }, ['/tmp'])).verdict).toBe('deny');
    // The example's argument rule catches what a word-bounded pattern let through.
    const examplePolicy = new Firewall(loadFirewallPolicy(example));
    for (const message of ['my password', 'passwords', 'pass\u200bword', 'SECRETS']) {
      const { verdict } = await examplePolicy.evaluate({ server: 'everything', name: 'echo' }, { message });
      expect({ message, verdict }).toEqual({ message, verdict: 'ask' });
    }
    // Its deny rules take a protected folder itself too, not only what lies inside it.
    const listing = (folder: string) =>
      examplePolicy.evaluate(
        { server: 'filesystem', name: 'list_directory' },
        { path: path.resolve('workspace', folder) },
      );
    for (const folder of ['.git', '.ssh', '.git/objects']) expect((await listing(folder)).verdict).toBe('deny');
    expect((await listing('docs')).verdict).toBe('allow');
  });
});
