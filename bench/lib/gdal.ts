import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { run } from './child.js';

/** GDAL's command-line tools and the Python that runs gdal_calc.py (it has GDAL's bindings and numpy). */
export interface Gdal {
  readonly version: string;
  readonly translate: string;
  readonly calc: string;
  readonly python: string;
}

/** The Debian packages that provide everything the GDAL baseline uses. */
export const GDAL_PACKAGES = ['gdal-bin', 'python3-gdal'] as const;

const INSTALL_HINT =
  `install GDAL's command-line tools and Python bindings: \`sudo apt-get install -y ${GDAL_PACKAGES.join(' ')}\` ` +
  '(Debian/Ubuntu; elsewhere any GDAL >= 3.6 with gdal_translate, gdal_calc.py and the osgeo Python package), then run the benchmark again';

/** Thrown when the benchmark cannot set itself up: the message says what to install. */
export class BenchSetupError extends Error {
  override readonly name = 'BenchSetupError';
}

function which(...names: string[]): string | undefined {
  for (const name of names) {
    const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
    const path = r.stdout.trim();
    if (r.status === 0 && path) return path;
  }
  return undefined;
}

/** The interpreter on a script's `#!` line (gdal_calc.py names the Python its bindings were built for). */
function shebangPython(script: string): string {
  const first = readFileSync(script, 'utf8').split('\n', 1)[0] ?? '';
  const m = /^#!\s*(\S+)(?:\s+(\S+))?/.exec(first);
  if (!m) return 'python3';
  // `#!/usr/bin/env python3` names the interpreter in its second word.
  return m[1]?.endsWith('/env') ? (m[2] ?? 'python3') : (m[1] as string);
}

function pythonHasGdal(python: string): boolean {
  const probe = 'from osgeo import gdal; import numpy; from osgeo_utils.samples import validate_cloud_optimized_geotiff';
  return spawnSync(python, ['-c', probe], { stdio: 'ignore' }).status === 0;
}

function find(): Gdal | undefined {
  const translate = which('gdal_translate');
  const calc = which('gdal_calc.py', 'gdal_calc');
  if (!translate || !calc) return undefined;
  const python = shebangPython(calc);
  if (!pythonHasGdal(python)) return undefined;
  const version = spawnSync(translate, ['--version'], { encoding: 'utf8' }).stdout.trim();
  return { version, translate, calc, python };
}

/**
 * Find GDAL, installing Debian's packages with apt when they are missing and
 * we are root (CI and these machines); otherwise fail saying exactly what to
 * install.
 */
export async function ensureGdal(log: (line: string) => void): Promise<Gdal> {
  const found = find();
  if (found) return found;
  const root = process.getuid?.() === 0;
  if (!root || !which('apt-get')) {
    throw new BenchSetupError(`GDAL is missing${root ? ' and apt-get is not available' : ' and this is not root'}: ${INSTALL_HINT}`);
  }
  log(`GDAL is missing: installing ${GDAL_PACKAGES.join(' ')} with apt-get (about a minute)`);
  const env = { DEBIAN_FRONTEND: 'noninteractive' };
  // Wait for another apt to finish rather than fail on its lock.
  const lock = ['-o', 'DPkg::Lock::Timeout=600'];
  await run('apt-get', [...lock, 'update', '-q'], { env, timeoutMs: 600_000 });
  await run('apt-get', [...lock, 'install', '-y', '-q', '--no-install-recommends', ...GDAL_PACKAGES], { env, timeoutMs: 900_000 });
  const installed = find();
  if (!installed) throw new BenchSetupError(`apt-get installed ${GDAL_PACKAGES.join(' ')} but GDAL is still not usable: ${INSTALL_HINT}`);
  return installed;
}

/** A bench/gdal/*.py helper script's absolute path. */
export function gdalScript(name: string): string {
  return fileURLToPath(new URL(`../gdal/${name}`, import.meta.url));
}

/** Run a bench/gdal/*.py helper with GDAL's Python and return the JSON object it prints last. */
export async function runGdalScript<T>(g: Gdal, name: string, input: unknown, pin = false): Promise<T & { wallMs: number }> {
  const { stdout, wallMs } = await run(g.python, [gdalScript(name), JSON.stringify(input)], { pin, timeoutMs: 1_800_000 });
  const last = stdout.trim().split('\n').pop() ?? '';
  try {
    return { ...(JSON.parse(last) as T), wallMs };
  } catch (cause) {
    throw new Error(`[bench] ${name} printed no JSON result; its output ended with: ${stdout.slice(-2000)}`, { cause });
  }
}
