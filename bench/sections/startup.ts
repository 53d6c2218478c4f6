import { join } from 'node:path';
import { buildCli } from '../lib/built-cli.js';
import { REPO_ROOT, run } from '../lib/child.js';
import { type Row, type SectionResult, times } from '../lib/report.js';
import { freshRunDir } from '../lib/scenes.js';
import { fmt, fmtSummary, type Summary, summarize } from '../lib/stats.js';

export interface StartupConfig {
  /** `tessera --help` runs per path, after one warm-up each. */
  readonly helpReps: number;
  /** 4-tile `tessera run` runs per path, after one warm-up each (it writes the synthetic scene). */
  readonly runReps: number;
}

/** Issue 27 section 1: `tessera --help` under 0.3 s. */
const HELP_TARGET_S = 0.3;
/** Issue 27 section 1 and issue 30 target 4: a 4-tile run under 1 s. */
const RUN_TARGET_S = 1;
/** 512^2 in 256-pixel tiles: 4 tiles. */
const RUN_ARGS = ['run', '--size', '512', '--tile', '256', '--fresh', '--json'];
const TILES = 4;

interface Path {
  readonly name: string;
  readonly label: string;
  /** Node arguments before the tessera arguments. */
  readonly argv: readonly string[];
}

/**
 * Section "startup" (docs/packages.md): the wall time a user waits for `tessera --help` and for a 4-tile
 * `tessera run`, from `spawn` to exit, on the built CLI as the package installs it (bin/tessera.mjs importing
 * lib/cli.js, on this Node), against the path from source side by side: `npm run tessera`
 * (scripts/node.mjs, tsx compiling cli/main.ts), the named baseline. Runs alternate between the two.
 */
export async function startup(cfg: StartupConfig, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const { root, build: built } = await buildCli(freshRunDir('startup'));
  const jsBytes = Object.entries(built.outputs)
    .filter(([f]) => f.endsWith('.js'))
    .reduce((n, [, b]) => n + b, 0);
  log(`  built the CLI in ${built.ms.bundle} ms: ${fmt(jsBytes / 1024)} KiB of JavaScript`);

  const paths: readonly Path[] = [
    { name: 'built', label: 'built CLI (bin/tessera.mjs -> lib/cli.js)', argv: [join(root, 'bin', 'tessera.mjs')] },
    {
      name: 'tsx',
      label: 'tsx dev path (npm run tessera: scripts/node.mjs tsx cli/main.ts)',
      argv: [join(REPO_ROOT, 'scripts', 'node.mjs'), 'tsx', join(REPO_ROOT, 'cli', 'main.ts')],
    },
  ];
  const broken: string[] = [];
  const dataDirs = Object.fromEntries(paths.map((p) => [p.name, join(root, '..', `data-${p.name}`)]));

  /** One timed run; a run that does not do its job breaks the section. */
  const once = async (path: Path, args: readonly string[]): Promise<number> => {
    const r = await run(process.execPath, [...path.argv, ...args], { timeoutMs: 120_000 });
    if (args[0] === '--help') {
      if (!r.stdout.includes('Usage: tessera <command>')) broken.push(`${path.name} --help printed no usage: ${r.stdout.slice(0, 200)}`);
    } else {
      const summary = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { ok?: boolean; windows?: number; tilesWritten?: number };
      if (summary.ok !== true || summary.windows !== TILES || summary.tilesWritten !== TILES)
        broken.push(`${path.name} run did not write ${TILES} tiles and a mosaic: ${JSON.stringify(summary)}`);
    }
    return r.wallMs / 1000;
  };

  const measure = async (args: (p: Path) => readonly string[], reps: number): Promise<Record<string, Summary>> => {
    const samples: Record<string, number[]> = Object.fromEntries(paths.map((p) => [p.name, []]));
    for (const p of paths) await once(p, args(p)); // warm-up: tsx's cache, the synthetic scene, the page cache
    for (let i = 0; i < reps; i++) {
      for (const p of i % 2 === 0 ? paths : [...paths].reverse()) samples[p.name]?.push(await once(p, args(p)));
    }
    return Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, summarize(v)]));
  };

  const help = await measure(() => ['--help'], cfg.helpReps);
  log(`  --help: built ${fmtSummary(help.built as Summary, 's')}, tsx ${fmtSummary(help.tsx as Summary, 's')}`);
  const runs = await measure((p) => [...RUN_ARGS, '--dir', dataDirs[p.name] as string], cfg.runReps);
  log(`  4-tile run: built ${fmtSummary(runs.built as Summary, 's')}, tsx ${fmtSummary(runs.tsx as Summary, 's')}`);

  const row = (metric: string, target: number, s: Record<string, Summary>): Row => {
    const b = s.built as Summary;
    const t = s.tsx as Summary;
    const pass = b.median < target;
    return {
      section: 'startup',
      metric,
      backend: 'local',
      target: `< ${target} s`,
      measured: `${fmtSummary(b, 's')}; tsx dev path ${fmtSummary(t, 's')}`,
      ratio: `${times(t.median / b.median)} faster than tsx`,
      status: pass ? 'PASS' : 'MISS',
      note: pass
        ? `${paths[0]?.label}, on this Node; baseline ${paths[1]?.label}`
        : `the built CLI's median is over ${target} s: profile it with node --cpu-prof (docs/packages.md, "Start-up")`,
    };
  };
  return {
    name: 'startup',
    rows: [
      row('`tessera --help`, wall time from spawn to exit', HELP_TARGET_S, help),
      row(`\`tessera run\`, ${TILES} tiles (512^2 synthetic scene, --fresh), wall time from spawn to exit`, RUN_TARGET_S, runs),
    ],
    broken: [...new Set(broken)],
    details: { help, run: runs, builtJsBytes: jsBytes, builtFiles: Object.keys(built.outputs).length, node: process.version },
    durationSec: (performance.now() - started) / 1000,
  };
}
