import { beforeEach, describe, expect, it } from 'vitest';
import type { LocalBackend } from '../../../functions/local/compose.js';
import type { Backend } from '../../../shared/app/backend.js';
import { handleTileDelivery } from '../../../shared/app/deliveries.js';
import { fanOutScene, handleFanOutChunk } from '../../../shared/app/fan-out.js';
import { processTile } from '../../../shared/app/process-tile.js';
import { readSceneManifest } from '../../../shared/app/scene-manifest.js';
import type { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { makeTileJob, parseTileJob, type TileJob, toJobMessage } from '../../../shared/app/tile-job.js';
import { canonicalJson } from '../../../shared/domain/canonical-json.js';
import { codeVersion } from '../../../shared/domain/code-version.js';
import { CodeVersionMismatchError, InvalidEventError, InvalidParamsError } from '../../../shared/domain/errors.js';
import { outputKeys, type ProcessingParams, type SourceRef, sceneKey } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { windowAt } from '../../../shared/domain/tile-grid.js';
import { tilingParams } from '../../../shared/domain/tiling-params.js';
import type { ClaimStore } from '../../../shared/ports/claim-store.port.js';
import { openGeoTiff } from '../../../shared/raster/index.js';
import type { FakeClock } from '../../support/fake-clock.js';
import { FIXTURE_LEASE_MS, fixtureSettings, jobBodyOfBuild, localTileFixture } from '../../support/tile-fixture.js';
import { cogLayoutErrors, walkTiff } from '../raster/tiff-walker.js';

const LEASE = FIXTURE_LEASE_MS;
// The default output settings without the default profile's level: these tests name a codec and expect
// that codec's own default level (a level is the codec's: DEFLATE 9 would be no ZSTD or NONE setting).
const { level: _defaultLevel, ...outputWithoutLevel } = DEFAULT_PARAMS.output as Record<string, unknown>;
const params: ProcessingParams = { ...DEFAULT_PARAMS, tile_px: 128, output: outputWithoutLevel };
const settings = fixtureSettings;
const OTHER_BUILD = '0.1.0+0000000000000000';

/** A claim store whose next `n` heartbeats fail as a throttled or unreachable store would. */
function flakyHeartbeats(claims: ClaimStore, n: number): ClaimStore & { readonly failed: () => number } {
  let failed = 0;
  return {
    name: claims.name,
    claim: (r) => claims.claim(r),
    commit: (r) => claims.commit(r),
    get: (id) => claims.get(id),
    list: () => claims.list(),
    deleteIf: (r) => claims.deleteIf(r),
    heartbeat: async (r) => {
      if (failed < n) {
        failed++;
        throw Object.assign(new Error('ThrottlingException: rate exceeded'), { name: 'ThrottlingException' });
      }
      return claims.heartbeat(r);
    },
    failed: () => failed,
  };
}

describe('code version, window geometry, output settings and leases', () => {
  let clock: FakeClock;
  let logs: string[];
  let telemetry: JsonTelemetry;
  let b: LocalBackend;
  let source: SourceRef;
  let job: TileJob;

  beforeEach(async () => {
    ({ clock, logs, telemetry, b, source, job } = await localTileFixture('tessera-versions-', params));
    return () => b.close();
  });
  const events = (event: string) => logs.map((l) => JSON.parse(l) as { level: string; event: string }).filter((l) => l.event === event);

  describe('the code version', () => {
    it('is in every tile job and in its keys: fan-out made them with the running build', () => {
      expect(job.code).toBe(codeVersion());
      expect(job.sceneKey).toBe(sceneKey(source, params, codeVersion()));
      expect(parseTileJob(toJobMessage(job).body)).toEqual(job);
    });

    it('a queued message of another build is refused before its claim: typed poison, counted, WARN, no claim row', async () => {
      const body = jobBodyOfBuild(job, OTHER_BUILD);
      expect(() => parseTileJob(body)).toThrow(CodeVersionMismatchError);
      const v = await handleTileDelivery(b, settings('w1'), { body, deliveryId: 'm1', receiveCount: 1 });
      expect(v.kind).toBe('poison');
      if (v.kind === 'poison') {
        expect(v.error).toBeInstanceOf(CodeVersionMismatchError);
        expect(v.error.message).toContain(OTHER_BUILD);
        expect(v.error.message).toContain(codeVersion());
      }
      expect(telemetry.counters()).toMatchObject({ 'code-version-refused': 1, poison: 1, claimed: 0 });
      expect(events('code-version-refused')).toMatchObject([{ level: 'WARN' }]);
      const rows = [];
      for await (const r of b.claims.list()) rows.push(r);
      expect(rows).toEqual([]);
    });

    it('a message from before code versions (no code field) is refused the same way', async () => {
      const { code: _code, ...old } = JSON.parse(toJobMessage(job).body) as Record<string, unknown>;
      expect(() => parseTileJob(JSON.stringify(old))).toThrow(/made before code versions were bound/);
    });

    it('a fan-out chunk of a scene another build fanned out is refused: its tiles would mix two builds under one key', async () => {
      const manifest = await readSceneManifest(b.outputs, job.sceneKey);
      const otherScene = sceneKey(source, params, OTHER_BUILD);
      await b.outputs.putIfAbsent(
        outputKeys.sceneManifest(otherScene),
        new TextEncoder().encode(JSON.stringify({ ...manifest, sceneKey: otherScene })),
      );
      await expect(handleFanOutChunk(b, { v: 1, kind: 'fan-out-chunk', sceneKey: otherScene, first: 0, count: 1 })).rejects.toThrow(
        CodeVersionMismatchError,
      );
      expect(telemetry.counters()).toMatchObject({ enqueued: 6 });
    });

    it('processTile refuses a job object of another build too (callers that skip parsing)', async () => {
      await expect(processTile(b, settings('w1'), { ...job, code: OTHER_BUILD })).rejects.toThrow(CodeVersionMismatchError);
      expect(await b.claims.get(job.jobKey)).toBeUndefined();
    });
  });

  describe('the window geometry', () => {
    it.each([
      ['width', { width: 45 }],
      ['width of a full window', { width: 128 }],
      ['height', { height: 71 }],
      ['x', { x: 255 }],
      ['y', { y: 0 }],
    ])('a message whose %s differs from the grid is poison before its claim', async (_name, change) => {
      const body = canonicalJson({ ...job, window: { ...job.window, ...change } });
      expect(() => parseTileJob(body)).toThrow(InvalidEventError);
      expect(() => parseTileJob(body)).toThrow(/window 1_2 of the 300x200 grid at 128 px is x=256 y=128 44x72/);
      const v = await handleTileDelivery(b, settings('w1'), { body, deliveryId: 'm1', receiveCount: 1 });
      expect(v.kind).toBe('poison');
      expect(await b.claims.get(job.jobKey)).toBeUndefined();
    });

    it('a message without a grid is poison', () => {
      const { grid: _grid, ...noGrid } = JSON.parse(toJobMessage(job).body) as Record<string, unknown>;
      expect(() => parseTileJob(JSON.stringify(noGrid))).toThrow(/no valid grid/);
    });

    it('a grid that is not the source version’s raster size is poison at the read; nothing is written', async () => {
      // Consistent with itself (the window is what a 301-wide grid gives), but not with the raster.
      const g = { width: 301, height: 200, tilePx: 128, rows: 2, cols: 3, count: 6 };
      const lying = makeTileJob(job.sceneKey, source, params, g, windowAt(g, 1, 2));
      const v = await handleTileDelivery(b, settings('w1'), { body: toJobMessage(lying).body, deliveryId: 'm1', receiveCount: 1 });
      expect(v.kind).toBe('poison');
      if (v.kind === 'poison') expect(v.error.message).toMatch(/names a 301x200 grid, but scenes\/s.tif at its version is 300x200/);
      expect(await b.outputs.head(job.outputKey)).toBeUndefined();
    });
  });

  describe('output settings (every one is in the key, so every one is honoured or refused)', () => {
    it.each(['DEFLATE', 'ZSTD', 'NONE'] as const)(
      'compression %s is honoured: the tile says so and reads back the same pixels',
      async (compression) => {
        const p: ProcessingParams = { ...params, output: { ...(params.output as object), compression } };
        const fan = await fanOutScene(b, { source, params: p });
        const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
        const j = makeTileJob(fan.sceneKey, source, p, manifest.grid, windowAt(manifest.grid, 0, 0));
        expect((await processTile(b, settings('w1'), j)).kind).toBe('written');
        const bytes = await b.outputs.get(j.outputKey);
        const { ifds } = walkTiff(bytes);
        // TIFF tag 259 Compression (8 Adobe DEFLATE, 50000 ZSTD, 1 none) and 317 Predictor (3 floating point; absent is 1, none), on every level.
        for (const ifd of ifds) {
          expect(ifd.tags.get(259)).toEqual([{ DEFLATE: 8, ZSTD: 50000, NONE: 1 }[compression]]);
          expect(ifd.tags.get(317) ?? [1]).toEqual([compression === 'NONE' ? 1 : 3]);
        }
        expect(cogLayoutErrors(bytes)).toEqual([]);
        const tile = await openGeoTiff(b.outputs, j.outputKey);
        const [pixels] = await tile.readWindow({ x: 0, y: 0, width: 8, height: 8 }, [1]);
        // The same band math under the other compression: identical pixels.
        const q: ProcessingParams = {
          ...params,
          output: { ...(params.output as object), compression: compression === 'NONE' ? 'DEFLATE' : 'NONE' },
        };
        const fan2 = await fanOutScene(b, { source, params: q });
        const j2 = makeTileJob(fan2.sceneKey, source, q, manifest.grid, windowAt(manifest.grid, 0, 0));
        await processTile(b, settings('w1'), j2);
        const [other] = await (await openGeoTiff(b.outputs, j2.outputKey)).readWindow({ x: 0, y: 0, width: 8, height: 8 }, [1]);
        expect(Array.from(pixels as Float32Array)).toEqual(Array.from(other as Float32Array));
      },
    );

    it.each([
      ['compression', 'LZW'],
      ['compression', 'LERC'],
      ['compression', 'deflate'],
      ['dtype', 'uint8'],
      ['dtype', 'int16'],
      ['dtype', 'float64'],
      ['format', 'GTiff'],
    ])('output.%s %s is refused at validation with a typed error, before any claim', async (field, value) => {
      const p: ProcessingParams = { ...params, output: { ...(params.output as object), [field]: value } };
      expect(() => tilingParams(p)).toThrow(InvalidParamsError);
      expect(() => tilingParams(p)).toThrow(new RegExp(`output\\.${field} "${value}" is not supported`));
      await expect(fanOutScene(b, { source, params: p })).rejects.toThrow(InvalidParamsError);
      const bad = makeTileJob(job.sceneKey, source, params, job.grid, job.window);
      await expect(processTile(b, settings('w1'), { ...bad, params: p })).rejects.toThrow(InvalidParamsError);
      expect(await b.claims.get(job.jobKey)).toBeUndefined();
    });

    it('float32 and COG (the defaults, and what the writer writes) are accepted', () => {
      expect(tilingParams({ ...params, output: { format: 'COG', dtype: 'float32' } }).compression).toBe('DEFLATE');
    });

    it('an output setting the writer does not know is refused, not silently keyed', () => {
      expect(() => tilingParams({ ...params, output: { ...(params.output as object), zlevel: 9 } })).toThrow(
        /output.zlevel is not a setting/,
      );
    });

    it("each codec's level defaults to GDAL's (DEFLATE 6, ZSTD 9); NONE has none", () => {
      const level = (output: object) => tilingParams({ ...params, output: { ...(params.output as object), ...output } }).level;
      expect(level({ compression: 'DEFLATE' })).toBe(6);
      expect(level({ compression: 'ZSTD' })).toBe(9);
      expect(level({ compression: 'ZSTD', level: 1 })).toBe(1);
      expect(level({ compression: 'NONE' })).toBe(0);
    });

    it.each([
      [{ compression: 'DEFLATE', level: 0 }, /output.level \(DEFLATE\) must be between 1 and 9, got 0/],
      [{ compression: 'DEFLATE', level: 10 }, /output.level \(DEFLATE\) must be between 1 and 9, got 10/],
      [{ compression: 'ZSTD', level: 23 }, /output.level \(ZSTD\) must be between 1 and 22, got 23/],
      [{ compression: 'ZSTD', level: 3.5 }, /output.level \(ZSTD\) must be an integer, got 3.5/],
      [{ compression: 'ZSTD', level: '3' }, /output.level \(ZSTD\) must be an integer, got "3"/],
      [{ compression: 'NONE', level: 6 }, /output.level has no meaning without compression/],
    ])('output %j is refused at validation with a typed error that says what to do', (output, message) => {
      const p: ProcessingParams = { ...params, output: { ...(params.output as object), ...output } };
      expect(() => tilingParams(p)).toThrow(InvalidParamsError);
      expect(() => tilingParams(p)).toThrow(message);
    });

    it.each([
      ['DEFLATE', 1, 9],
      ['ZSTD', 1, 19],
    ] as const)('%s level %i and %i: other job keys and other bytes, the same pixels', async (compression, low, high) => {
      const tiles = await Promise.all(
        [low, high].map(async (level) => {
          const p: ProcessingParams = { ...params, output: { ...(params.output as object), compression, level } };
          const fan = await fanOutScene(b, { source, params: p });
          const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
          const j = makeTileJob(fan.sceneKey, source, p, manifest.grid, windowAt(manifest.grid, 0, 0));
          expect((await processTile(b, settings('w1'), j)).kind).toBe('written');
          const [pixels] = await (await openGeoTiff(b.outputs, j.outputKey)).readWindow({ x: 0, y: 0, width: 64, height: 64 }, [1]);
          return { key: j.jobKey, bytes: await b.outputs.get(j.outputKey), pixels: Array.from(pixels as Float32Array) };
        }),
      );
      const [a, z] = tiles as [(typeof tiles)[number], (typeof tiles)[number]];
      expect(a.key).not.toBe(z.key);
      expect(Buffer.from(a.bytes).equals(Buffer.from(z.bytes))).toBe(false);
      expect(a.pixels).toEqual(z.pixels);
    });
  });

  describe('the lease during a long render', () => {
    it('a render slower than the lease keeps its lease by heartbeats every lease/3; nobody takes it over', async () => {
      let rival: string | undefined;
      const r = await processTile(
        b,
        settings('slow', {
          hooks: {
            afterClaim: async () => {
              // 2.5 leases of rendering with the process alive: the keeper's timer runs.
              await clock.advanceRunning(2.5 * LEASE);
              rival = (await processTile(b, settings('rival'), job)).kind;
            },
          },
        }),
        job,
      );
      expect(rival).toBe('claim-rejected');
      expect(r.kind).toBe('written');
      expect(await b.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED', owner: 'slow' });
      expect(telemetry.counters()).toMatchObject({ 'lease-taken-over': 0, 'lease-stolen': 0, committed: 1, 'heartbeat-failed': 0 });
      expect(clock.pendingTimers()).toBe(0);
    });

    it('one transient heartbeat error does not throw the finished tile away', async () => {
      const claims = flakyHeartbeats(b.claims, 1);
      const backend: Backend = { ...b, claims };
      const r = await processTile(backend, settings('w1', { hooks: { afterClaim: () => clock.advanceRunning(0.9 * LEASE) } }), job);
      expect(r.kind).toBe('written');
      expect(claims.failed()).toBe(1);
      expect(await b.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED', owner: 'w1' });
      expect(telemetry.counters()).toMatchObject({ 'heartbeat-failed': 1, written: 1, committed: 1 });
      expect(events('heartbeat-failed')).toMatchObject([{ level: 'WARN' }]);
    });

    it('a create-only write goes on when every heartbeat failed: the commit still checks ownership', async () => {
      const claims = flakyHeartbeats(b.claims, 1_000);
      const r = await processTile(
        { ...b, claims },
        settings('w1', { hooks: { afterClaim: () => clock.advanceRunning(0.9 * LEASE) } }),
        job,
      );
      expect(r.kind).toBe('written');
      expect(await b.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED' });
    });

    it('a repair whose lease was taken by another owner aborts before the overwrite (lease-lost, acked)', async () => {
      await processTile(b, settings('w1'), job);
      const v1 = (await b.outputs.head(job.outputKey))?.version as string;
      const repair = makeTileJob(job.sceneKey, source, params, job.grid, job.window, { kind: 'overwrite', expectedVersion: v1 });
      let takeover: string | undefined;
      const r = await processTile(
        b,
        settings('repair-a', {
          hooks: {
            afterClaim: async () => {
              // A frozen process: no heartbeat runs while its lease lapses and another repair takes it.
              clock.advance(LEASE + 1);
              takeover = (await processTile(b, settings('repair-b', { hooks: { afterClaim: async () => {} } }), repair)).kind;
            },
          },
        }),
        repair,
      );
      // The render equals the tile at the expected version: the repair's effect is in place, nothing is written.
      expect(takeover).toBe('already-present');
      expect(r).toMatchObject({ kind: 'lease-lost' });
      expect(telemetry.counters()).toMatchObject({ 'version-mismatch': 0 });
      expect(events('heartbeat-lost')).toMatchObject([{ level: 'WARN' }]);
      expect(events('repair-abandoned')).toMatchObject([{ level: 'WARN' }]);
      const v = await handleTileDelivery(b, settings('x'), { body: toJobMessage(repair).body, deliveryId: 'd', receiveCount: 1 });
      expect(v.kind).toBe('ack');
    });

    it('a repair that cannot confirm its lease before the overwrite writes nothing and asks for a retry', async () => {
      await processTile(b, settings('w1'), job);
      const v1 = (await b.outputs.head(job.outputKey))?.version as string;
      const before = await b.outputs.head(job.outputKey);
      const repair = makeTileJob(job.sceneKey, source, params, job.grid, job.window, { kind: 'overwrite', expectedVersion: v1 });
      const claims = flakyHeartbeats(b.claims, 1);
      const v = await handleTileDelivery({ ...b, claims }, settings('w2'), {
        body: toJobMessage(repair).body,
        deliveryId: 'd',
        receiveCount: 1,
      });
      expect(v.kind).toBe('retry');
      if (v.kind === 'retry') expect(v.error.name).toBe('LeaseUnconfirmedError');
      expect(await b.outputs.head(job.outputKey)).toEqual(before);
    });
  });
});
