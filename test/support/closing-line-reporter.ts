import { writeFileSync } from 'node:fs';
import { stripVTControlCharacters } from 'node:util';
import type { Reporter, SerializedError, TestModule, TestRunEndReason } from 'vitest/node';

/** Lines of an error's message, and of its diff, that the failure list keeps. */
const MESSAGE_LINES = 8;
const DIFF_LINES = 24;

/** An error in a few plain lines: its message (and its diff, for a failed `expect`), colours removed. */
export function describeError(error: SerializedError | undefined): string[] {
  if (error === undefined) return ['(no error recorded)'];
  const head = `${error.name === undefined || error.name === 'Error' ? '' : `${error.name}: `}${error.message}`;
  const lines = stripVTControlCharacters(head).split('\n').slice(0, MESSAGE_LINES);
  const diff = typeof error.diff === 'string' ? stripVTControlCharacters(error.diff).split('\n') : [];
  if (diff.length > 0)
    lines.push(...diff.slice(0, DIFF_LINES), ...(diff.length > DIFF_LINES ? [`... (${diff.length - DIFF_LINES} more lines of diff)`] : []));
  return lines;
}

/**
 * What failed in a run, a block per failure: each failed test (file, full name with its suites, which carries a
 * soak's seed and its reproduce command), each test file that failed outside its tests (an import or a hook), each
 * unhandled error, and a run that was interrupted.
 */
export function failureList(
  modules: ReadonlyArray<TestModule>,
  unhandled: ReadonlyArray<SerializedError>,
  reason: TestRunEndReason,
): string[] {
  const blocks: string[] = [];
  const indent = (lines: string[]) => lines.map((l) => `    ${l}`).join('\n');
  for (const m of modules) {
    for (const e of m.errors()) blocks.push(`${m.relativeModuleId} (the file itself)\n${indent(describeError(e))}`);
    for (const t of m.children.allTests()) {
      const r = t.result();
      if (r.state === 'failed') blocks.push(`${m.relativeModuleId} > ${t.fullName}\n${indent(describeError(r.errors[0]))}`);
    }
  }
  for (const e of unhandled) blocks.push(`unhandled error\n${indent(describeError(e))}`);
  if (reason === 'interrupted') blocks.push('the run was interrupted before every test ended');
  return blocks;
}

/**
 * Prints the plain closing line `N passed, N failed, N skipped` that CI tooling reads in any language, after
 * vitest's own summary; then, when anything failed, the list of what (`failureList`). With TESSERA_TEST_FAILURES
 * set (scripts/test.mjs sets it per pass), the list also goes to that file (a JSON array of the blocks, empty when
 * nothing failed): the test
 * command prints every pass's list again as the last lines of its output, where a CI log cut to its tail shows it.
 */
export default class ClosingLineReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandled: ReadonlyArray<SerializedError>, reason: TestRunEndReason): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
    }
    const failures = failureList(modules, unhandled, reason);
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
    if (failures.length > 0) process.stdout.write(`\nfailed:\n${failures.map((f) => `  ${f}`).join('\n')}\n`);
    const file = process.env.TESSERA_TEST_FAILURES;
    if (file !== undefined && file !== '') writeFileSync(file, JSON.stringify(failures));
  }
}
