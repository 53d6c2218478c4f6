import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLocalBackend, LOCAL_SOURCE_BUCKET, type LocalBackend } from '../../../functions/local/compose.js';
import { runWorker } from '../../../functions/local/worker-pool.js';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import { sweepMosaics } from '../../../shared/app/mosaic-sweep.js';
import {
  backfillScenarioName,
  removeDeadLettersFrom,
  type VerifyReport,
  type VerifyTarget,
  verifyStack,
} from '../../../shared/app/verify/verify-stack.js';
import type { ProcessingParams, SourceRef } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import type { ClaimStore, DeleteClaimRequest, DeleteClaimResult } from '../../../shared/ports/claim-store.port.js';
import type { DeleteIfVersionResult, ObjectStore, PutIfAbsentResult, PutOptions } from '../../../shared/ports/object-store.port.js';
import { syntheticSceneBytes } from '../../support/local-scene.js';

// `tessera verify` (verifyStack, the code the CLI runs) against a stack made of the local adapters, whose
// "deployed functions" are the project's own fan-out, tile worker and mosaic sweep run by this test in a loop.
// verify's view of the output store and the claim store loses the answer to the FIRST conditional delete
// each sees, after the delete landed, and sends it again as an SDK does: the port's answer to that resend is
// `absent` (shared/ports/object-store.port.ts, claim-store.port.ts). The first such deletes are the backfill
// skip check's, which makes the gap.

const PARAMS: ProcessingParams = {
  ...DEFAULT_PARAMS,
  version: 'verify-unit',
  tile_px: 48,
  output: { ...(DEFAULT_PARAMS.output as object), blocksize: 16 },
};
const SOURCE_PREFIX = 'incoming/';

/** Answers lost after the delete landed, per store: which key or row, and what the resend answered. */
interface LostDelete {
  readonly what: string;
  readonly resent: string;
}

function losingFirstObjectDelete(inner: ObjectStore, lost: LostDelete[]): ObjectStore {
  let armed = true;
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'deleteIfVersion')
        return async (key: string, version: string): Promise<DeleteIfVersionResult> => {
          const first = await target.deleteIfVersion(key, version);
          if (!armed || first.kind !== 'deleted') return first;
          armed = false;
          const resent = await target.deleteIfVersion(key, version);
          lost.push({ what: key, resent: resent.kind });
          return resent;
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

function losingFirstClaimDelete(inner: ClaimStore, lost: LostDelete[]): ClaimStore {
  let armed = true;
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'deleteIf')
        return async (request: DeleteClaimRequest): Promise<DeleteClaimResult> => {
          const first = await target.deleteIf(request);
          if (!armed || first.kind !== 'deleted') return first;
          armed = false;
          const resent = await target.deleteIf(request);
          lost.push({ what: request.jobId, resent: resent.kind });
          return resent;
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * The local stack: a scene upload under the source prefix is an event on the scene "queue" (what an S3
 * notification does); the functions fan each event out, drain the tile queue and run the mosaic sweep.
 */
function localStack(backend: LocalBackend) {
  const sceneEvents: SourceRef[] = [];
  const sources: ObjectStore = new Proxy<ObjectStore>(backend.sources, {
    get(target, prop) {
      if (prop === 'putIfAbsent')
        return async (key: string, body: Uint8Array, options?: PutOptions): Promise<PutIfAbsentResult> => {
          const r = await target.putIfAbsent(key, body, options);
          if (r.kind === 'written' && key.startsWith(SOURCE_PREFIX))
            sceneEvents.push({ bucket: LOCAL_SOURCE_BUCKET, key, versionToken: r.version });
          return r;
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const settings = { owner: 'deployed-function', leaseMs: 60_000, retentionMs: 86_400_000 };
  let running = true;
  const loop = (async () => {
    while (running) {
      const event = sceneEvents[0];
      // Taken off the "queue" only once handled, so the backlog count never reads 0 mid fan-out.
      if (event !== undefined) await fanOutScene(backend, { source: event, params: PARAMS });
      if (event !== undefined) sceneEvents.shift();
      await runWorker(backend, settings, { pollMs: 5 });
      await sweepMosaics(backend);
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  return {
    sources,
    sceneEvents,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

let cleanup: (() => Promise<void>) | undefined;
afterEach(async () => {
  await cleanup?.();
  cleanup = undefined;
});

describe('tessera verify, backfill skip, when the answer to its delete is lost', () => {
  it('accepts absent for the gap tile and its claim row (the delete landed; the resend found nothing) and passes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-verify-lost-delete-'));
    const backend = createLocalBackend(dir, { maxReceiveCount: 3 });
    const stack = localStack(backend);
    cleanup = async () => {
      await stack.stop();
      backend.close();
      rmSync(dir, { recursive: true, force: true });
    };
    const lost: LostDelete[] = [];
    const target: VerifyTarget = {
      stack: 'local-unit',
      // A label only: the stores are the local adapters, behind the same ports as a deployed stack's.
      cloud: 'aws',
      backend: {
        ...backend,
        sources: stack.sources,
        outputs: losingFirstObjectDelete(backend.outputs, lost),
        claims: losingFirstClaimDelete(backend.claims, lost),
      },
      sourcePrefix: SOURCE_PREFIX,
      leaseSeconds: 60,
      settling: { kind: 'backlog', pendingMessages: async () => stack.sceneEvents.length + backend.queue.pending() },
      redeliverSceneEvent: async (manifest) => {
        stack.sceneEvents.push(manifest.source);
        return [];
      },
      deadLetters: () => backend.queue.deadLetters(),
      removeDeadLetters: async (match) => ({ removed: await removeDeadLettersFrom(backend.queue, match) }),
    };
    const progress: string[] = [];
    const report: VerifyReport = await verifyStack(
      target,
      { runId: 'lost-delete', sceneBytes: await syntheticSceneBytes({ width: 96, height: 80 }), timeoutMs: 30_000 },
      { progress: (line) => progress.push(line), sleep: (ms) => new Promise((r) => setTimeout(r, Math.min(ms, 20))) },
    );

    // The fault fired where it is meant to: on the gap's tile and its claim row, and each resend found nothing.
    expect(lost).toEqual([
      { what: expect.stringMatching(/^tiles\/.+\/1_1\.tif$/), resent: 'absent' },
      { what: expect.stringMatching(/^[0-9a-f]{64}$/), resent: 'absent' },
    ]);
    const skip = report.parity.find((p) => p.scenario === backfillScenarioName('skip'));
    expect(skip, progress.join('\n')).toMatchObject({
      pass: true,
      detail: expect.stringMatching(/^gap 1_1 filled by .*; 3 committed tiles untouched$/),
    });
    expect(report.smoke.pass && report.replay.pass, progress.join('\n')).toBe(true);
    expect(report.parity.filter((p) => !p.pass)).toEqual([]);
    expect(report.cleanup).toMatchObject({ pass: true, left: [] });
  }, 60_000);
});
