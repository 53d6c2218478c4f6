// Installs the GCP emulators the tests start (see docs/emulator-fidelity.md, "GCP / Firestore"):
//
// - fake-gcs-server (Go), built with `go install` into <repo>/.tools/bin. Skipped when the
//   binary there already carries the pinned module version.
// - the Firestore emulator is the npm dev dependency @firestore-emulator/server; this applies
//   patches/@firestore-emulator+server+0.3.15.patch to it (update_time preconditions, atomic
//   precondition checks, distinct commit times, a bind address). Idempotent: a patch already
//   applied is left alone. `npm ci` restores the pristine package; the next install re-applies it.
// - Pub/Sub: Google's own emulator cannot be downloaded here; it is used where the machine
//   image ships it (google-cloud-cli-pubsub-emulator). Only checked, never installed.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export const FAKE_GCS_MODULE = 'github.com/fsouza/fake-gcs-server';
export const FAKE_GCS_VERSION = 'v1.55.1';
export const FAKE_GCS_BIN = join(repo, '.tools', 'bin', 'fake-gcs-server');
export const FIRESTORE_PATCH = join(repo, 'patches', '@firestore-emulator+server+0.3.15.patch');

/** Where Google's Pub/Sub emulator may live: $TESSERA_PUBSUB_EMULATOR, then the Cloud SDK's apt and archive layouts. */
export function pubsubEmulatorCandidates() {
  return [
    process.env.TESSERA_PUBSUB_EMULATOR,
    '/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator',
    '/usr/share/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator',
    '/opt/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator',
  ].filter((p) => typeof p === 'string' && p.length > 0);
}

/** The Pub/Sub emulator launcher, or undefined when this machine has none. */
export function findPubsubEmulator() {
  return pubsubEmulatorCandidates().find((p) => existsSync(p));
}

function installedFakeGcsVersion() {
  if (!existsSync(FAKE_GCS_BIN)) return undefined;
  try {
    // `go version -m` prints the module path and version the binary was built from.
    const info = execFileSync('go', ['version', '-m', FAKE_GCS_BIN], { encoding: 'utf8' });
    const line = info.split('\n').find((l) => l.trim().startsWith('mod\t') && l.includes(FAKE_GCS_MODULE));
    return line?.trim().split(/\s+/)[2];
  } catch {
    return undefined;
  }
}

function installFakeGcs() {
  if (installedFakeGcsVersion() === FAKE_GCS_VERSION) return;
  console.error(`[emulators] building fake-gcs-server ${FAKE_GCS_VERSION} into .tools/bin (go install, ~2-3 min the first time)...`);
  try {
    execFileSync('go', ['install', `${FAKE_GCS_MODULE}@${FAKE_GCS_VERSION}`], {
      env: { ...process.env, GOBIN: dirname(FAKE_GCS_BIN) },
      stdio: 'inherit',
    });
  } catch (error) {
    throw new Error(
      `go install ${FAKE_GCS_MODULE}@${FAKE_GCS_VERSION} failed (${error instanceof Error ? error.message : error}); ` +
        'fake-gcs-server needs Go >= 1.23 on PATH and the Go module proxy',
    );
  }
  if (installedFakeGcsVersion() !== FAKE_GCS_VERSION) throw new Error(`fake-gcs-server was not built at ${FAKE_GCS_BIN}`);
}

/** The real directory of the installed @firestore-emulator/server. */
function firestoreEmulatorDir() {
  return realpathSync(dirname(createRequire(import.meta.url).resolve('@firestore-emulator/server/package.json')));
}

/**
 * `git apply` used as a plain patch tool inside the package's real directory,
 * with the patch's `a/node_modules/@firestore-emulator/server/` prefix stripped
 * (-p4). GIT_CEILING_DIRECTORIES keeps git from finding the project's
 * repository above it: inside a repository, git resolves paths from the
 * repository root and silently skips the files (or, from the root, refuses a
 * node_modules that is a symbolic link).
 */
function gitApply(args) {
  const pkg = firestoreEmulatorDir();
  execFileSync('git', ['apply', '-p4', ...args, FIRESTORE_PATCH], {
    cwd: pkg,
    env: { ...process.env, GIT_CEILING_DIRECTORIES: dirname(pkg) },
    stdio: 'pipe',
  });
}

/** Both bundles must carry the patch; a check that passed without touching them must not count. */
function assertPatched() {
  const dist = join(firestoreEmulatorDir(), 'dist');
  for (const bundle of ['index.js', 'index.mjs']) {
    if (!readFileSync(join(dist, bundle), 'utf8').includes('tesseraPreconditionPatch = 1')) {
      throw new Error(`node_modules/@firestore-emulator/server/dist/${bundle} is not patched after applying ${FIRESTORE_PATCH}`);
    }
  }
}

function patchFirestoreEmulator() {
  try {
    gitApply(['--reverse', '--check']);
    assertPatched();
    return; // already applied
  } catch {
    // not applied yet (or a different package version: the forward check says which)
  }
  try {
    gitApply(['--check']);
  } catch (error) {
    const detail = error instanceof Error && 'stderr' in error ? String(error.stderr) : String(error);
    throw new Error(
      `patches/@firestore-emulator+server+0.3.15.patch does not apply to node_modules/@firestore-emulator/server: ${detail.trim()}; ` +
        'run `npm ci` to restore the pinned 0.3.15, or port the patch to the installed version',
    );
  }
  gitApply([]);
  assertPatched();
  console.error('[emulators] patched @firestore-emulator/server to enforce update_time preconditions');
}

export async function install() {
  installFakeGcs();
  patchFirestoreEmulator();
  if (!findPubsubEmulator()) {
    console.error(
      "[emulators] Google's Pub/Sub emulator was not found (looked in " +
        `${pubsubEmulatorCandidates().join(', ')}); the Pub/Sub tests will fail until it is installed ` +
        '(apt package google-cloud-cli-pubsub-emulator) or TESSERA_PUBSUB_EMULATOR names its launcher',
    );
  }
}
