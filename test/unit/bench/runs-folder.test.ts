import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BENCH_DIR, clearRuns, freshRunDir } from '../../../bench/lib/scenes.js';

const RUNS = join(BENCH_DIR, 'runs');

/** A process that stands for another benchmark: alive until killed. */
async function otherProcess(): Promise<{ pid: number; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  return { pid: child.pid as number, stop };
}

describe("the benchmark's scratch folders (bench/lib/scenes.ts)", () => {
  it("gives each process its own runs folder, and one process's clean-up leaves a running one's alone", async () => {
    const mine = freshRunDir('probe');
    expect(mine).toBe(join(RUNS, String(process.pid), 'probe'));
    const other = await otherProcess();
    try {
      const theirs = join(RUNS, String(other.pid), 'throughput-0');
      mkdirSync(theirs, { recursive: true });
      writeFileSync(join(theirs, 'manifest.json'), '{}');
      clearRuns();
      expect(existsSync(mine)).toBe(false);
      expect(existsSync(join(theirs, 'manifest.json'))).toBe(true);
      await other.stop();
      // The other process is gone without its clean-up: the next clean-up removes what it left.
      clearRuns();
      expect(existsSync(join(RUNS, String(other.pid)))).toBe(false);
    } finally {
      await other.stop();
    }
  });

  it('empties a measurement folder when it is asked for again', () => {
    const dir = freshRunDir('again');
    writeFileSync(join(dir, 'left-over'), 'x');
    expect(existsSync(join(freshRunDir('again'), 'left-over'))).toBe(false);
    clearRuns();
  });
});
