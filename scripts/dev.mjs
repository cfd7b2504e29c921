// `npm run dev`: the compiler in watch mode beside the service, which Node's --watch restarts
// (SIGTERM, so it stops its PostgreSQL cleanly) each time the build it runs changes.
import { spawn, spawnSync } from 'node:child_process';
import process from 'node:process';

const tsc = ['node_modules/typescript/bin/tsc', '-b'];
const first = spawnSync(process.execPath, tsc, { stdio: 'inherit' });
if (first.status !== 0) process.exit(first.status ?? 1);

const { SERVICE_NODE_FLAGS } = await import('../dist/apps/ledger/src/config/node-flags.js');
const children = [
  spawn(process.execPath, [...tsc, '--watch', '--preserveWatchOutput'], { stdio: 'inherit' }),
  spawn(process.execPath, ['--watch', ...SERVICE_NODE_FLAGS, 'dist/apps/ledger/src/main.js'], { stdio: 'inherit' }),
];
// Each child gets one signal: a second one would cut the service's clean shutdown short.
let stopping = false;
const stop = (signal) => {
  if (stopping) return;
  stopping = true;
  children.forEach((child) => child.kill(signal));
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
// One gone by itself (the watcher crashed): stop the other; leave when both are.
let running = children.length;
for (const child of children) {
  child.on('exit', () => {
    running -= 1;
    if (running === 0) process.exit(0);
    stop('SIGTERM');
  });
}
