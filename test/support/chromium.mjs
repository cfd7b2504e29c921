/* global process, console */
// Run before jest by `npm test`: the console's browser tests need a Chromium. As root, Debian's is
// installed; otherwise the run stops here with one line saying how. Never a silent skip.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const CHROMIUM = process.env.LEDGER_TEST_CHROMIUM ?? '/usr/bin/chromium';

if (!existsSync(CHROMIUM)) {
  if (process.getuid?.() === 0) {
    console.error(`${CHROMIUM} is missing: installing Debian's chromium for the console tests`);
    execFileSync('apt-get', ['update'], { stdio: 'inherit' });
    execFileSync('apt-get', ['install', '-y', 'chromium'], { stdio: 'inherit' });
  } else {
    console.error(
      `the console tests need Chromium at ${CHROMIUM}: run "sudo apt-get install -y chromium" ` +
        '(or set LEDGER_TEST_CHROMIUM to a Chromium binary)',
    );
    process.exit(1);
  }
}
