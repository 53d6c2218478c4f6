import { fork } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../../cli/main.js';
import { createLocalBackend } from '../../../functions/local/compose.js';
import { notARaster, validArtefact } from '../../support/ingest-fixtures.js';
import type { IngestCrashArgs, IngestCrashPoint } from '../../support/workers/ingest-crash-child.js';

const CHILD = fileURLToPath(new URL('../../support/workers/ingest-crash-child.ts', import.meta.url));
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fresh clone's working directory with one artefact file in it; the backend is the local default (.tessera). */
async function workdir(bytes?: Uint8Array): Promise<string> {
  const cwd = mkdtempSync(join(tmpdir(), 'tessera-ingest-cli-'));
  dirs.push(cwd);
  writeFileSync(join(cwd, 'scene.tif'), bytes ?? (await validArtefact()));
  return cwd;
}

async function cli(cwd: string, ...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { cwd, stdout: (s) => (out += s), stderr: (s) => (err += s) });
  return { code, out, err };
}

const ARGS = ['--href', 'scene.tif', '--source', 'sentinel-2-l2a', '--item-id', 'S2B_T30UXB_20260612'];

/** What the local backend holds: staging and published keys, manifest rows. */
async function state(cwd: string) {
  const b = createLocalBackend(join(cwd, '.tessera'));
  try {
    const list = async (p: string) => {
      const out: string[] = [];
      for await (const h of b.sources.list(p)) out.push(h.key);
      return out;
    };
    const rows = [];
    for await (const r of b.manifest.list()) rows.push(r);
    return { staging: await list('staging/'), published: await list('scenes/'), rows };
  } finally {
    b.close();
  }
}

describe('tessera ingest', () => {
  it('run twice on the same artefact publishes once: exit 0 both times, the second "already-published", no copy', async () => {
    const cwd = await workdir();
    const first = await cli(cwd, 'ingest', ...ARGS, '--json');
    expect(first.code, first.err).toBe(0);
    const a = JSON.parse(first.out);
    expect(Object.keys(a).sort()).toEqual(['checksum', 'key', 'manifest', 'published', 'reason']);
    expect(a).toMatchObject({ published: true, reason: 'published' });
    const second = await cli(cwd, 'ingest', ...ARGS, '--json');
    expect(second.code).toBe(0);
    expect(JSON.parse(second.out)).toEqual({ ...a, published: false, reason: 'already-published' });
    const s = await state(cwd);
    expect(s.published).toEqual([a.key]);
    expect(s.staging).toHaveLength(1);
    expect(s.rows).toHaveLength(1);
    const human = await cli(cwd, 'ingest', ...ARGS);
    expect(human.out).toContain('already published');
    expect((await cli(cwd, 'reconcile', '--manifest', '--json')).code).toBe(0);
  });

  it('the published key tiles as any scene does (run --source-key), and run --fresh keeps the manifest with the sources', async () => {
    const cwd = await workdir();
    const published = JSON.parse((await cli(cwd, 'ingest', ...ARGS, '--json')).out);
    const run = await cli(cwd, 'run', '--fresh', '--source-key', published.key, '--tile', '32', '--workers', '1', '--json');
    expect(run.code, run.err).toBe(0);
    expect(JSON.parse(run.out.trim().split('\n').pop() as string)).toMatchObject({ gridCount: 4 });
    expect((await state(cwd)).rows).toHaveLength(1);
    expect(JSON.parse((await cli(cwd, 'ingest', ...ARGS, '--json')).out).reason).toBe('already-published');
    const missing = await cli(cwd, 'run', '--source-key', 'scenes/nothing-here.tif');
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/no such object in the source store/);
  }, 60_000);

  it('refuses invalid input with a typed message and a non-zero exit; bad options exit 2', async () => {
    const cwd = await workdir(notARaster());
    const bad = await cli(cwd, 'ingest', ...ARGS, '--json');
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.out)).toMatchObject({ published: false, reason: 'invalid', manifest: null, invalid: { what: 'not-a-raster' } });
    expect(bad.err).toMatch(/ArtefactRefusedError \[ARTEFACT_REFUSED\] \(not-a-raster\)/);
    const noSource = await cli(cwd, 'ingest', '--href', 'scene.tif', '--item-id', 'x');
    expect(noSource.code).toBe(1);
    expect(noSource.err).toMatch(/--source is required/);
    const oddSource = await cli(cwd, 'ingest', '--href', 'scene.tif', '--item-id', 'x', '--source', 'Sentinel 2');
    expect(oddSource.err).toMatch(/InvalidIngestRequestError \[INVALID_INGEST_REQUEST\]/);
    expect((await cli(cwd, 'ingest', '--bogus')).code).toBe(2);
    expect((await cli(cwd, 'ingest', '--help')).out).toContain('--stac');
  });

  /**
   * A real `kill -9` at each crash point of a child ingest, then the state it
   * left, then the same command again: it exits 0 and reconcile agrees.
   */
  it.each<[IngestCrashPoint, { staging: number; published: number; rows: number; reconcileBefore: number }]>([
    ['beforeFetch', { staging: 0, published: 0, rows: 0, reconcileBefore: 0 }],
    ['afterStage', { staging: 1, published: 0, rows: 0, reconcileBefore: 0 }],
    ['afterValidate', { staging: 1, published: 0, rows: 0, reconcileBefore: 0 }],
    ['afterCopy', { staging: 1, published: 1, rows: 0, reconcileBefore: 1 }],
    ['afterCommit', { staging: 1, published: 1, rows: 1, reconcileBefore: 0 }],
  ])(
    'SIGKILL %s leaves what the design note says, and the next run exits 0',
    async (at, left) => {
      const cwd = await workdir();
      const args: IngestCrashArgs = {
        dir: join(cwd, '.tessera'),
        cwd,
        at,
        request: { kind: 'artefact', source: 'sentinel-2-l2a', externalId: 'S2B_T30UXB_20260612', href: 'scene.tif' },
      };
      const child = fork(CHILD, [JSON.stringify(args)], {
        execArgv: ['--import', TSX_LOADER],
        stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
      });
      const exit = new Promise<NodeJS.Signals | number | null>((r) => child.on('exit', (code, signal) => r(signal ?? code)));
      let out = '';
      await new Promise<void>((resolve, reject) => {
        child.stdout?.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes(`AT ${at}`)) resolve();
        });
        child.on('exit', () => reject(new Error(`the child exited before ${at}: ${out}`)));
      });
      child.kill('SIGKILL');
      expect(await exit).toBe('SIGKILL');

      const s = await state(cwd);
      expect({ staging: s.staging.length, published: s.published.length, rows: s.rows.length }).toEqual({
        staging: left.staging,
        published: left.published,
        rows: left.rows,
      });
      const before = await cli(cwd, 'reconcile', '--manifest', '--json');
      expect(JSON.parse(before.out).objectsWithoutRow).toHaveLength(left.reconcileBefore);
      expect(before.code).toBe(left.reconcileBefore === 0 ? 0 : 1);

      const retry = await cli(cwd, 'ingest', ...ARGS, '--json');
      expect(retry.code, retry.err).toBe(0);
      expect(JSON.parse(retry.out).reason).toBe(at === 'afterCommit' ? 'already-published' : 'published');
      const after = await state(cwd);
      expect([after.published.length, after.rows.length]).toEqual([1, 1]);
      expect((await cli(cwd, 'reconcile', '--manifest')).code).toBe(0);
    },
    60_000,
  );
});
