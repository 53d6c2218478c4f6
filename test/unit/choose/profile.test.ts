import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chooseCommand } from '../../../cli/commands/choose.js';
import { runCommand } from '../../../cli/commands/run.js';

// `tessera run --profile` measures what `tessera choose` needs: seconds and peak memory per tile.

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tessera-profile-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function run(...argv: string[]): Promise<{ code: number; stdout: string }> {
  let stdout = '';
  const code = await runCommand(argv, { stdout: (s) => (stdout += s), stderr: () => {}, cwd: dir });
  return { code, stdout };
}

describe('tessera run --profile', () => {
  it('measures one worker rendering every tile, with no injected duplicates or stalls', async () => {
    const { code, stdout } = await run('--profile', '--size', '512', '--tile', '128', '--dir', 'p1', '--fresh', '--json');
    expect(code).toBe(0);
    const summary = JSON.parse(stdout.trim().split('\n').pop() as string);
    expect(summary).toMatchObject({ windows: 16, tilesWritten: 16, duplicatesDelivered: 0, leasesStolen: 0 });
    const p = summary.profile;
    expect(p).toMatchObject({ workers: 1, tiles: 16 });
    expect(p.secondsPerTile).toBeGreaterThan(0);
    // One worker: the tile phase is the tiles one after another.
    expect(p.secondsPerTile * p.tiles * 1000).toBeCloseTo(p.tilePhaseMs, -1);
    // The process's peak resident memory: at least what is resident now (the test runner's heap included).
    expect(p.peakMemoryMb).toBeGreaterThanOrEqual(Math.floor(process.memoryUsage().rss / 2 ** 20 / 2));
  });

  // The parent hands the scene's settled hash to its workers (FsObjectStore.settledHashes): none of them reads the
  // whole scene again to hash it for its first pinned read (a 10 GB scene would be 10 GB of SHA-256 per worker).
  it('its worker processes hash no byte of the scene: the fan-out settled its hash and handed it on', async () => {
    const { code, stdout } = await run('--profile', '--workers', '2', '--size', '512', '--tile', '128', '--dir', 'p3', '--fresh', '--json');
    expect(code).toBe(0);
    const summary = JSON.parse(stdout.trim().split('\n').pop() as string);
    expect(summary).toMatchObject({ tilesWritten: 16, profile: { workers: 2, tiles: 16, workerSourceBytesHashed: 0 } });
  });

  it('prints flags that tessera choose accepts', async () => {
    const { code, stdout } = await run('--profile', '--size', '256', '--tile', '128', '--dir', 'p2', '--fresh');
    expect(code).toBe(0);
    const flags = /for tessera choose: (--runtime \S+ --memory \S+)/.exec(stdout)?.[1];
    expect(flags).toBeDefined();
    const argv = ['--data', 'aws:eu-west-1', ...(flags as string).split(' '), '--json'];
    let out = '';
    expect(await chooseCommand(argv, { stdout: (s) => (out += s), stderr: () => {}, cwd: dir })).toBe(0);
    expect(JSON.parse(out).choices[0]).toMatchObject({ cloud: 'aws', region: 'eu-west-1' });
  });

  it('adds no profile to a plain run', async () => {
    const { stdout } = await run('--size', '256', '--tile', '128', '--dir', 'p3', '--fresh', '--json');
    expect(JSON.parse(stdout.trim().split('\n').pop() as string).profile).toBeUndefined();
  });
});
