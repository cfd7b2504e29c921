import { jest } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { UpstreamPools } from './upstream-pools.js';
import { loadUpstreams, parseUpstreams, shortKeyHash, upstreamFor, UpstreamsConfigError } from './upstreams-config.js';
import { StartupError } from '../database/embedded-postgres.js';

const SECRET = 'sk-proj-never-shown-0123456789';

const openaiUpstream = (fields: Record<string, unknown> = {}) => ({
  name: 'openai-main',
  protocol: 'openai',
  baseUrl: 'https://api.openai.com/v1/',
  models: ['gpt-4o', 'gpt-4o-mini'],
  keys: [{ key: SECRET, weight: 3 }, { key: '${SECOND_OPENAI_KEY}' }],
  ...fields,
});
const anthropicUpstream = {
  name: 'anthropic',
  protocol: 'anthropic',
  baseUrl: 'https://api.anthropic.com/v1',
  models: '*',
  keys: [{ key: 'ak-1' }],
};
const withKeys = (keys: unknown[]) => ({ upstreams: [openaiUpstream({ keys })] });
const env = { SECOND_OPENAI_KEY: 'sk-from-the-environment' };

describe('LEDGER_UPSTREAMS', () => {
  it('reads upstreams with weights (default 1), resolving ${ENV} keys from the environment', () => {
    const [openai, anthropic] = parseUpstreams({ upstreams: [openaiUpstream(), anthropicUpstream] }, env);
    expect(openai).toMatchObject({
      name: 'openai-main',
      protocol: 'openai',
      baseUrl: 'https://api.openai.com/v1',
      models: ['gpt-4o', 'gpt-4o-mini'],
    });
    expect(openai.keys.map((key) => [key.value(), key.weight])).toEqual([
      [SECRET, 3],
      ['sk-from-the-environment', 1],
    ]);
    expect(anthropic.models).toBe('*');
  });

  it('names each key by the first 8 hex digits of its SHA-256 and never shows the key', () => {
    const upstreams = parseUpstreams({ upstreams: [openaiUpstream()] }, env);
    expect(upstreams[0].keys[0].hash).toBe(shortKeyHash(SECRET));
    expect(shortKeyHash('abc')).toBe('ba7816bf');
    expect(JSON.stringify(upstreams)).not.toContain(SECRET);
    expect(inspect(upstreams, { depth: 10, showHidden: true })).not.toContain(SECRET);
  });

  it('picks the first upstream listing the model, else the first taking any, else none', () => {
    const anyModel = (name: string) => ({ ...anthropicUpstream, name });
    const upstreams = parseUpstreams({ upstreams: [anyModel('any-1'), openaiUpstream(), anyModel('any-2')] }, env);
    expect(upstreamFor(upstreams, 'gpt-4o')?.name).toBe('openai-main');
    expect(upstreamFor(upstreams, 'claude-sonnet-4-5')?.name).toBe('any-1');
    expect(upstreamFor(parseUpstreams({ upstreams: [openaiUpstream()] }, env), 'claude-sonnet-4-5')).toBeUndefined();
  });

  it.each<[string, unknown, string]>([
    ['no upstreams', { upstreams: [] }, 'upstreams: '],
    [
      'an unknown top-level field',
      { upstreams: [anthropicUpstream], providers: [] },
      '(document): Unrecognized key: "providers"',
    ],
    [
      'an unknown upstream field',
      { upstreams: [{ ...anthropicUpstream, region: 'eu' }] },
      'upstreams.0: Unrecognized key: "region"',
    ],
    ['an unknown key field', withKeys([{ key: SECRET, priority: 1 }]), 'upstreams.0.keys.0: Unrecognized key'],
    ['an unknown protocol', { upstreams: [openaiUpstream({ protocol: 'gemini' })] }, 'upstreams.0.protocol: '],
    [
      'a base URL that is not http(s)',
      { upstreams: [openaiUpstream({ baseUrl: 'ftp://x.test/v1' })] },
      'upstreams.0.baseUrl: must be an http(s) URL',
    ],
    ['an empty model list', { upstreams: [openaiUpstream({ models: [] })] }, 'upstreams.0.models: '],
    ['no keys', withKeys([]), 'upstreams.0.keys: '],
    ['a zero weight', withKeys([{ key: SECRET, weight: 0 }]), 'upstreams.0.keys.0.weight: '],
    ['a fractional weight', withKeys([{ key: SECRET, weight: 1.5 }]), 'upstreams.0.keys.0.weight: '],
    ['an empty key', withKeys([{ key: '' }]), 'upstreams.0.keys.0.key: '],
    [
      'a name used twice',
      { upstreams: [anthropicUpstream, anthropicUpstream] },
      'upstreams.1.name: anthropic is used twice',
    ],
    [
      'a key listed twice',
      withKeys([{ key: SECRET }, { key: SECRET, weight: 2 }]),
      'upstreams.0.keys.1.key: repeats an earlier key of openai-main',
    ],
    [
      'a missing environment variable',
      { upstreams: [anthropicUpstream, openaiUpstream()] },
      'upstreams.1.keys.1.key (upstream openai-main, key 1): environment variable SECOND_OPENAI_KEY is not set',
    ],
  ])('refuses %s, naming the field and never the key', (_case, document, message) => {
    let thrown: unknown;
    try {
      parseUpstreams(document, {});
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(UpstreamsConfigError);
    expect((thrown as Error).message.startsWith(message)).toBe(true);
    expect(inspect(thrown)).not.toContain(SECRET);
  });

  describe('file', () => {
    let folder: string;
    beforeEach(() => {
      folder = mkdtempSync(path.join(tmpdir(), 'upstreams-'));
    });
    afterEach(() => rmSync(folder, { recursive: true, force: true }));

    const write = (name: string, text: string) => {
      const file = path.join(folder, name);
      writeFileSync(file, text);
      return file;
    };

    it('is JSON, or YAML when named .yaml or .yml', () => {
      const yaml = write(
        'upstreams.yaml',
        [
          'upstreams:',
          '  - name: local',
          '    protocol: openai',
          '    baseUrl: http://127.0.0.1:8000/v1',
          '    models: "*"',
          '    keys:',
          '      - key: ${SECOND_OPENAI_KEY}',
          '        weight: 2',
        ].join('\n'),
      );
      const json = write('upstreams.json', JSON.stringify({ upstreams: [anthropicUpstream] }));
      expect(loadUpstreams(yaml, env)[0].keys[0].value()).toBe('sk-from-the-environment');
      expect(loadUpstreams(json, env)[0].name).toBe('anthropic');
    });

    it.each<[string, string, string]>([
      ['a field error', 'bad.json', JSON.stringify(withKeys([{ key: SECRET, weight: -1 }]))],
      ['broken JSON that holds a key', 'broken.json', `{"upstreams": [{"keys": [{"key": "${SECRET}"}`],
      ['broken YAML that holds a key', 'broken.yml', `upstreams:\n  - keys:\n      - key: "${SECRET}\n    x: [`],
      [
        'a base URL that is no URL, holding the key',
        'base.json',
        JSON.stringify({ upstreams: [{ ...openaiUpstream(), baseUrl: `https://user:${SECRET}@[proxy.internal/v1` }] }),
      ],
      [
        'a base URL with credentials, which answers could echo unmasked',
        'credentials.json',
        JSON.stringify({ upstreams: [{ ...openaiUpstream(), baseUrl: `https://user:${SECRET}@proxy.internal/v1` }] }),
      ],
    ])('stops the start on %s, naming LEDGER_UPSTREAMS and its file, never the key', (_case, name, text) => {
      const file = write(name, text);
      expect(() => loadUpstreams(file, env)).toThrow(StartupError);
      expect(() => loadUpstreams(file, env)).toThrow(`LEDGER_UPSTREAMS (${file}): `);
      expect(() => loadUpstreams(file, env)).not.toThrow(new RegExp(SECRET));
    });

    it('refuses YAML whose key carries a tag it cannot read, and prints no warning, which quotes the line', () => {
      const file = write('tagged.yaml', `upstreams:\n  - name: x\n    keys:\n      - key: !secret ${SECRET}\n`);
      const warnings = jest.spyOn(process, 'emitWarning');
      try {
        expect(() => loadUpstreams(file, env)).toThrow(
          `LEDGER_UPSTREAMS (${file}): YAML this service does not read (TAG_RESOLVE_FAILED) (line 4, column 14)`,
        );
        expect(warnings).not.toHaveBeenCalled();
      } finally {
        warnings.mockRestore();
      }
    });

    it.each<[string, string, string]>([
      // A value written `*…` is an alias; its error quotes it.
      ['a key read as an alias', `upstreams:\n  - name: x\n    keys:\n      - key: *${SECRET}\n`, 'an alias'],
      [
        // The reader warns of it, quoting it; zod's message for a key it does not know quotes it too.
        'a collection as a key',
        `upstreams:\n  - ${JSON.stringify(openaiUpstream())}\n`.replace(/}\n$/, `, [${SECRET}]: 1}\n`),
        'upstreams.0: an unrecognized key (not quoted: it may be a secret)',
      ],
      // A key written where a field name belongs.
      [
        'a key as a field name',
        `upstreams:\n  - ${JSON.stringify(openaiUpstream())}\n`.replace(/}\n$/, `, ${SECRET}: 1}\n`),
        'upstreams.0: an unrecognized key (not quoted: it may be a secret)',
      ],
    ])('refuses YAML with %s, printing nothing', (_case, text, problem) => {
      const file = write('odd.yaml', text);
      const warnings = jest.spyOn(process, 'emitWarning');
      try {
        expect(() => loadUpstreams(file, env)).toThrow(`LEDGER_UPSTREAMS (${file}): `);
        expect(() => loadUpstreams(file, env)).toThrow(problem);
        expect(() => loadUpstreams(file, env)).not.toThrow(new RegExp(SECRET));
        expect(warnings).not.toHaveBeenCalled();
      } finally {
        warnings.mockRestore();
      }
    });

    it('holds the example in config/, which reads as documented', () => {
      const keys = { OPENAI_API_KEY: 'sk-1', OPENAI_API_KEY_2: 'sk-2', ANTHROPIC_API_KEY: 'ak-1' };
      const upstreams = loadUpstreams(path.resolve('config/upstreams.example.yaml'), keys);
      expect(upstreamFor(upstreams, 'gpt-4o')?.keys.map((key) => [key.value(), key.weight])).toEqual([
        ['sk-1', 2],
        ['sk-2', 1],
      ]);
      expect(upstreamFor(upstreams, 'claude-sonnet-4-5')?.baseUrl).toBe('https://api.anthropic.com/v1');
    });

    it('stops the start when the file cannot be read', () => {
      const missing = path.join(folder, 'missing.json');
      expect(() => loadUpstreams(missing, env)).toThrow(`LEDGER_UPSTREAMS (${missing}): the file does not exist`);
    });

    it('is read again on reload: keys come and go, every key starts afresh, a bad file keeps the last one', () => {
      const file = write('upstreams.json', JSON.stringify({ upstreams: [openaiUpstream()] }));
      const clock = { now: () => 0 };
      const pools = UpstreamPools.fromFile(file, env, { clock });
      const pool = pools.pool('openai-main');
      for (const key of pools.upstreamFor('gpt-4o')!.keys) pool.report(key, 'unauthorized');
      expect(pools.availableKeys()).toEqual([{ upstream: 'openai-main', available: 0 }]);

      const threeKeys = openaiUpstream({ keys: [{ key: SECRET }, { key: 'sk-new' }, { key: 'sk-newer' }] });
      writeFileSync(file, JSON.stringify({ upstreams: [threeKeys, anthropicUpstream] }));
      pools.reload();
      expect(pools.availableKeys()).toEqual([
        { upstream: 'openai-main', available: 3 },
        { upstream: 'anthropic', available: 1 },
      ]);
      expect(pools.pool('openai-main')).toBe(pool);

      writeFileSync(file, '{');
      expect(() => pools.reload()).toThrow(`LEDGER_UPSTREAMS (${file}): not valid JSON`);
      expect(pools.upstreamFor('claude-opus-4')?.name).toBe('anthropic');
    });
  });
});
