import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import { freshJobId } from '../support/ids.js';

const N = 16;
const bootstrap = new URL('../support/workers/ts-worker.mjs', import.meta.url);
const entry = new URL('../support/workers/local-race.worker.ts', import.meta.url).href;

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
});
