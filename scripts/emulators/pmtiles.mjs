// Installs go-pmtiles, the PMTiles project's own Go command (`pmtiles verify`, `show`), into <repo>/.tools/bin: the
// second, independent reader test/e2e/pmtiles-archive.test.ts checks Tessera's PMTiles archives with
// (docs/web-maps.md, "PMTiles archive"). Built from the Go module proxy with `go install`, as fake-gcs-server is
// (scripts/emulators/gcp.mjs); skipped when the binary there already carries the pinned module version.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export const GO_PMTILES_MODULE = 'github.com/protomaps/go-pmtiles';
export const GO_PMTILES_VERSION = 'v1.31.2';
export const GO_PMTILES_BIN = join(repo, '.tools', 'bin', 'go-pmtiles');

/** The module version the binary at GO_PMTILES_BIN was built from (`go version -m`), or undefined. */
export function installedGoPmtilesVersion() {
  if (!existsSync(GO_PMTILES_BIN)) return undefined;
  try {
    const info = execFileSync('go', ['version', '-m', GO_PMTILES_BIN], { encoding: 'utf8' });
    const line = info.split('\n').find((l) => l.trim().startsWith('mod\t') && l.includes(GO_PMTILES_MODULE));
    return line?.trim().split(/\s+/)[2];
  } catch {
    return undefined;
  }
}

export async function install() {
  if (installedGoPmtilesVersion() === GO_PMTILES_VERSION) return;
  console.error(`[emulators] building go-pmtiles ${GO_PMTILES_VERSION} into .tools/bin (go install, ~2 min the first time)...`);
  try {
    execFileSync('go', ['install', `${GO_PMTILES_MODULE}@${GO_PMTILES_VERSION}`], {
      env: { ...process.env, GOBIN: dirname(GO_PMTILES_BIN) },
      stdio: 'inherit',
    });
  } catch (error) {
    throw new Error(
      `go install ${GO_PMTILES_MODULE}@${GO_PMTILES_VERSION} failed (${error instanceof Error ? error.message : error}); ` +
        'go-pmtiles needs Go on PATH and the Go module proxy',
    );
  }
  if (installedGoPmtilesVersion() !== GO_PMTILES_VERSION) throw new Error(`go-pmtiles was not built at ${GO_PMTILES_BIN}`);
}
