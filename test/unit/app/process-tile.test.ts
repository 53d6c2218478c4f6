import { beforeEach, describe, expect, it } from 'vitest';
import type { LocalBackend } from '../../../functions/local/compose.js';
import { handleTileDelivery } from '../../../shared/app/deliveries.js';
import { processTile } from '../../../shared/app/process-tile.js';
import type { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { makeTileJob, type TileJob, toJobMessage } from '../../../shared/app/tile-job.js';
import { type ProcessingParams, type SourceRef, sceneKey } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import type { FakeClock } from '../../support/fake-clock.js';
import { FIXTURE_LEASE_MS, fixtureSettings, localTileFixture } from '../../support/tile-fixture.js';

const LEASE = FIXTURE_LEASE_MS;
const params: ProcessingParams = { ...DEFAULT_PARAMS, tile_px: 128 };
const settings = fixtureSettings;

describe('processTile and handleTileDelivery on the local backend with a fake clock', () => {
  let clock: FakeClock;
  let logs: string[];
  let telemetry: JsonTelemetry;
  let b: LocalBackend;
  let source: SourceRef;
  let job: TileJob;

  beforeEach(async () => {
    ({ clock, logs, telemetry, b, source, job } = await localTileFixture('tessera-app-', params));
    return () => b.close();
  });

  it('writes and commits a first delivery', async () => {
    const r = await processTile(b, settings('w1'), job);
    expect(r.kind).toBe('written');
    expect(await b.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED', owner: 'w1', outputUri: job.outputKey });
    expect(telemetry.counters()).toMatchObject({ claimed: 1, written: 1, committed: 1 });
  });

  it('rejects a second delivery at the claim and leaves the output untouched', async () => {
    await processTile(b, settings('w1'), job);
    const before = await b.outputs.head(job.outputKey);
    const r = await processTile(b, settings('w2'), job);
    expect(r).toMatchObject({ kind: 'claim-rejected', reason: 'done' });
    expect(await b.outputs.head(job.outputKey)).toEqual(before);
    expect(logs.some((l) => JSON.parse(l).level === 'INFO' && JSON.parse(l).event === 'claim-rejected')).toBe(true);
  });

  it('a lapsed lease is taken over; the first worker finishes late, its write is refused and its commit is lease-stolen (ERROR)', async () => {
    const zombie = processTile(
      b,
      settings('zombie', {
        hooks: {
          afterClaim: async () => {
            clock.advance(LEASE + 1);
            expect((await processTile(b, settings('rescuer'), job)).kind).toBe('written');
          },
        },
      }),
      job,
    );
    expect((await zombie).kind).toBe('lease-stolen');
    expect(await b.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED', owner: 'rescuer' });
    const tiles = [];
    for await (const h of b.outputs.list(`tiles/${job.sceneKey}/1_2`)) tiles.push(h);
    expect(tiles).toHaveLength(1);
    const c = telemetry.counters();
    expect(c).toMatchObject({ 'lease-stolen': 1, 'lease-taken-over': 1, written: 1, 'write-already-present': 1, committed: 1 });
    const stolen = logs.map((l) => JSON.parse(l)).find((l) => l.event === 'lease-stolen');
    expect(stolen).toMatchObject({ level: 'ERROR', holder: 'rescuer' });
    expect(stolen.message).toMatch(/was taken by rescuer; the job ran longer than its lease/);
  });

  // Issue 25 item 6: the redelivery of a failed attempt (a sink outage, a refused upload) on the same worker claims the
  // row that attempt gave back under the very same owner. Before: counted lease-taken-over naming itself, a takeover
  // no lease-stolen could ever answer (a zombie of that attempt commits as the same owner).
  it('reclaiming a lapsed claim of its own owner is not a takeover: no lease-taken-over, an INFO own-claim-reclaimed', async () => {
    await expect(
      processTile(b, settings('w1', { hooks: { afterClaim: async () => Promise.reject(new Error('killed')) } }), job, 'm1@w1'),
    ).rejects.toThrow('killed');
    clock.advance(LEASE + 1);
    expect((await processTile(b, settings('w1'), job, 'm1@w1')).kind).toBe('written');
    expect(telemetry.counters()).toMatchObject({ claimed: 2, 'lease-taken-over': 0, written: 1, committed: 1 });
    const events = logs.map((l) => JSON.parse(l) as { level: string; event: string });
    expect(events.filter((l) => l.event === 'lease-taken-over')).toEqual([]);
    expect(events.filter((l) => l.event === 'own-claim-reclaimed').map((l) => l.level)).toEqual(['INFO']);
  });

  it('a crash after the write leaves the object; the redelivery after the lease gets already-present and commits', async () => {
    await expect(
      processTile(b, settings('w1', { hooks: { afterWrite: async () => Promise.reject(new Error('killed')) } }), job),
    ).rejects.toThrow('killed');
    expect(await b.claims.get(job.jobKey)).toMatchObject({ state: 'CLAIMED' });
    clock.advance(LEASE + 1);
    expect((await processTile(b, settings('w2'), job)).kind).toBe('already-present');
    expect(await b.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED', owner: 'w2' });
  });

  it('a redelivery of the message whose earlier attempt holds the lease is retried after the lease, not acked', async () => {
    const d = { body: toJobMessage(job).body, deliveryId: 'msg-1' };
    await b.claims.claim({
      jobId: job.jobKey,
      owner: 'msg-1@dead-worker',
      now: clock.now(),
      leaseUntil: clock.now() + LEASE,
      expiresAt: clock.now() + LEASE * 10,
    });
    const v = await handleTileDelivery(b, settings('w2'), d);
    expect(v.kind).toBe('retry');
    if (v.kind === 'retry') expect(v.delayMs).toBeGreaterThanOrEqual(LEASE);
    const other = await handleTileDelivery(b, settings('w3'), { ...d, deliveryId: 'msg-2' });
    expect(other).toMatchObject({ kind: 'ack', outcome: { kind: 'claim-rejected', reason: 'held' } });
  });

  it.each([
    ['not JSON', 'not json'],
    ['a job whose keys do not match its fields', () => JSON.stringify({ ...JSON.parse(toJobMessage(job).body), jobKey: 'f'.repeat(64) })],
    [
      'a window outside the raster grid shape',
      () => JSON.stringify({ ...JSON.parse(toJobMessage(job).body), window: { row: 1, col: 2, x: -1, y: 0, width: 1, height: 1 } }),
    ],
  ])('classifies %s as poison and writes nothing', async (_what, body) => {
    const v = await handleTileDelivery(b, settings('w1'), { body: typeof body === 'function' ? body() : body, deliveryId: 'm' });
    expect(v.kind).toBe('poison');
    expect(await b.outputs.head(job.outputKey)).toBeUndefined();
    expect(telemetry.counters().poison).toBe(1);
  });

  it('a bad expression is poison before any claim is taken', async () => {
    const bad = makeTileJob(job.sceneKey, source, { ...params, expression: '(B08 - ' }, job.grid, job.window);
    const v = await handleTileDelivery(b, settings('w1'), {
      body: JSON.stringify({ ...JSON.parse(toJobMessage(bad).body) }),
      deliveryId: 'm',
    });
    expect(v.kind).toBe('poison');
    expect(telemetry.counters().claimed).toBe(0);
  });

  it('a source that is not a raster is poison and the claim is released for the next attempt', async () => {
    await b.sources.putIfAbsent('scenes/readme.tif', new TextEncoder().encode('this is not a tiff'));
    const head = await b.sources.head('scenes/readme.tif');
    const notRaster = { bucket: 'local-sources', key: 'scenes/readme.tif', versionToken: head?.version ?? '' };
    const real = makeTileJob(sceneKey(notRaster, params), notRaster, params, job.grid, job.window);
    const v = await handleTileDelivery(b, settings('w1'), { body: toJobMessage(real).body, deliveryId: 'm' });
    expect(v.kind).toBe('poison');
    if (v.kind === 'poison') expect(v.error.name).toBe('NotARasterError');
    const row = await b.claims.get(real.jobKey);
    expect(row?.state).toBe('CLAIMED');
    expect(row?.leaseUntil).toBeLessThan(clock.now());
  });

  it('a repair under the current version replaces the tile; under a stale version it is refused', async () => {
    await processTile(b, settings('w1'), job);
    // A bad writer replaced the tile; the operator reads that version and repairs under it.
    const v0 = (await b.outputs.head(job.outputKey))?.version as string;
    const bad = await b.outputs.putIfMatch(job.outputKey, new TextEncoder().encode('bad tile'), v0);
    if (bad.kind !== 'written') throw new Error('setup failed');
    const v1 = bad.version;
    const repair = makeTileJob(job.sceneKey, source, params, job.grid, job.window, { kind: 'overwrite', expectedVersion: v1 });
    expect((await processTile(b, settings('w2'), repair)).kind).toBe('written');
    const v2 = (await b.outputs.head(job.outputKey))?.version;
    expect(v2).not.toBe(v1);
    expect((await processTile(b, settings('w3'), repair)).kind).toBe('claim-rejected');
    // Another writer changes the tile after the operator read it: the repair's precondition fails on other bytes.
    const other = await b.outputs.putIfMatch(job.outputKey, new TextEncoder().encode('other writer'), v2 as string);
    if (other.kind !== 'written') throw new Error('setup failed');
    const stale = makeTileJob(job.sceneKey, source, params, job.grid, job.window, { kind: 'overwrite', expectedVersion: v2 as string });
    expect((await processTile(b, settings('w4'), stale)).kind).toBe('version-mismatch');
    expect((await b.outputs.head(job.outputKey))?.version).toBe(other.version);
  });
});
