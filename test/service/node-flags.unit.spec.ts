import { readFileSync } from 'node:fs';
import { SERVICE_NODE_FLAGS } from '../../apps/ledger/src/config/node-flags.js';

/**
 * Every way the service or a rebuild is started runs Node with the service's V8 flags (decision
 * 0034); the flags themselves come from one constant. (`npm start` is also run for real, in
 * npm-start.e2e.spec.ts.)
 */
describe("the service's V8 flags", () => {
  const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts;

  it.each([
    ['start', 'dist/apps/ledger/src/main.js'],
    ['rebuild', 'dist/apps/ledger/src/cli.js rebuild'],
  ])('npm run %s passes them to node', (script, program) => {
    expect(scripts[script]).toContain(`node ${SERVICE_NODE_FLAGS.join(' ')} ${program}`);
  });

  it("the image's command passes them to node", () => {
    const command = /^CMD (.+)$/m.exec(readFileSync('Dockerfile', 'utf8'))?.[1];
    expect(JSON.parse(command ?? 'null')).toEqual(['node', ...SERVICE_NODE_FLAGS, 'dist/apps/ledger/src/main.js']);
  });
});
