// The closing summary of `node scripts/test.mjs`: a line per pass and, under a pass that failed, what failed in it
// (the blocks its reporter wrote, test/support/closing-line-reporter.ts). These are the last lines of the test
// command's output, so a CI log cut to its tail still names every failed test, and a soak's seed with it.

/** Failures the summary repeats per pass; the pass's own list (after its closing line) has them all. */
export const SHOWN_FAILURES = 15;

/**
 * @param {{ label: string, code: number, seconds: number, failures: string[] | undefined }[]} results
 *   `failures`: the pass's blocks; undefined when vitest ended before its reporters ran.
 * @returns {string[]}
 */
export function summaryLines(results) {
  const out = ['', '[test] summary'];
  for (const r of results) {
    out.push(`[test]   ${r.code === 0 ? 'ok    ' : 'FAILED'} ${r.label}, ${r.seconds} s${r.code === 0 ? '' : `, exit ${r.code}`}`);
    if (r.code === 0) continue;
    if (r.failures === undefined) {
      out.push('[test]     vitest ended before reporting (its configuration or global setup failed): see its output above');
    } else if (r.failures.length === 0) {
      out.push('[test]     no test failed: vitest exited non-zero for another reason (see its output above)');
    } else {
      for (const block of r.failures.slice(0, SHOWN_FAILURES)) for (const line of block.split('\n')) out.push(`[test]     ${line}`);
      if (r.failures.length > SHOWN_FAILURES) {
        out.push(
          `[test]     ... and ${r.failures.length - SHOWN_FAILURES} more (the pass's own list, after its closing line, has them all)`,
        );
      }
    }
  }
  return out;
}
