import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalBackend, type LocalBackend } from '../../functions/local/compose.js';
import type { WorkerSettings } from '../../shared/app/backend.js';
import { fanOutScene } from '../../shared/app/fan-out.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { makeTileJob, type TileJob } from '../../shared/app/tile-job.js';
import { canonicalJson } from '../../shared/domain/canonical-json.js';
import { outputKeys, type ProcessingParams, type SourceRef, sceneKey, tileJobKey } from '../../shared/domain/job-key.js';
import { windowAt } from '../../shared/domain/tile-grid.js';
import { FakeClock } from './fake-clock.js';
import { putSyntheticScene } from './local-scene.js';

export interface LocalTileFixture {
  readonly clock: FakeClock;
  /** Every JSON log line the backend wrote. */
  readonly logs: string[];
  readonly telemetry: JsonTelemetry;
  readonly b: LocalBackend;
  readonly source: SourceRef;
  /** The job of window 1_2, the bottom-right edge window: 300 - 256 = 44 px wide, 200 - 128 = 72 px high (with tile_px 128). */
  readonly job: TileJob;
}

/**
 * A local backend on a fresh folder with a fake clock, a 300 x 200 synthetic
 * scene fanned out, and the tile job of its edge window 1_2 (the unit tests of
 * the tile use cases start here). Close `b` when done.
 */
export async function localTileFixture(prefix: string, params: ProcessingParams): Promise<LocalTileFixture> {
  const clock = new FakeClock();
  const logs: string[] = [];
  const telemetry = new JsonTelemetry((l) => logs.push(l));
  const b = createLocalBackend(mkdtempSync(join(tmpdir(), prefix)), { clock, telemetry });
  const source = await putSyntheticScene(b.sources, 'local-sources', 'scenes/s.tif', { width: 300, height: 200 });
  const fan = await fanOutScene(b, { source, params });
  const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
  const job = makeTileJob(fan.sceneKey, source, params, manifest.grid, windowAt(manifest.grid, 1, 2));
  return { clock, logs, telemetry, b, source, job };
}

/** The lease of the tile use-case unit tests, in FakeClock milliseconds. */
export const FIXTURE_LEASE_MS = 60_000;

/** Worker settings for the unit tests: `owner` with the fixture's lease and an hour's retention. */
export const fixtureSettings = (owner: string, extra: Partial<WorkerSettings> = {}): WorkerSettings => ({
  owner,
  leaseMs: FIXTURE_LEASE_MS,
  retentionMs: 3_600_000,
  ...extra,
});

/** A job's message body as another build would have made it: its keys derived with that build's code version. */
export function jobBodyOfBuild(job: TileJob, code: string): string {
  const scene = sceneKey(job.source, job.params, code);
  return canonicalJson({
    ...job,
    code,
    sceneKey: scene,
    jobKey: tileJobKey(scene, job.window),
    outputKey: outputKeys.tile(scene, job.window),
  });
}
