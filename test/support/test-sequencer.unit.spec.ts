import { fileURLToPath } from 'node:url';
import CostliestFirstSequencer, { type SequencedTest as Test } from './test-sequencer.mjs';

/** A test file of `bytes` in a context that keeps no timings on disk (as a fresh clone has none). */
function testFile(path: string, bytes: number): Test {
  return { path, context: { config: { cache: false }, hasteFS: { getSize: () => bytes } } };
}

const FILES = [
  testFile('a.unit.spec.ts', 9_000),
  testFile('b.int.spec.ts', 1_000),
  testFile('c.e2e.spec.ts', 500),
  testFile('d.unit.spec.ts', 200),
  testFile('e.e2e.spec.ts', 4_000),
  testFile('f.int.spec.ts', 7_000),
  testFile('g.int.spec.ts', 300),
  testFile('h.unit.spec.ts', 100),
];

/** The files' sources: `g` runs a contract suite at its top level; `h` and `b` only name one. */
const SOURCES: Record<string, string> = {
  'g.int.spec.ts': "import { eventLogContract } from '#event-log/testing';\neventLogContract('an adapter', connect);\n",
  'h.unit.spec.ts': "import { eventLogContract } from '#event-log/testing';\n",
  'b.int.spec.ts': "it('is not a contract', () => {\n  // eventLogContract(…) runs elsewhere\n});\n",
};

/** The sequencer reading the sources above instead of files. */
class OverSources extends CostliestFirstSequencer {
  override source(test: Test) {
    return SOURCES[test.path] ?? '';
  }
}

const paths = (tests: readonly Test[]) => tests.map((test) => test.path);

describe("the suite's test sequencer", () => {
  it('runs files with no timings end-to-end first, then integration, then unit, each largest first but contract suites first, every file once', () => {
    const sorted = new OverSources({}).sort([...FILES]);
    expect(paths(sorted)).toEqual([
      'e.e2e.spec.ts',
      'c.e2e.spec.ts',
      'g.int.spec.ts',
      'f.int.spec.ts',
      'b.int.spec.ts',
      'a.unit.spec.ts',
      'd.unit.spec.ts',
      'h.unit.spec.ts',
    ]);
  });

  it("keeps Jest's order for files it has timings for: failed first, the rest longest first, every file once", () => {
    // A last run's record: one file failed, two took long, the others are new.
    const history: Record<string, { failed: boolean; duration: number }> = {
      'd.unit.spec.ts': { failed: true, duration: 1 },
      'a.unit.spec.ts': { failed: false, duration: 40 },
      'c.e2e.spec.ts': { failed: false, duration: 90 },
    };
    class WithHistory extends OverSources {
      override time(test: Test) {
        return history[test.path]?.duration;
      }
      override hasFailed(test: Test) {
        return history[test.path]?.failed === true;
      }
    }
    const sorted = new WithHistory({}).sort([...FILES]);
    expect(paths(sorted)).toEqual([
      'd.unit.spec.ts',
      'e.e2e.spec.ts',
      'g.int.spec.ts',
      'f.int.spec.ts',
      'b.int.spec.ts',
      'h.unit.spec.ts',
      'c.e2e.spec.ts',
      'a.unit.spec.ts',
    ]);
  });

  it('reads the files themselves: a contract runner goes first, and a file it cannot read counts as none', () => {
    const contract = fileURLToPath(new URL('../event-log/eventstoredb-event-log.int.spec.ts', import.meta.url));
    const missing = fileURLToPath(import.meta.url.replace('test-sequencer.unit', 'test-sequencer-missing.int'));
    const sorted = new CostliestFirstSequencer({}).sort([testFile(missing, 9_000), testFile(contract, 1_000)]);
    expect(paths(sorted)).toEqual([contract, missing]);
  });
});
