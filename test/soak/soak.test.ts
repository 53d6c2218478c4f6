import { randomInt } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import type { Backend } from '../../shared/app/backend.js';
import type { ObjectStore, PutIfAbsentResult, PutOptions } from '../../shared/ports/object-store.port.js';
import { BACKEND_NAMES, type BackendName, PARITY_SOURCE_PREFIX } from '../parity/backends.js';
import { IamRun } from '../support/iam/run.js';
import { reproduceCommand } from './report.js';
import { anomalyCount, FAULT_KINDS, runSoak } from './soak-driver.js';

/**
 * The CI soak (issue 13): at least 500 deliveries per backend with every fault, a fresh random seed each
 * run (printed, with the one command that replays it), failing on any anomaly. Each cloud runs on the
 * Node major it deploys: scripts/test.mjs's main pass (Node 24) covers local, AWS and GCP
 * (TESSERA_TEST_CLOUDS), its Node 22 pass covers Azure. By hand, every backend; TESSERA_SOAK_SEED replays one.
 */
const DELIVERIES = 500;
const SEED = process.env.TESSERA_SOAK_SEED === undefined ? randomInt(1, 2 ** 31 - 1) : Number(process.env.TESSERA_SOAK_SEED);
const BACKENDS: BackendName[] = (process.env.TESSERA_TEST_CLOUDS ?? BACKEND_NAMES.join(','))
  .split(',')
  .map((s) => s.trim())
  .filter((s): s is BackendName => (BACKEND_NAMES as readonly string[]).includes(s));
const sizes = Object.fromEntries(BACKEND_NAMES.map((b) => [b, DELIVERIES])) as Record<BackendName, number>;
const rerun = reproduceCommand(SEED, sizes, BACKENDS, 'all');
/** Each cloud soak's requests against its stack's grants (the soak stages its scenes under the parity source prefix). */
const IAM = new IamRun({ config: { 'tessera:sourcePrefix': PARITY_SOURCE_PREFIX } });

describe(`randomized fault soak, seed ${SEED} (reproduce: ${rerun})`, () => {
  it.each(BACKENDS)(
    '%s: every tile written once, byte-identical to the reference render, every claim committed, no false alarm, every dead letter explained',
    async (name) => {
      process.stderr.write(`[soak] ${name}: seed ${SEED}; reproduce with: ${rerun}\n`);
      const { report, anomalies, iam } = await runSoak(name, inject('emulators'), {
        seed: SEED,
        deliveries: DELIVERIES,
        faults: FAULT_KINDS,
        iam: IAM,
      });
      process.stderr.write(`[soak] ${name}: ${JSON.stringify(report)}\n`);
      if (iam !== undefined) process.stderr.write(`[soak] iam ${iam}\n`);
      // The IAM check was not vacuous: a cloud soak's functions were seen at work.
      if (name !== 'local') expect(IAM.totals()[name]?.tally.requests ?? 0, `requests recorded for ${name}'s roles`).toBeGreaterThan(0);
      expect(report.deliveries).toBeGreaterThanOrEqual(DELIVERIES);
      // Every fault kind fired at least once: a soak that injected nothing would pass for nothing.
      // (clock skew is not a local fault: the local backend runs every worker on one clock.)
      const expectedKinds = FAULT_KINDS.filter((k) => !(name === 'local' && k === 'clock-skew'));
      const silent = expectedKinds.filter((k) => !(report.faultsByKind[k] ?? 0));
      expect(
        silent.filter((k) => !RARE.has(k)),
        `fault kinds that never fired (seed ${SEED})`,
      ).toEqual([]);
      expect(anomalies, `seed ${SEED}; reproduce with: ${rerun}`).toEqual([]);
      expect(anomalyCount(report)).toBe(0);
      expect(report.tilesCorrect).toBe(report.tilesExpected);
    },
    900_000,
  );

  it('the oracle catches a broken worker: a tile write whose bytes are altered is divergent, and the run fails', async () => {
    const { report, anomalies } = await runSoak('local', inject('emulators'), {
      seed: SEED,
      deliveries: 150,
      faults: ['duplicate', 'crash-after-write'],
      mutant: corruptingEveryThirdTile,
    });
    expect(report.divergentTiles).toBeGreaterThan(0);
    expect(anomalyCount(report)).toBeGreaterThan(0);
    expect(anomalies.some((a) => a.includes('bytes differ from the reference render'))).toBe(true);
  }, 120_000);
});

/** Kinds drawn per scene rather than per delivery: a short run may draw none of them. */
const RARE = new Set<string>(['duplicate-scene-event', 'source-overwritten', 'backfill-skip', 'backfill-new-key', 'backfill-overwrite']);

/** A worker bug the oracle must catch: every third tile the workers create has one byte flipped. */
let tilesCreated = 0;
function corruptingEveryThirdTile(backend: Backend): Backend {
  const outputs = new Proxy(backend.outputs, {
    get(target, prop) {
      if (prop === 'putIfAbsent')
        return (key: string, body: Uint8Array, options?: PutOptions): Promise<PutIfAbsentResult> => {
          if (!key.startsWith('tiles/') || ++tilesCreated % 3 !== 0) return target.putIfAbsent(key, body, options);
          const bad = Uint8Array.from(body);
          bad[bad.length - 1] = (bad[bad.length - 1] ?? 0) ^ 0xff;
          return target.putIfAbsent(key, bad, options);
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as ObjectStore;
  return { ...backend, outputs };
}
