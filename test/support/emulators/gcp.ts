import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { FAKE_GCS_BIN, findPubsubEmulator } from '../../../scripts/emulators/gcp.mjs';
import { freePort, httpAnswers, type Started, startProcess } from './process.js';
import type { GcpEndpoints } from './types.js';

// The package's ESM build (dist/index.mjs, which Vite picks through "module") imports
// extensionless paths that Node's ESM loader cannot resolve; its CommonJS build works.
const { FirestoreServer } = createRequire(import.meta.url)('@firestore-emulator/server') as typeof import('@firestore-emulator/server');

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
 * The JS Firestore emulator, in this process, bound to 127.0.0.1. It must carry
 * patches/@firestore-emulator+server+0.3.15.patch: unpatched, it accepts stale
 * update_time preconditions and every compare-and-set test would pass for the wrong reason.
 */
async function startFirestore(): Promise<{ host: string; started: Started }> {
  if (FirestoreServer.tesseraPreconditionPatch !== 1) {
    throw new Error(
      '@firestore-emulator/server is not patched to enforce update_time preconditions: run `npm run emulators:install` ' +
        '(it applies patches/@firestore-emulator+server+0.3.15.patch; `npm ci` removes it)',
    );
  }
  const server = new FirestoreServer();
  const port = await freePort();
  await server.start(port, '127.0.0.1');
  return {
    host: `127.0.0.1:${port}`,
    started: {
      name: 'firestore-emulator',
      stop: async () => server.stop(),
    },
  };
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

/** Starts fake-gcs-server, the (patched) Firestore emulator and, where present, the Pub/Sub emulator on 127.0.0.1. */
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
