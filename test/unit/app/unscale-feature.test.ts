import { afterEach, describe, expect, it } from 'vitest';
import type { LocalBackend } from '../../../functions/local/compose.js';
import { processTile } from '../../../shared/app/process-tile.js';
import { tileStatistics } from '../../../shared/app/tile-feature.js';
import type { ProcessingParams } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import type { FeaturePutResult, FeatureSink, SceneRetireResult, TileFeature } from '../../../shared/ports/feature-sink.port.js';
import { openGeoTiff } from '../../../shared/raster/index.js';
import { fixtureSettings, localTileFixture } from '../../support/tile-fixture.js';

/**
 * Issue 29, section 1: with `unscale`, the feature sink's statistics (the PostGIS row of a tile) are those of the
 * physical values the tile holds, not of the raw DN: the row is computed from exactly the pixels encoded.
 */

class RecordingSink implements FeatureSink {
  readonly name = 'recording';
  readonly rows = new Map<string, TileFeature>();
  async put(feature: TileFeature): Promise<FeaturePutResult> {
    this.rows.set(feature.jobId, feature);
    return { kind: 'inserted' };
  }
  async retireScene(): Promise<SceneRetireResult> {
    return { kind: 'retired' };
  }
}

/** Sentinel-2 L2A since processing baseline 04.00: reflectance = DN * 0.0001 - 0.1. */
const N0400 = { scale: 0.0001, offset: -0.1 };

describe('unscale and the feature row', () => {
  let b: LocalBackend | undefined;
  afterEach(() => b?.close());

  it('gives the row the statistics of the unscaled NDVI the tile holds, not of the raw DN', async () => {
    const params: ProcessingParams = { ...DEFAULT_PARAMS, tile_px: 128, unscale: true, scale_offset: { B04: N0400, B08: N0400 } };
    const fixture = await localTileFixture('tessera-unscale-row-', params);
    b = fixture.b;
    const { job } = fixture;
    const sink = new RecordingSink();
    expect((await processTile({ ...b, sink }, fixtureSettings('w1'), job)).kind).toBe('written');
    const row = sink.rows.get(job.jobKey) as TileFeature;

    // The NDVI of the physical values, computed here from the scene's DN.
    const scene = await openGeoTiff(b.sources, job.source.key);
    const [red, nir] = await scene.readWindow(job.window, [1, 2]);
    const physical: number[] = [];
    const raw: number[] = [];
    for (let k = 0; k < job.window.width * job.window.height; k++) {
      const r = red?.[k] as number;
      const n = nir?.[k] as number;
      if (r === scene.noData || n === scene.noData) continue;
      const rr = Math.fround(r * N0400.scale + N0400.offset);
      const nn = Math.fround(n * N0400.scale + N0400.offset);
      physical.push(Math.fround((nn - rr) / (nn + rr)));
      raw.push(Math.fround((n - r) / (n + r)));
    }
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
    expect(row.count).toBe(physical.length);
    expect(row.mean).toBeCloseTo(mean(physical), 9);
    expect(row.min).toBe(Math.min(...physical));
    expect(row.max).toBe(Math.max(...physical));
    // The offset does not cancel in the ratio: raw-DN statistics are another answer.
    expect(Math.abs((row.mean as number) - mean(raw))).toBeGreaterThan(0.01);

    // And the row is the tile's own pixels' statistics.
    const tile = await openGeoTiff(b.outputs, job.outputKey);
    const [pixels] = await tile.readWindow({ x: 0, y: 0, width: tile.width, height: tile.height }, [1]);
    expect(tileStatistics(pixels as Float32Array, tile.noData as number)).toEqual({
      count: row.count,
      mean: row.mean,
      min: row.min,
      max: row.max,
    });
  });
});
