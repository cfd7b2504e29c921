/** A test file as Jest's sequencer sees it (the part the suite's sequencer reads). */
export interface SequencedTest {
  readonly path: string;
  readonly context: unknown;
  duration?: number;
}

/** Types for test-sequencer.mjs, which Jest loads as it is (its spec imports it). */
export default class CostliestFirstSequencer {
  constructor(options: unknown);
  sort(tests: SequencedTest[]): SequencedTest[];
  time(test: SequencedTest): number | undefined;
  hasFailed(test: SequencedTest): boolean;
  /** The file's source, read for the contract suites it runs. */
  source(test: SequencedTest): string;
}
