import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import {
  FAKE_GCS_BIN,
  FIRESTORE_EMULATOR_MAIN,
  findFirestoreEmulator,
  findPubsubEmulator,
  firestoreEmulatorCandidates,
} from '../../../scripts/emulators/gcp.mjs';
import { freePort, httpAnswers, type Started, startProcess } from './process.js';
import type { GcpEndpoints } from './types.js';

/** The project id every GCP test uses; the emulators accept any. */
export const GCP_TEST_PROJECT = 'tessera-test';

/** True once something accepts TCP connections on 127.0.0.1:port (gRPC servers answer no HTTP/1 request). */
function tcpAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, timeout: 1000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

async function startFakeGcs(): Promise<{ url: string; started: Started }> {
  const bin = FAKE_GCS_BIN;
  if (!existsSync(bin)) throw new Error(`fake-gcs-server is not installed at ${bin}: run \`npm run emulators:install\``);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const started = await startProcess(
    'fake-gcs-server',
    bin,
    [
      '-scheme',
      'http',
      '-host',
      '127.0.0.1',
      '-port',
      String(port),
      '-backend',
      'memory',
      '-public-host',
      `127.0.0.1:${port}`,
      '-log-level',
      'warn',
    ],
    () => httpAnswers(`${url}/storage/v1/b`),
  );
  return { url, started };
}

/**
 * Google's own Firestore emulator (the Cloud SDK's `cloud-firestore-emulator` jar, Java 17), bound to
 * 127.0.0.1. It enforces `update_time` preconditions (code 9), answers `create` on an existing document
 * with code 6 and serialises transactions, so no patch is needed (docs/emulator-fidelity.md). The JVM is
 * started directly rather than through the `cloud_firestore_emulator` launcher, which runs java without
 * `exec` (stopping the launcher would orphan the JVM). The emulator UI's WebSocket and WebChannel
 * listeners get free loopback ports of their own so two runs never collide.
 */
async function startFirestore(): Promise<{ host: string; started: Started }> {
  const jar = findFirestoreEmulator();
  if (!jar) {
    throw new Error(
      `Google's Firestore emulator is not installed (looked in ${firestoreEmulatorCandidates().join(', ')}): ` +
        'apt-get install google-cloud-cli-firestore-emulator (Java 17), or point TESSERA_FIRESTORE_EMULATOR_JAR at its jar',
    );
  }
  const [port, websocketPort] = [await freePort(), await freePort()];
  const started = await startProcess(
    'firestore-emulator',
    'java',
    [
      '-Duser.language=en',
      '-cp',
      jar,
      FIRESTORE_EMULATOR_MAIN,
      'start',
      '--host=127.0.0.1',
      `--port=${port}`,
      `--websocket_port=${websocketPort}`,
    ],
    () => tcpAnswers(port),
    { timeoutMs: 90_000 },
  );
  return { host: `127.0.0.1:${port}`, started };
}

/** Google's Pub/Sub emulator where the machine has it (see docs/emulator-fidelity.md); undefined otherwise. */
async function startPubsub(): Promise<{ host: string; started: Started } | undefined> {
  const launcher = findPubsubEmulator();
  if (!launcher) return undefined;
  const port = await freePort();
  const started = await startProcess('pubsub-emulator', launcher, [`--host=127.0.0.1`, `--port=${port}`], () => tcpAnswers(port), {
    timeoutMs: 90_000,
  });
  return { host: `127.0.0.1:${port}`, started };
}

/** Starts fake-gcs-server, Google's Firestore emulator and, where present, its Pub/Sub emulator on 127.0.0.1. */
export async function start(): Promise<{ endpoints: GcpEndpoints | undefined; stops: Started[] }> {
  const [gcs, firestore, pubsub] = await Promise.allSettled([startFakeGcs(), startFirestore(), startPubsub()]);
  if (gcs.status === 'rejected' || firestore.status === 'rejected' || pubsub.status === 'rejected') {
    // Stop what did start, so a failed setup leaves no emulator behind.
    const up = [gcs, firestore, pubsub].flatMap((s) => (s.status === 'fulfilled' && s.value ? [s.value.started] : []));
    await Promise.all(up.map((s) => s.stop()));
    throw [gcs, firestore, pubsub].flatMap((s) => (s.status === 'rejected' ? [s.reason] : []))[0];
  }
  return {
    endpoints: { gcs: gcs.value.url, firestore: firestore.value.host, projectId: GCP_TEST_PROJECT, pubsub: pubsub.value?.host },
    stops: [gcs.value.started, firestore.value.started, ...(pubsub.value ? [pubsub.value.started] : [])],
  };
}
