import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import { SqliteJobQueue } from '../../functions/local/adapters/sqlite-job-queue.js';
import { systemClock } from '../../shared/app/telemetry.js';
import { freshJobId } from '../support/ids.js';

const N = 16;
const bootstrap = new URL('../support/workers/ts-worker.mjs', import.meta.url);
const entry = new URL('../support/workers/local-race.worker.ts', import.meta.url).href;
const processEntry = new URL('../support/workers/local-race.process.ts', import.meta.url).pathname;
const tsxLoader = new URL(`file://${createRequire(import.meta.url).resolve('tsx')}`).href;
/** Fewer than the threads: each process pays a Node + tsx start. */
const P = 8;

/** Runs N contenders on N threads, each with its own connection or store instance, released together. */
function race(kind: 'claim' | 'put', file: string, id: string): Promise<string[]> {
  const barrier = new SharedArrayBuffer(4);
  return Promise.all(
    Array.from(
      { length: N },
      (_, i) =>
        new Promise<string>((resolve, reject) => {
          const w = new Worker(bootstrap, { workerData: { entry, kind, file, id, owner: `w${i}`, barrier, contenders: N } });
          w.once('message', resolve);
          w.once('error', reject);
        }),
    ),
  );
}

describe('local backend under real cross-thread concurrency', () => {
  it(`${N} threads with their own SQLite connections claim one job: exactly one wins`, async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'tessera-race-')), 'claims.db');
    const results = await race('claim', file, freshJobId('threads'));
    expect(results.filter((r) => r === 'claimed')).toHaveLength(1);
    expect(results.filter((r) => r === 'held')).toHaveLength(N - 1);
  });

  it(`${N} threads create one file: exactly one written, the file whole`, async () => {
    const root = mkdtempSync(join(tmpdir(), 'tessera-race-'));
    const results = await race('put', root, 'tiles/x/0_0.tif');
    expect(results.filter((r) => r === 'written')).toHaveLength(1);
    expect(results.filter((r) => r === 'already-present')).toHaveLength(N - 1);
    const text = readFileSync(new FsObjectStore(root).pathOf('tiles/x/0_0.tif'), 'utf8');
    expect(text).toMatch(/^(w\d+)\1{9999}$/);
  });

  it(`${P} OS processes with their own SQLite connections claim one job: exactly one wins`, async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'tessera-race-')), 'claims.db');
    const results = await raceProcesses<string>({ kind: 'claim', file, id: freshJobId('processes') });
    expect(results.filter((r) => r === 'claimed')).toHaveLength(1);
    expect(results.filter((r) => r === 'held')).toHaveLength(P - 1);
  });

  it(`${P} OS processes drain one queue at once: every message is received exactly once`, async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'tessera-race-')), 'queue.db');
    const queue = new SqliteJobQueue(file, { clock: systemClock });
    const bodies = Array.from({ length: 400 }, (_, i) => `job-${i}`);
    await queue.sendBatch(bodies.map((body) => ({ jobKey: body, body })));
    queue.close();
    const got = (await raceProcesses<string[]>({ kind: 'receive', file, id: 'q' })).flat();
    expect(got).toHaveLength(bodies.length);
    expect(new Set(got)).toEqual(new Set(bodies));
  });
});

/** Runs P contenders as OS processes on the pinned Node + tsx, released together once all are up. */
async function raceProcesses<T>(task: { kind: 'claim' | 'receive'; file: string; id: string }): Promise<T[]> {
  const children = Array.from({ length: P }, (_, i) =>
    fork(processEntry, [JSON.stringify({ ...task, owner: `p${i}` })], { execPath: process.execPath, execArgv: ['--import', tsxLoader] }),
  );
  const results = children.map(
    (child) =>
      new Promise<T>((resolve, reject) => {
        child.on('message', (m) => {
          if (m !== 'ready') resolve(m as T);
        });
        child.once('error', reject);
        child.once('exit', (code) => code !== 0 && reject(new Error(`race process exited ${code}`)));
      }),
  );
  await Promise.all(children.map((child) => new Promise<void>((resolve) => child.once('message', () => resolve()))));
  for (const child of children) child.send('go');
  return Promise.all(results);
}
