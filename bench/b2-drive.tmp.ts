// TEMPORARY (helper B2): print the tile-worker input for a profile run. Deleted before the report.
import { DEFAULT_PARAMS } from '../shared/domain/runtime-config.js';
import { tileGrid } from '../shared/domain/tile-grid.js';
import { tilingParams } from '../shared/domain/tiling-params.js';
import { benchParams, spreadWindows } from './lib/jobs.js';
import { ensureScene, freshRunDir } from './lib/scenes.js';
const [compression, level, dirName] = [process.argv[2] ?? 'DEFLATE', Number(process.argv[3] ?? 6), process.argv[4] ?? 'b2'];
const scene = await ensureScene(4096, 4096);
const params = benchParams(`throughput-${compression}-${level}`, { output: { ...(DEFAULT_PARAMS.output as object), compression, level } } as never);
const tiling = tilingParams(params);
const windows = spreadWindows(tileGrid(4096, 4096, tiling.tilePx), 16);
process.stdout.write(JSON.stringify({ dir: freshRunDir(dirName), scenePath: scene, params, windows, profile: process.argv[5] === 'profile' }));
