import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { DEFAULT_FIREWALL_POLICY, Firewall, firewallPolicySchema, loadFirewallPolicy } from '../../apps/ledger/src/governance/firewall.js';

describe('firewall', () => {
  const base = mkdtempSync(path.join(tmpdir(), 'firewall-'));
  const root = path.join(base, 'workspace');
  mkdirSync(path.join(root, 'docs'), { recursive: true });
  mkdirSync(path.join(root, '.ssh'), { recursive: true });
  writeFileSync(path.join(root, 'docs', 'notes.md'), 'x');
  mkdirSync(path.join(base, 'secret'));
  symlinkSync(path.join(base, 'secret'), path.join(root, 'link-out'));
  symlinkSync('/etc', path.join(root, 'etc-link'));
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  const firewall = new Firewall(
    firewallPolicySchema.parse({
      version: 'test-1',
      tools: { allow: ['fs/*'], deny: ['fs/delete_*'], ask: ['fs/write_file'] },
      paths: { roots: [root], deny: ['**/.ssh/**', '**/.ssh', '**/.env', '**/*.pem'] },
      arguments: [{ tool: 'shell/*', argument: 'command', pattern: '\\brm\\s+-rf\\b', verdict: 'deny' }],
    }),
  );
  const read = (pathArgument: unknown) => firewall.evaluate({ server: 'fs', name: 'read_file' }, { path: pathArgument });

  const outside = [
    '../secret/key', '../../etc/passwd', '/etc/passwd', '//etc/passwd', '/etc//passwd', `${root}/../secret`, `${root}/docs/../../secret`,
    '..%2fsecret', '%2e%2e/secret', '%2e%2e%2fsecret', '%2E%2E%2Fsecret', '..%252fsecret', '%252e%252e%252fsecret', '%25252e%25252e%25252fsecret',
    '..\\secret', '..\\..\\etc\\passwd', 'docs\\..\\..\\secret', '．．/secret', '．．／secret', '..／secret', '%EF%BC%8E%EF%BC%8E/secret',
    'link-out/key', 'link-out', `${root}/link-out/key`, 'etc-link/passwd', './etc-link/shadow', 'docs/../etc-link/passwd', 'file:///etc/passwd',
    'docs/./../../secret', 'docs/////../../secret', './../secret', '.../../../secret', `${root}2/file`, `${root}-other/file`, '/', '/root/.bashrc',
    '/proc/self/environ', '%2fetc%2fpasswd', '/%65tc/passwd', '\\etc\\passwd',
  ];
  const denied = [
    '.ssh/id_rsa', '.ssh', 'docs/../.ssh/id_rsa', '.SSH/id_rsa', '%2essh/id_rsa', '.ssh%2fid_rsa', '．ssh/id_rsa', 'docs/.env', '.env', 'x/server.pem', 'X/SERVER.PEM',
  ];
  const malformed = ['docs/notes.md\u0000.png', 'docs\nnotes', '%zz', '', 42, null, ['docs/ok', '../secret']];

  it(`blocks ${outside.length + denied.length + malformed.length} bypass attempts`, () => {
    expect(outside.length + denied.length + malformed.length).toBeGreaterThanOrEqual(50);
    for (const attempt of [...outside, ...denied, ...malformed]) expect({ attempt, verdict: read(attempt).verdict }).toEqual({ attempt, verdict: 'deny' });
    expect(read('../secret/key').rule).toMatch(/^paths\.roots/);
    expect(read('.ssh/id_rsa').rule).toMatch(/^paths\.deny/);
  });

  it('lets legitimate paths through, resolved inside the root', () => {
    for (const legitimate of ['docs/notes.md', `${root}/docs/notes.md`, './docs/new-file.md', 'docs/sub/../notes.md', 'docs//notes.md', 'docs%2fnotes.md', 'ünïcödé.txt', '~/notes', 'a..b/c', ['docs/a', 'docs/b']]) {
      expect({ legitimate, ...read(legitimate) }).toMatchObject({ legitimate, verdict: 'allow', policyVersion: 'test-1' });
    }
  });

  it('applies tool lists and argument rules, and names the rule', () => {
    expect(firewall.evaluate({ server: 'fs', name: 'delete_file' }, { path: 'docs/notes.md' })).toMatchObject({ verdict: 'deny', rule: 'tools.deny[0]: fs/delete_*' });
    expect(firewall.evaluate({ server: 'fs', name: 'write_file' }, { path: 'docs/notes.md' })).toMatchObject({ verdict: 'ask', rule: 'tools.ask[0]: fs/write_file' });
    expect(firewall.evaluate({ server: 'fs', name: 'write_file' }, { path: '../x' }).verdict).toBe('deny');
    expect(firewall.evaluate({ server: 'web', name: 'fetch' }, {})).toMatchObject({ verdict: 'deny', rule: expect.stringMatching(/^default/) });
  });

  it('reads a policy from JSON or YAML alike, names the bad field of a broken one, and asks a person for everything without one', () => {
    const example = path.resolve('config/firewall-policy.example.json');
    const yamlFile = path.join(base, 'policy.yaml');
    writeFileSync(yamlFile, stringify(JSON.parse(readFileSync(example, 'utf8'))));
    expect(loadFirewallPolicy(yamlFile)).toEqual(loadFirewallPolicy(example));
    const broken = path.join(base, 'broken.yml');
    writeFileSync(broken, 'version: x\ntools:\n  allow: read_file\n');
    expect(() => loadFirewallPolicy(broken)).toThrow(/tools\.allow/);
    expect(new Firewall(DEFAULT_FIREWALL_POLICY).evaluate({ server: 'fs', name: 'read_file' }, { path: '/tmp' }).verdict).toBe('ask');
  });
});
