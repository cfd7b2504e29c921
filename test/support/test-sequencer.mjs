// Jest runs the test files that took longest last time first, so that no long one starts at the end of the run
// beside an idle worker. A fresh clone has no timings (they are kept per checkout path), and Jest then orders by
// file size, which puts short files of long runs (a memory flood, a lock through outages) near the end. Without
// timings, the tiers go in the order of what they cost: end-to-end, integration, unit, each by size as before,
// except that a file running a shared contract suite (a few lines that run the event log's whole contract) goes
// first in its tier.
import { readFileSync } from 'node:fs';
import TestSequencer from '@jest/test-sequencer';

const tier = (path) => (path.endsWith('.e2e.spec.ts') ? 0 : path.endsWith('.int.spec.ts') ? 1 : 2);
/** A top-level call of a contract suite, such as `eventLogContract(`. */
const CONTRACT_CALL = /^[A-Za-z]+Contract\(/m;

export default class CostliestFirstSequencer extends TestSequencer {
  sort(tests) {
    const ordered = super.sort(tests);
    const untimed = ordered.filter((test) => test.duration == null && !this.hasFailed(test));
    const untimedSet = new Set(untimed);
    const contractRank = new Map(untimed.map((test) => [test, CONTRACT_CALL.test(this.source(test)) ? 0 : 1]));
    // A stable sort keeps Jest's order by size otherwise.
    const byTier = [...untimed].sort(
      (a, b) => tier(a.path) - tier(b.path) || contractRank.get(a) - contractRank.get(b),
    );
    let next = 0;
    return ordered.map((test) => (untimedSet.has(test) ? byTier[next++] : test));
  }

  /** The file's text; none if it cannot be read (Jest then reports the file, not the sequencer). */
  source(test) {
    try {
      return readFileSync(test.path, 'utf8');
    } catch {
      return '';
    }
  }
}
