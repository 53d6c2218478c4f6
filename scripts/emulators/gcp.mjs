// Installs the GCP emulators the tests start (see docs/emulator-fidelity.md, "GCP / Firestore"):
//
// - fake-gcs-server (Go), built with `go install` into <repo>/.tools/bin. Skipped when the
//   binary there already carries the pinned module version.
// - Firestore and Pub/Sub: Google's own emulators (Debian packages google-cloud-cli-firestore-emulator
//   and google-cloud-cli-pubsub-emulator; .ci/run apt-installs them when missing, as root). They
//   cannot be downloaded from a package registry, so here they are only checked, never installed.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export const FAKE_GCS_MODULE = 'github.com/fsouza/fake-gcs-server';
export const FAKE_GCS_VERSION = 'v1.55.1';
export const FAKE_GCS_BIN = join(repo, '.tools', 'bin', 'fake-gcs-server');

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

/**
 * Where Google's Firestore emulator jar may live: $TESSERA_FIRESTORE_EMULATOR_JAR, then the Cloud SDK's
 * apt and archive layouts. The jar, not the `cloud_firestore_emulator` launcher: the launcher runs java
 * as a child without `exec`, so stopping the launcher would leave the JVM running.
 */
export function firestoreEmulatorCandidates() {
  return [
    process.env.TESSERA_FIRESTORE_EMULATOR_JAR,
    '/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar',
    '/usr/share/google-cloud-sdk/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar',
    '/opt/google-cloud-sdk/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar',
  ].filter((p) => typeof p === 'string' && p.length > 0);
}

/** The Firestore emulator jar, or undefined when this machine has none. */
export function findFirestoreEmulator() {
  return firestoreEmulatorCandidates().find((p) => existsSync(p));
}

/** The main class inside the jar (what the launcher runs; the jar has no Main-Class manifest entry). */
export const FIRESTORE_EMULATOR_MAIN = 'com.google.cloud.datastore.emulator.firestore.CloudFirestore';

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

export async function install() {
  installFakeGcs();
  if (!findFirestoreEmulator()) {
    console.error(
      "[emulators] Google's Firestore emulator was not found (looked in " +
        `${firestoreEmulatorCandidates().join(', ')}); the GCP tests will fail until it is installed ` +
        '(apt package google-cloud-cli-firestore-emulator, Java 17) or TESSERA_FIRESTORE_EMULATOR_JAR names its jar',
    );
  }
  if (!findPubsubEmulator()) {
    console.error(
      "[emulators] Google's Pub/Sub emulator was not found (looked in " +
        `${pubsubEmulatorCandidates().join(', ')}); the Pub/Sub tests will fail until it is installed ` +
        '(apt package google-cloud-cli-pubsub-emulator) or TESSERA_PUBSUB_EMULATOR names its launcher',
    );
  }
}
