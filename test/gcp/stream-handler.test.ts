import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createStreamHandler } from '../../functions/gcp/handlers/stream.handler.js';
import { streamKeys } from '../../shared/domain/key-layout.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { requireEndpoints } from '../support/global-setup.js';
import { createGcpStack, type GcpTestStack, type TestRuntime } from './stack.js';

/**
 * The GCP stream function (functions/gcp/handlers/stream.handler.ts) given the finalized events Eventarc delivers for
 * objects fake-gcs-server stores, with Firestore claims in Google's emulator, the dead-letter topic in Google's Pub/Sub
 * emulator, and the real PostgreSQL + PostGIS the suite starts.
 */
const postgres = requireEndpoints(inject('emulators'), 'postgres');
const db = new pg.Pool({ connectionString: postgres.url, max: 2 });
const vessel = `gcp-${randomBytes(4).toString('hex')}`;
let s: GcpTestStack;
let rt: TestRuntime;
const logs: string[] = [];

beforeAll(async () => {
  s = await createGcpStack();
  rt = s.runtime({ role: 'stream', logs, env: { [ENV.featureSink]: postgres.url } });
});
afterAll(async () => {
  await db.end();
  await s.close();
});

const line = (i: number) => JSON.stringify({ vessel, time: Date.UTC(2025, 5, 1, 12, 0, i), lon: 10 + i / 100, lat: 57 });
const text = (lines: readonly string[]) => new TextEncoder().encode(`${lines.join('\n')}\n`);

async function recordsOfVessel(): Promise<number> {
  const r = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM feature_records WHERE vessel = $1', [vessel]);
  return r.rows[0]?.n ?? -1;
}

describe('the GCP stream function', () => {
  it('inserts a finalized batch object under streams/ once (its generation is its version), and a redelivered event is done at its claim', async () => {
    const handler = createStreamHandler(rt);
    const event = await s.upload(streamKeys.batch('ais/2025/06/01/part-1.ndjson.gz'), gzipSync(text([line(1), line(2), '{"bad"'])));
    expect(await handler(event)).toMatchObject({
      kind: 'batch',
      outcome: { kind: 'inserted', inserted: 2, rejects: 1, format: 'ndjson+gzip' },
    });
    expect(await handler(event)).toMatchObject({ kind: 'batch', outcome: { kind: 'claim-rejected', reason: 'done' } });
    const row = await db.query('SELECT source_version, records, rejects FROM feature_batches WHERE source_bucket = $1', [s.sourceBucket]);
    expect(row.rows).toEqual([{ source_version: String(event.data?.generation), records: 2, rejects: 1 }]);
    // A second object repeating one record: counted once.
    const second = await s.upload(streamKeys.batch('ais/2025/06/01/part-2.ndjson'), text([line(2), line(3)]));
    expect(await handler(second)).toMatchObject({ kind: 'batch', outcome: { kind: 'inserted', inserted: 1, duplicates: 1 } });
    expect(await recordsOfVessel()).toBe(3);
  });

  it('ignores objects outside streams/ (Eventarc cannot filter by prefix) and dead-letters an unreadable batch, acknowledging it', async () => {
    const handler = createStreamHandler(rt);
    expect(await handler(await s.upload('incoming/scene.tif', new Uint8Array([1, 2, 3])))).toEqual({
      kind: 'ignored',
      reason: 'filtered-out',
      key: 'incoming/scene.tif',
    });
    const poison = await s.upload(streamKeys.batch('ais/broken.ndjson.gz'), new Uint8Array([0x1f, 0x8b, 0x08, 0x00, 7]));
    expect(await handler(poison)).toMatchObject({ kind: 'poison', code: 'BATCH_UNREADABLE' });
    const dead = await s.deadLetters();
    expect(dead.map((m) => Buffer.from(m.data ?? '').toString('utf8')).join('\n')).toContain('broken.ndjson.gz');
  });
});
