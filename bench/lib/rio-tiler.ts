import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { run } from './child.js';
import { BenchSetupError, gdalScript } from './gdal.js';
import { BENCH_DIR } from './scenes.js';

/**
 * rio-tiler, the library behind TiTiler, from PyPI at pinned versions: the pyramid section's second baseline
 * (bench/gdal/rio_tiler_pyramid.py). rasterio's wheel brings its own GDAL, so nothing else is needed from apt.
 */
export const RIO_TILER_PINS = {
  'rio-tiler': '9.4.12',
  rasterio: '1.4.4',
  morecantile: '7.1.0',
  numpy: '2.4.6',
  numexpr: '2.14.2',
} as const;

/**
 * Its own virtualenv, beside the cached scenes (gitignored), not the project's `.venv`: that one holds moto at the
 * version the AWS emulator tests were checked with (scripts/emulators/aws.mjs), and rio-tiler's dependencies
 * (pydantic, numpy) must not move it.
 */
export const RIO_TILER_VENV = join(BENCH_DIR, 'rio-tiler-venv');

export interface RioTiler {
  /** The virtualenv's Python, which imports rio_tiler. */
  readonly python: string;
  /** The installed versions of {@link RIO_TILER_PINS}' packages. */
  readonly versions: Readonly<Record<string, string>>;
}

const venvPython = join(RIO_TILER_VENV, 'bin', 'python');

function installed(): Record<string, string> | undefined {
  if (!existsSync(venvPython)) return undefined;
  const probe =
    'import importlib.metadata as m, json, rio_tiler, rasterio; ' +
    `print(json.dumps({p: m.version(p) for p in ${JSON.stringify(Object.keys(RIO_TILER_PINS))}}))`;
  const r = spawnSync(venvPython, ['-c', probe], { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  try {
    return JSON.parse(r.stdout.trim()) as Record<string, string>;
  } catch {
    return undefined;
  }
}

const pinned = (versions: Record<string, string> | undefined): versions is Record<string, string> =>
  versions !== undefined && Object.entries(RIO_TILER_PINS).every(([name, version]) => versions[name] === version);

/**
 * The pinned rio-tiler, installed with pip into {@link RIO_TILER_VENV} when it is not there yet (about 20 s, from
 * PyPI); otherwise fail saying what to install.
 */
export async function ensureRioTiler(log: (line: string) => void): Promise<RioTiler> {
  const found = installed();
  if (pinned(found)) return { python: venvPython, versions: found };
  const python = process.env.PYTHON ?? 'python3';
  if (!existsSync(venvPython)) {
    log(`rio-tiler: creating the virtualenv ${RIO_TILER_VENV}`);
    try {
      await run(python, ['-m', 'venv', RIO_TILER_VENV], { timeoutMs: 120_000 });
    } catch (cause) {
      throw new BenchSetupError(
        `${python} -m venv ${RIO_TILER_VENV} failed: the pyramid section's rio-tiler baseline needs Python 3.11+ with the venv module ` +
          `(Debian: apt-get install -y python3-venv; or set PYTHON to such an interpreter), then run the benchmark again: ${String(cause)}`,
      );
    }
  }
  const specs = Object.entries(RIO_TILER_PINS).map(([name, version]) => `${name}==${version}`);
  log(`rio-tiler: installing ${specs.join(' ')} into ${RIO_TILER_VENV} with pip (about 20 s)`);
  try {
    await run(venvPython, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', ...specs], { timeoutMs: 900_000 });
  } catch (cause) {
    throw new BenchSetupError(
      `pip could not install ${specs.join(' ')} into ${RIO_TILER_VENV} (PyPI must be reachable): ${String(cause)}; ` +
        `install them there by hand (${venvPython} -m pip install ${specs.join(' ')}) and run the benchmark again`,
    );
  }
  const now = installed();
  if (!pinned(now)) {
    throw new BenchSetupError(
      `pip installed ${specs.join(' ')} but ${RIO_TILER_VENV} has ${JSON.stringify(now ?? {})}: remove the folder and run the benchmark again`,
    );
  }
  return { python: venvPython, versions: now };
}

/**
 * Run a bench/gdal/*.py script that imports rio_tiler with {@link RioTiler}'s Python (pinned to one core when `pin`)
 * and return the JSON object it prints last.
 */
export async function runRioTilerScript<T>(rio: RioTiler, name: string, input: unknown, pin = false): Promise<T & { wallMs: number }> {
  const { stdout, wallMs } = await run(rio.python, [gdalScript(name), JSON.stringify(input)], { pin, timeoutMs: 1_800_000 });
  const last = stdout.trim().split('\n').pop() ?? '';
  try {
    return { ...(JSON.parse(last) as T), wallMs };
  } catch (cause) {
    throw new Error(`[bench] ${name} printed no JSON result; its output ended with: ${stdout.slice(-2000)}`, { cause });
  }
}
