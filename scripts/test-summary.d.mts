/** Types of scripts/test-summary.mjs (plain JavaScript: scripts/test.mjs runs it before anything is compiled). */

/** Failures the summary repeats per pass; the pass's own list (after its closing line) has them all. */
export declare const SHOWN_FAILURES: number;

/** One pass of the test command: its label, exit code, time, and the blocks its reporter wrote (undefined: none). */
export interface PassResult {
  readonly label: string;
  readonly code: number;
  readonly seconds: number;
  readonly failures: readonly string[] | undefined;
}

/** The summary's lines: a line per pass, and under a pass that failed, what failed in it. */
export declare function summaryLines(results: readonly PassResult[]): string[];
