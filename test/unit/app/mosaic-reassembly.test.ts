import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { createLocalBackend, type LocalBackend } from '../../../functions/local/compose.js';
import { assembleMosaic } from '../../../shared/app/assemble-mosaic.js';
import type { Backend } from '../../../shared/app/backend.js';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import { processTile } from '../../../shared/app/process-tile.js';
import { readSceneManifest } from '../../../shared/app/scene-manifest.js';
import { TILE_VERSIONS_PROPERTY } from '../../../shared/app/stac-output.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { makeTileJob } from '../../../shared/app/tile-job.js';
import { MosaicChangedError, OutputOccupiedError } from '../../../shared/domain/errors.js';
import { outputKeys, type ProcessingParams } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { windows } from '../../../shared/domain/tile-grid.js';
import type { ObjectStore, PutIfMatchResult, PutOptions } from '../../../shared/ports/object-store.port.js';
import { FakeClock } from '../../support/fake-clock.js';
import { putSyntheticScene } from '../../support/local-scene.js';
import { fixtureSettings } from '../../support/tile-fixture.js';

// Issue 25 item 6: after an overwrite repair the COG mosaic and the output STAC Item were stale, and a re-assembly
// failed with write-occupied. A re-assembly now replaces them on condition of the versions it read; other bytes it
// cannot show stale stay an alarm, and a change while it runs makes it replace nothing.

const params: ProcessingParams = { ...DEFAULT_PARAMS, tile_px: 128, mosaic: 'cog' };

/** An outputs store whose calls to one method for one key first run `before` (another writer acting at that instant). */
function meddling(inner: ObjectStore, method: 'putIfAbsent' | 'putIfMatch', key: string, before: () => Promise<void>): ObjectStore {
  let done = false;
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === method)
        return async (k: string, body: Uint8Array, ...rest: unknown[]): Promise<unknown> => {
          if (k === key && !done) {
            done = true;
            await before();
          }
          return method === 'putIfAbsent'
            ? target.putIfAbsent(k, body, rest[0] as PutOptions)
            : target.putIfMatch(k, body, rest[0] as string, rest[1] as PutOptions);
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe('assembleMosaic after a tile is replaced (a repair)', () => {
  let b: LocalBackend;
  let telemetry: JsonTelemetry;
  let scene: string;
  const tile = (row: number, col: number) => outputKeys.tile(scene, { row, col });
  /** The tile at (0, 0) as its job rendered it. */
  let original00: Uint8Array;
  /**
   * What a repair does to the tile at (0, 0): other valid bytes of its size at a new version (by default
   * 0_1's, the one other 128 x 128 window; the bad writer's and the repair's roles do not matter here).
   */
  const replaceTile00 = async (bytes?: Uint8Array): Promise<PutIfMatchResult> => {
    const seen = (await b.outputs.head(tile(0, 0)))?.version as string;
    return b.outputs.putIfMatch(tile(0, 0), bytes ?? (await b.outputs.get(tile(0, 1))), seen);
  };
  const itemVersions = async () =>
    (JSON.parse(new TextDecoder().decode(await b.outputs.get(outputKeys.stacItem(scene)))) as { properties: Record<string, unknown> })
      .properties[TILE_VERSIONS_PROPERTY];

  beforeEach(async () => {
    telemetry = new JsonTelemetry();
    b = createLocalBackend(mkdtempSync(join(tmpdir(), 'tessera-reassembly-')), { clock: new FakeClock(), telemetry });
    const source = await putSyntheticScene(b.sources, 'local-sources', 'scenes/s.tif', { width: 300, height: 200 });
    scene = (await fanOutScene(b, { source, params })).sceneKey;
    const manifest = await readSceneManifest(b.outputs, scene);
    for (const w of windows(manifest.grid))
      await processTile(b, fixtureSettings('w1'), makeTileJob(scene, source, params, manifest.grid, w));
    expect((await assembleMosaic(b, scene)).result).toBe('written');
    original00 = await b.outputs.get(tile(0, 0));
    return () => b.close();
  });

  it('replaces the COG mosaic and the STAC Item on condition of their versions; a duplicate re-assembly is already-present', async () => {
    const before = { cog: await b.outputs.head(outputKeys.cogMosaic(scene)), versions: await itemVersions() };
    expect(before.versions).toMatch(/^[0-9a-f]{64}$/);
    expect((await replaceTile00()).kind).toBe('written');
    const sent: string[] = [];
    const watched: Backend = {
      ...b,
      outputs: meddling(b.outputs, 'putIfMatch', outputKeys.cogMosaic(scene), async () => {
        sent.push('cog');
      }),
    };
    expect((await assembleMosaic(watched, scene)).result).toBe('replaced');
    expect(sent).toEqual(['cog']);
    expect((await b.outputs.head(outputKeys.cogMosaic(scene)))?.version).not.toBe(before.cog?.version);
    expect(await itemVersions()).not.toBe(before.versions);
    expect(telemetry.counters()).toMatchObject({ 'mosaic-replaced': 2, 'write-occupied': 0 });
    const again = await assembleMosaic(b, scene);
    expect(again.result).toBe('already-present');
    expect(telemetry.counters()).toMatchObject({ 'mosaic-replaced': 2 });
  });

  it('other bytes at the COG key while the tiles are those the item records stay an alarm (write-occupied), nothing replaced', async () => {
    const cog = outputKeys.cogMosaic(scene);
    const seen = (await b.outputs.head(cog))?.version as string;
    const foreign = new TextEncoder().encode('not the mosaic of these tiles');
    expect((await b.outputs.putIfMatch(cog, foreign, seen)).kind).toBe('written');
    await expect(assembleMosaic(b, scene)).rejects.toBeInstanceOf(OutputOccupiedError);
    expect(new TextDecoder().decode(await b.outputs.get(cog))).toBe('not the mosaic of these tiles');
    expect(telemetry.counters()).toMatchObject({ 'write-occupied': 1, 'mosaic-replaced': 0 });
  });

  it('a tile replaced again after the listing (a repair still landing): MosaicChangedError, retryable, nothing replaced', async () => {
    await replaceTile00();
    const cog = outputKeys.cogMosaic(scene);
    const stale = await b.outputs.head(cog);
    // The second repair lands after this assembly listed and read the tiles, before it writes.
    const racing: Backend = { ...b, outputs: meddling(b.outputs, 'putIfAbsent', cog, async () => void (await replaceTile00(original00))) };
    const error = await assembleMosaic(racing, scene).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MosaicChangedError);
    expect(error).toMatchObject({ code: 'MOSAIC_CHANGED', retryable: true });
    expect((error as Error).message).toContain(tile(0, 0));
    expect(await b.outputs.head(cog)).toEqual(stale);
    // The second write put the rendered bytes back (what the repair is for): the mosaic in place, assembled
    // from the rendered tiles, is the mosaic of the tiles now, so the next assembly finds it already-present;
    // had the first assembly replaced it, it would now show the bad tile.
    expect((await assembleMosaic(b, scene)).result).toBe('already-present');
    expect(telemetry.counters()).toMatchObject({ 'mosaic-replaced': 0, 'write-occupied': 0 });
  });

  it('a COG replaced by another assembly between this one’s refusal and its replacement: MosaicChangedError, theirs kept', async () => {
    await replaceTile00();
    const cog = outputKeys.cogMosaic(scene);
    const theirs = new TextEncoder().encode('another assembly got there first');
    const racing: Backend = {
      ...b,
      outputs: meddling(b.outputs, 'putIfMatch', cog, async () => {
        const at = (await b.outputs.head(cog))?.version as string;
        await b.outputs.putIfMatch(cog, theirs, at);
      }),
    };
    await expect(assembleMosaic(racing, scene)).rejects.toMatchObject({ code: 'MOSAIC_CHANGED', retryable: true });
    expect(new TextDecoder().decode(await b.outputs.get(cog))).toBe('another assembly got there first');
  });
});
