import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { main } from '../../cli/main.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { requireEndpoints } from '../support/global-setup.js';

// `tessera run --sink` end to end on a real PostGIS: worker processes, duplicate deliveries and a stolen lease
// (the main job injects both), and the sink still holds exactly one row per tile.
const postgres = requireEndpoints(inject('emulators'), 'postgres');
const pool = new pg.Pool({ connectionString: postgres.url, max: 2 });
afterAll(() => pool.end());

/** Run `tessera run ... --sink` in its own folder and read its scene's roll-up back from PostGIS. */
async function runWithSink(extra: readonly string[]) {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-sink-e2e-'));
  let out = '';
  const sinkUrl = postgres.url.replace(/^postgres:/, 'postgis:');
  const before = process.env[ENV.featureSink];
  try {
    const code = await main(
      ['run', '--size', '512', '--tile', '128', '--seed', '5', '--fresh', '--json', '--dir', dir, '--sink', sinkUrl, ...extra],
      {
        stdout: (t) => (out += t),
        stderr: () => {},
        cwd: tmpdir(),
      },
    );
    expect(code).toBe(0);
  } finally {
    if (before === undefined) delete process.env[ENV.featureSink];
    else process.env[ENV.featureSink] = before;
  }
  const summary = JSON.parse(out.trim().split('\n').at(-1) as string) as {
    sceneKey: string;
    windows: number;
    duplicatesDelivered: number;
    leasesStolen: number;
  };
  const r = await pool.query<{ rows: string; jobs: string; area: number; px: string; means: number }>(
    `SELECT count(*) AS rows, count(DISTINCT job_id) AS jobs, sum(ST_Area(footprint)) AS area, sum(pixel_count) AS px,
            sum(ndvi_mean * pixel_count) AS means
       FROM tile_features WHERE scene_key = $1`,
    [summary.sceneKey],
  );
  return { summary, rollUp: r.rows[0] };
}

describe('tessera run --sink postgis://...', () => {
  it('writes one feature row per tile despite duplicates and a stolen lease; the roll-up equals a clean single run', async () => {
    const clean = await runWithSink(['--workers', '1']);
    const storm = await runWithSink(['--workers', '2', '--demo', '--demo-duplicates', '0.5']);
    expect(storm.summary.windows).toBe(16);
    expect(storm.summary.duplicatesDelivered).toBeGreaterThanOrEqual(8);
    expect(storm.summary.leasesStolen).toBe(1);
    // 512 x 512 pixels of 10 m (the synthetic scene): 26 214 400 m² in EPSG:32631.
    expect(storm.rollUp).toMatchObject({ rows: '16', jobs: '16', area: 512 * 512 * 100 });
    expect(storm.rollUp).toEqual(clean.rollUp);
  }, 180_000);

  it('refuses a malformed sink URL before any tile runs', async () => {
    let err = '';
    const code = await main(['run', '--sink', 'mysql://x@y/z', '--dir', mkdtempSync(join(tmpdir(), 'tessera-sink-bad-'))], {
      stdout: () => {},
      stderr: (t) => (err += t),
      cwd: tmpdir(),
    });
    expect(code).not.toBe(0);
    expect(err).toMatch(/postgis:\/\//);
  });
});
