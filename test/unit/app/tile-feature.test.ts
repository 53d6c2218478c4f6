import { beforeEach, describe, expect, it } from 'vitest';
import type { LocalBackend } from '../../../functions/local/compose.js';
import { processTile } from '../../../shared/app/process-tile.js';
import type { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { tileFeature, tileFootprint, tileStatistics } from '../../../shared/app/tile-feature.js';
import type { TileJob } from '../../../shared/app/tile-job.js';
import { AdapterError, UnsupportedRasterError } from '../../../shared/domain/errors.js';
import type { ProcessingParams } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import type {
  FeaturePutResult,
  FeatureScene,
  FeatureSink,
  SceneRetireResult,
  SceneSupersession,
  TileFeature,
} from '../../../shared/ports/feature-sink.port.js';
import type { FakeClock } from '../../support/fake-clock.js';
import { syntheticSceneBytes } from '../../support/local-scene.js';
import { FIXTURE_LEASE_MS, fixtureSettings, localTileFixture } from '../../support/tile-fixture.js';

describe('tileStatistics', () => {
  it('counts, averages and bounds the valid pixels only: nodata, NaN and infinities are not values', () => {
    const px = Float32Array.from([0.5, -9999, Number.NaN, -0.25, Number.POSITIVE_INFINITY, 1, -9999]);
    expect(tileStatistics(px, -9999)).toEqual({ count: 3, mean: (0.5 - 0.25 + 1) / 3, min: -0.25, max: 1 });
  });

  it('an all-nodata tile has count 0 and null statistics', () => {
    expect(tileStatistics(Float32Array.from([-9999, -9999]), -9999)).toEqual({ count: 0, mean: null, min: null, max: null });
  });

  it('compares nodata in float32, as the pixels are stored: a nodata of 0.1 is recognised', () => {
    expect(tileStatistics(Float32Array.from([0.1, 0.2]), 0.1).count).toBe(1);
  });
});

describe('tileFootprint', () => {
  it('is the closed ring of the window corners through the scene geotransform (rotation included)', () => {
    const ring = tileFootprint([1000, 10, 1, 5000, 2, -10], { row: 0, col: 1, x: 4, y: 2, width: 4, height: 2 });
    // origin of the window: x = 1000 + 4*10 + 2*1 = 1042, y = 5000 + 4*2 + 2*-10 = 4988
    expect(ring).toEqual([
      [1042, 4988],
      [1082, 4996],
      [1084, 4976],
      [1044, 4968],
      [1042, 4988],
    ]);
  });
});

describe('tileFeature', () => {
  const job = {
    jobKey: 'k',
    sceneKey: 's',
    outputKey: 'tiles/s/0_0.tif',
    code: 'build-1',
    source: { bucket: 'b', key: 'scenes/a.tif', versionToken: 'v1' },
    params: { ...DEFAULT_PARAMS, tile_px: 256 },
    grid: { width: 600, height: 300 },
    window: { row: 0, col: 0, x: 0, y: 0, width: 1, height: 1 },
  } as unknown as TileJob;
  it('takes the EPSG code from the CRS, or from the root of its WKT', () => {
    const gt = [0, 1, 0, 0, 0, -1] as const;
    expect(tileFeature(job, { geoTransform: gt, crs: { epsg: 32631 } }, [1], -9999, undefined).epsg).toBe(32631);
    expect(tileFeature(job, { geoTransform: gt, crs: { wkt: 'PROJCS["x",AUTHORITY["EPSG","32632"]]' } }, [1], -9999, undefined).epsg).toBe(
      32632,
    );
  });
  it('names its scene: the source object without its version, the pipeline, the windows of the grid and the fan-out time', () => {
    expect(tileFeature(job, { geoTransform: [0, 1, 0, 0, 0, -1], crs: { epsg: 32631 } }, [1], -9999, 1_700_000_000_000).scene).toEqual({
      sceneKey: 's',
      source: { bucket: 'b', key: 'scenes/a.tif' },
      sourceVersion: 'v1',
      pipeline: DEFAULT_PARAMS.pipeline,
      pipelineVersion: DEFAULT_PARAMS.version,
      codeVersion: 'build-1',
      // 600 x 300 at 256 px: 3 columns, 2 rows.
      windowCount: 6,
      fannedOutAt: 1_700_000_000_000,
    });
  });
  it('refuses a CRS without an EPSG code with a typed error', () => {
    expect(() => tileFeature(job, { geoTransform: [0, 1, 0, 0, 0, -1], crs: { wkt: 'LOCAL_CS["x"]' } }, [1], -9999, undefined)).toThrow(
      UnsupportedRasterError,
    );
  });
});

/** A sink that remembers what it was given and answers like the real one (one row per job), or fails on demand. */
class RecordingSink implements FeatureSink {
  readonly name = 'recording';
  readonly rows = new Map<string, TileFeature>();
  puts = 0;
  failNext = false;
  async put(feature: TileFeature): Promise<FeaturePutResult> {
    this.puts++;
    if (this.failNext) {
      this.failNext = false;
      throw new AdapterError('[feature-sink:recording] injected outage', { retryable: true });
    }
    if (this.rows.has(feature.jobId)) return { kind: 'already-present' };
    this.rows.set(feature.jobId, feature);
    return { kind: 'inserted' };
  }
  readonly retired: [FeatureScene, SceneSupersession][] = [];
  async retireScene(scene: FeatureScene, why: SceneSupersession): Promise<SceneRetireResult> {
    this.retired.push([scene, why]);
    return { kind: 'retired' };
  }
}

describe('processTile with a feature sink (local backend, fake clock)', () => {
  const params: ProcessingParams = { ...DEFAULT_PARAMS, tile_px: 128 };
  let clock: FakeClock;
  let logs: string[];
  let telemetry: JsonTelemetry;
  let b: LocalBackend;
  let job: TileJob;
  let sink: RecordingSink;

  beforeEach(async () => {
    ({ clock, logs, telemetry, b, job } = await localTileFixture('tessera-sink-', params));
    sink = new RecordingSink();
    return () => b.close();
  });

  it('inserts the row of the rendered tile after the write and before the commit', async () => {
    const order: string[] = [];
    const r = await processTile(
      { ...b, sink },
      fixtureSettings('w1', {
        hooks: {
          afterWrite: async () => {
            order.push(`write:${sink.puts}`);
          },
          afterFeature: async () => {
            order.push(`feature:${sink.puts}:${(await b.claims.get(job.jobKey))?.state}`);
          },
        },
      }),
      job,
    );
    expect(r.kind).toBe('written');
    expect(order).toEqual(['write:0', 'feature:1:CLAIMED']);
    const row = sink.rows.get(job.jobKey);
    // The edge window 1_2 of the fixture is 44 x 72 pixels; the synthetic scene's NDVI is valid everywhere.
    expect(row).toMatchObject({ scene: { sceneKey: job.sceneKey }, tileKey: job.outputKey, count: 44 * 72, epsg: 32631 });
    expect(row?.mean).toBeGreaterThanOrEqual(row?.min as number);
    expect(row?.footprint).toHaveLength(5);
    expect(telemetry.counters()).toMatchObject({ written: 1, 'feature-inserted': 1, committed: 1 });
  });

  it('a row already there (a crash after the insert, before the commit) is success, counted and logged at INFO', async () => {
    await expect(
      processTile(
        { ...b, sink },
        fixtureSettings('w1', {
          hooks: {
            afterFeature: async () => {
              throw new Error('process died after the insert');
            },
          },
        }),
        job,
      ),
    ).rejects.toThrow('process died');
    clock.advance(FIXTURE_LEASE_MS + 1);
    expect((await processTile({ ...b, sink }, fixtureSettings('w2'), job)).kind).toBe('already-present');
    expect(sink.rows.size).toBe(1);
    expect(telemetry.counters()).toMatchObject({ 'feature-inserted': 1, 'feature-already-present': 1, committed: 1 });
    expect(logs.map((l) => JSON.parse(l)).filter((l) => l.event === 'feature-already-present')).toMatchObject([{ level: 'INFO' }]);
  });

  it('a sink outage gives the claim back and fails the delivery; the redelivery inserts and commits at once', async () => {
    sink.failNext = true;
    await expect(processTile({ ...b, sink }, fixtureSettings('w1'), job)).rejects.toMatchObject({ retryable: true });
    const row = await b.claims.get(job.jobKey);
    expect(row).toMatchObject({ state: 'CLAIMED', owner: 'w1' });
    expect(row?.leaseUntil).toBeLessThan(clock.now());
    expect((await processTile({ ...b, sink }, fixtureSettings('w2'), job)).kind).toBe('already-present');
    expect(sink.rows.size).toBe(1);
    expect(await b.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED', owner: 'w2' });
  });

  it('a source overwritten under the job retires its scene in the sink (with the version the store holds now) and inserts nothing', async () => {
    const before = await b.sources.head(job.source.key);
    await b.sources.putIfMatch(job.source.key, await syntheticSceneBytes({ width: 300, height: 200, seed: 99 }), before?.version as string);
    const now = (await b.sources.head(job.source.key))?.version;
    expect((await processTile({ ...b, sink }, fixtureSettings('w1'), job)).kind).toBe('source-changed');
    expect(sink.rows.size).toBe(0);
    // The scene as every row of it names it: its fan-out time is the manifest's (the fake clock has not moved since).
    expect(sink.retired).toEqual([
      [
        expect.objectContaining({
          sceneKey: job.sceneKey,
          sourceVersion: job.source.versionToken,
          windowCount: 6,
          fannedOutAt: clock.now(),
        }),
        { kind: 'source-changed', currentVersion: now },
      ],
    ]);
    expect(logs.map((l) => JSON.parse(l)).filter((l) => l.event === 'feature-scene-superseded')).toMatchObject([
      { level: 'INFO', result: 'retired' },
    ]);
  });

  it('without a sink nothing changes: no feature counters', async () => {
    await processTile(b, fixtureSettings('w1'), job);
    expect(telemetry.counters()['feature-inserted']).toBe(0);
  });
});
