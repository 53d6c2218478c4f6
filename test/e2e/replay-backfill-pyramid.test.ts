import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import { createLocalBackend } from '../../functions/local/compose.js';
import type { MainJobSummary } from '../../functions/local/main-job.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { manifestTiles } from '../../shared/app/verify/scene-tiles.js';

/**
 * `tessera replay` and `tessera backfill` on the local backend, on a zoom pyramid of PNG tiles (docs/pyramids.md):
 * a replay of a tile of any zoom (a parent too) changes nothing; a zoom outside the pyramid is refused; backfill
 * --policy skip rebuilds a parent lost with its claim row from its children; --policy overwrite is refused before any
 * job is sent. The same checks `tessera verify` runs against a cloud stack (test/e2e/verify.test.ts).
 */

async function tessera(argv: string[], cwd: string): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t), cwd });
  return { code, out, err };
}

const lastJson = (out: string) => JSON.parse(out.trim().split('\n').pop() as string) as Record<string, unknown>;

let dir: string;
let backendDir: string;
let summary: MainJobSummary;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tessera-replay-pyramid-'));
  backendDir = join(dir, 'backend');
  const argv = ['run', '--demo', '--size', '256', '--tile', '256', '--tms', 'WebMercatorQuad', '--zoom', '13-15'];
  const r = await tessera([...argv, '--format', 'png', '--rescale=-1,1', '--workers', '2', '--json', '--dir', backendDir], dir);
  expect(r.code, r.err).toBe(0);
  summary = lastJson(r.out) as unknown as MainJobSummary;
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('tessera replay and backfill on a zoom pyramid (local backend)', () => {
  it('replays a tile of the highest zoom (default), of a zoom below and of the lowest: each stops at its claim', async () => {
    expect(summary).toMatchObject({ ok: true, zoom: 15, minZoom: 13 });
    for (const zoom of [undefined, '14', '13']) {
      const r = await tessera(['replay', ...(zoom === undefined ? [] : ['--zoom', zoom]), '--json', '--dir', backendDir], dir);
      const result = lastJson(r.out);
      expect([zoom, r.code, result.zoom, result.unchanged, result.stoppedAtClaim, result.deadLettered], r.err).toEqual([
        zoom,
        0,
        zoom === undefined ? 15 : Number(zoom),
        true,
        1,
        0,
      ]);
      expect(result.outputKey).toMatch(new RegExp(`/WebMercatorQuad/${zoom ?? 15}/\\d+/\\d+\\.png$`));
    }
  }, 60_000);

  it('refuses a zoom outside the pyramid, naming its zooms', async () => {
    const r = await tessera(['replay', '--zoom', '12', '--dir', backendDir], dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain("--zoom 12 is not a zoom of the last run's pyramid, whose zooms are 13 to 15");
  });

  it('backfill --policy skip rebuilds a lost parent from its children, byte for byte; overwrite is refused', async () => {
    const b = createLocalBackend(backendDir);
    let key: string;
    let bytes: Uint8Array;
    try {
      const m = await readSceneManifest(b.outputs, summary.sceneKey);
      // The lowest zoom's tile and its claim row gone: a parent whose message was lost, as a crash leaves it.
      const root = manifestTiles(m).at(-1);
      if (root === undefined) throw new Error('no tile');
      key = root.outputKey;
      bytes = new Uint8Array(await b.outputs.get(key));
      const head = await b.outputs.head(key);
      const row = await b.claims.get(root.jobKey);
      expect(row?.state).toBe('COMMITTED');
      expect((await b.outputs.deleteIfVersion(key, head?.version as string)).kind).toBe('deleted');
      expect((await b.claims.deleteIf({ jobId: root.jobKey, state: 'COMMITTED', owner: row?.owner as string })).kind).toBe('deleted');
    } finally {
      b.close();
    }
    const skip = await tessera(['backfill', '--policy', 'skip', '--workers', '1', '--json', '--dir', backendDir], dir);
    expect(lastJson(skip.out), skip.err).toMatchObject({ policy: 'skip', written: 1, missingTiles: 0 });
    const after = createLocalBackend(backendDir);
    try {
      expect(Buffer.compare(new Uint8Array(await after.outputs.get(key)), bytes)).toBe(0);
    } finally {
      after.close();
    }
    const overwrite = await tessera(['backfill', '--policy', 'overwrite', '--windows', '0_0', '--dir', backendDir], dir);
    expect(overwrite.code).toBe(1);
    expect(overwrite.err).toContain("a pyramid's tiles are not repaired in place");
  }, 60_000);
});
