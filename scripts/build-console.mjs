// `npm run build`'s console step: Vite builds apps/console into dist/console, skipped when no source
// it reads (the console and the core it imports) changed since the last build, so `npm start` starts at once.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import process from 'node:process';

const SOURCES = ['apps/console', 'libs/core/src', 'package-lock.json'];
const BUILT = 'dist/console/index.html';

function newest(entry) {
  const stat = statSync(entry);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...readdirSync(entry).map((name) => newest(path.join(entry, name))));
}

const built = (() => {
  try {
    return statSync(BUILT).mtimeMs;
  } catch {
    return -1;
  }
})();
if (built < Math.max(...SOURCES.map(newest))) {
  const vite = [
    'node_modules/vite/bin/vite.js',
    'build',
    '--config',
    'apps/console/vite.config.ts',
    '--logLevel',
    'warn',
  ];
  const result = spawnSync(process.execPath, vite, { stdio: 'inherit' });
  process.exit(result.status ?? 1);
}
