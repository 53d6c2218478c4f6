import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { createLocalBackend, type LocalBackend } from '../../../functions/local/compose.js';
import type { WorkerSettings } from '../../../shared/app/backend.js';
import { handleTileDelivery } from '../../../shared/app/deliveries.js';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import { processTile } from '../../../shared/app/process-tile.js';
import { readSceneManifest } from '../../../shared/app/scene-manifest.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { makeTileJob, type TileJob, toJobMessage } from '../../../shared/app/tile-job.js';
import { compareContent, contentDigest } from '../../../shared/domain/content-digest.js';
import { OutputOccupiedError } from '../../../shared/domain/errors.js';
import type { ProcessingParams } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { windowAt } from '../../../shared/domain/tile-grid.js';
import { FakeClock } from '../../support/fake-clock.js';
import { putSyntheticScene } from '../../support/local-scene.js';

const params: ProcessingParams = { ...DEFAULT_PARAMS, tile_px: 128 };
const settings: WorkerSettings = { owner: 'w1', leaseMs: 60_000, retentionMs: 3_600_000 };

describe('compareContent', () => {
  const d = contentDigest(new TextEncoder().encode('hello'));
  it.each([
    ['same size and MD5', { size: 5, md5Base64: d.md5Base64 }, 'same'],
    ['same size and SHA-256 (any case)', { size: 5, sha256Hex: d.sha256Hex.toUpperCase() }, 'same'],
    ['a truncated object', { size: 4, md5Base64: d.md5Base64 }, 'different'],
    ['one of two hashes differs', { size: 5, md5Base64: d.md5Base64, sha256Hex: '00' }, 'different'],
    ['no hash to compare', { size: 5 }, 'unverifiable'],
  ] as const)('%s: %s', (_label, stored, expected) => {
    expect(compareContent(stored, d)).toBe(expected);
  });
});

describe('processTile when the output key is occupied', () => {
  let logs: string[];
  let telemetry: JsonTelemetry;
  let b: LocalBackend;
  let job: TileJob;

  beforeEach(async () => {
    logs = [];
    telemetry = new JsonTelemetry((l) => logs.push(l));
    b = createLocalBackend(mkdtempSync(join(tmpdir(), 'tessera-occupied-')), { clock: new FakeClock(), telemetry });
    const source = await putSyntheticScene(b.sources, 'local-sources', 'scenes/s.tif', { width: 300, height: 200 });
    const fan = await fanOutScene(b, { source, params });
    const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
    job = makeTileJob(fan.sceneKey, source, params, manifest.grid, windowAt(manifest.grid, 0, 1));
    return () => b.close();
  });

  // Before: `already-present` was never checked, so a foreign object at the key was committed as the tile for good.
  it('a foreign object at the tile key is an alarm: ERROR write-occupied, counted, not committed, the delivery poison', async () => {
    await b.outputs.putIfAbsent(job.outputKey, new TextEncoder().encode('not a tile'));
    const verdict = await handleTileDelivery(b, settings, { body: toJobMessage(job).body, deliveryId: 'm1', receiveCount: 1 });
    expect(verdict.kind).toBe('poison');
    if (verdict.kind === 'poison') expect(verdict.error).toBeInstanceOf(OutputOccupiedError);
    expect(telemetry.counters()).toMatchObject({ 'write-occupied': 1, 'write-already-present': 0, committed: 0 });
    expect((await b.claims.get(job.jobKey))?.state).not.toBe('COMMITTED');
    const alarm = logs.map((l) => JSON.parse(l)).find((l) => l.event === 'write-occupied');
    expect(alarm).toMatchObject({ level: 'ERROR', outputKey: job.outputKey });
    expect(new TextDecoder().decode(await b.outputs.get(job.outputKey))).toBe('not a tile');
  });

  it('a truncated copy of its own tile is occupied too; the whole tile is already-present and commits', async () => {
    const other = createLocalBackend(mkdtempSync(join(tmpdir(), 'tessera-occupied-ref-')), { clock: new FakeClock() });
    const source = await putSyntheticScene(other.sources, 'local-sources', 'scenes/s.tif', { width: 300, height: 200 });
    await fanOutScene(other, { source, params });
    expect((await processTile(other, settings, job)).kind).toBe('written');
    const tile = await other.outputs.get(job.outputKey);
    other.close();

    await b.outputs.putIfAbsent(job.outputKey, tile.slice(0, tile.byteLength - 100));
    await expect(processTile(b, settings, job)).rejects.toBeInstanceOf(OutputOccupiedError);
    expect(telemetry.counters()).toMatchObject({ 'write-occupied': 1, committed: 0 });

    const whole = createLocalBackend(mkdtempSync(join(tmpdir(), 'tessera-occupied-whole-')), { clock: new FakeClock(), telemetry });
    const again = await putSyntheticScene(whole.sources, 'local-sources', 'scenes/s.tif', { width: 300, height: 200 });
    await fanOutScene(whole, { source: again, params });
    await whole.outputs.putIfAbsent(job.outputKey, tile);
    expect((await processTile(whole, settings, job)).kind).toBe('already-present');
    expect(telemetry.counters()).toMatchObject({ 'write-already-present': 1, committed: 1 });
    whole.close();
  });
});
