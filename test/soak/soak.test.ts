import { randomInt } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import type { Backend } from '../../shared/app/backend.js';
import type { FeatureBatchSink } from '../../shared/ports/feature-batch-sink.port.js';
import type { ObjectStore, PutIfAbsentResult, PutOptions } from '../../shared/ports/object-store.port.js';
import { BACKEND_NAMES, type BackendName, PARITY_SOURCE_PREFIX } from '../parity/backends.js';
import { IamRun } from '../support/iam/run.js';
import { reproduceCommand } from './report.js';
import { anomalyCount, FAULT_KINDS, runSoak } from './soak-driver.js';

/**
 * The CI soak (issues 13 and 25): at least 500 deliveries per backend with every fault kind firing (the
 * schedule forces the rare ones; test/soak/fault-schedule.ts), over every path (single-file and chunked
 * scenes, STAC Items, the PostGIS sink, ingestion, remote STAC Items, feature batches judged record by record), a
 * fresh random seed each run
 * (printed, with the one command that replays it), failing on any anomaly. Each cloud runs on the
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
    "%s: every tile written once, byte-identical to the reference render (and that render agrees with GDAL), every claim committed, no false alarm, every dead letter explained, every path's oracle holds, every fault kind fired",
    async (name) => {
      process.stderr.write(`[soak] ${name}: seed ${SEED}; reproduce with: ${rerun}\n`);
      const { report, anomalies, iam, gdal } = await runSoak(name, inject('emulators'), {
        seed: SEED,
        deliveries: DELIVERIES,
        faults: FAULT_KINDS,
        iam: IAM,
      });
      process.stderr.write(`[soak] ${name}: ${JSON.stringify(report)}\n`);
      if (iam !== undefined) process.stderr.write(`[soak] iam ${iam}\n`);
      for (const line of gdal ?? []) process.stderr.write(`[soak] gdal ${line}\n`);
      // The IAM check was not vacuous: a cloud soak's functions were seen at work.
      if (name !== 'local') expect(IAM.totals()[name]?.tally.requests ?? 0, `requests recorded for ${name}'s roles`).toBeGreaterThan(0);
      expect(report.deliveries).toBeGreaterThanOrEqual(DELIVERIES);
      // Every fault kind fired at least once: a soak that injected nothing would pass for nothing. The driver
      // schedules the rare ones and reports any that did not fire; checked here too, from the counts themselves.
      // (clock skew is not a local fault: the local backend runs every worker on one clock.)
      const expectedKinds = FAULT_KINDS.filter((k) => !(name === 'local' && k === 'clock-skew'));
      const silent = expectedKinds.filter((k) => !(report.faultsByKind[k] ?? 0));
      expect(silent, `fault kinds that never fired (seed ${SEED})`).toEqual([]);
      expect(report.unfiredFaultKinds).toEqual([]);
      // Every path ran and its oracle checked something: a path that never ran would pass for nothing.
      for (const [path, p] of Object.entries(report.paths)) expect(p.checked, `${path} checked (seed ${SEED})`).toBeGreaterThan(0);
      expect(report.gdalCompared, 'reference tiles compared with GDAL').toBeGreaterThan(0);
      // The feature batches: objects (and a poison one) delivered and judged record by record, with records repeated
      // across objects and bad lines to reject; every anomaly kind of the record-level oracle is 0.
      const fb = report.featureBatches;
      expect(fb.objects, `batch objects (seed ${SEED})`).toBeGreaterThan(0);
      expect(fb.poisonObjects, `poison batch objects (seed ${SEED})`).toBeGreaterThan(0);
      expect(fb.repeatedLines, `records repeated across batch objects (seed ${SEED})`).toBeGreaterThan(0);
      expect(fb.badLines, `bad lines (seed ${SEED})`).toBeGreaterThan(0);
      expect(fb.recordRows).toBe(fb.distinctRecords);
      expect(Object.entries(fb.anomalies).filter(([, n]) => n > 0)).toEqual([]);
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
  }, 180_000);

  it('the sink oracle catches a worker that commits tiles without their feature rows', async () => {
    const { report, anomalies } = await runSoak('local', inject('emulators'), {
      seed: SEED,
      deliveries: 120,
      faults: ['duplicate'],
      mutant: skippingEveryFifthRow,
    });
    expect(report.paths.postgis.anomalies).toBeGreaterThan(0);
    expect(anomalies.some((a) => /postgis .*rows for \d+ tiles committed/.test(a))).toBe(true);
    expect(anomalyCount(report)).toBeGreaterThan(0);
  }, 180_000);

  it('the GDAL comparison catches a render bug the workers and the reference share, which the byte oracle cannot see', async () => {
    const { report, anomalies } = await runSoak('local', inject('emulators'), {
      seed: SEED,
      deliveries: 120,
      faults: ['duplicate'],
      sharedRenderBug: 'swapped-bands',
    });
    // The same wrong bytes on both sides: the byte oracle holds...
    expect(report.divergentTiles).toBe(0);
    expect(report.tilesCorrect).toBe(report.tilesExpected);
    // ...and GDAL's render of the same windows from the same files does not agree.
    expect(report.gdalMismatches).toBeGreaterThan(0);
    expect(anomalies.some((a) => a.includes("differs from GDAL's render"))).toBe(true);
    expect(anomalyCount(report)).toBeGreaterThan(0);
  }, 180_000);

  it('the record-level oracle catches a batch sink that drops records, misplaces them and loses a reject', async () => {
    const { report, anomalies } = await runSoak('local', inject('emulators'), {
      seed: SEED,
      deliveries: 30,
      faults: ['duplicate-batch-event', 'poison-batch'],
      events: ['batch'],
      batchSinkMutant: droppingRecords,
    });
    const fb = report.featureBatches;
    expect(fb.objects).toBeGreaterThan(0);
    expect(fb.anomalies['missing-record']).toBeGreaterThan(0);
    expect(fb.anomalies['misattributed-record']).toBeGreaterThan(0);
    expect(fb.anomalies['missing-reject']).toBeGreaterThan(0);
    expect(anomalies.some((a) => a.startsWith('feature-batches missing-record: '))).toBe(true);
    expect(report.paths['feature-batches'].anomalies).toBeGreaterThan(0);
    expect(anomalyCount(report)).toBeGreaterThan(0);
  }, 180_000);

  it('a scheduled fault kind that never fires fails the soak, naming the kind', async () => {
    // band-reupload needs a STAC Item to carry it; a plan of single-file scenes only has none.
    const { report, anomalies } = await runSoak('local', inject('emulators'), {
      seed: SEED,
      deliveries: 40,
      faults: ['band-reupload', 'slow-tile'],
      events: ['single'],
    });
    expect(report.faultsByKind['slow-tile'] ?? 0).toBeGreaterThan(0);
    expect(report.unfiredFaultKinds).toEqual(['band-reupload']);
    expect(anomalies).toContain('fault kind band-reupload was scheduled and never fired');
    expect(anomalyCount(report)).toBeGreaterThan(0);
  }, 180_000);
});

/**
 * A batch sink bug the record-level oracle must catch: of each batch, every fifth record is never written, every
 * fifth (another one) is written with the wrong line, and the first reject is dropped; the answer looks right.
 */
function droppingRecords(sink: FeatureBatchSink): FeatureBatchSink {
  return {
    name: sink.name,
    putBatch: (batch) =>
      sink.putBatch({
        ...batch,
        records: batch.records.filter((_, i) => i % 5 !== 2).map((r, i) => (i % 5 === 1 ? { ...r, line: r.line + 1000 } : r)),
        rejects: batch.rejects.slice(1),
      }),
    batchDone: (key) => sink.batchDone(key),
  };
}

/** A worker bug the sink oracle must catch: every fifth feature row is answered `inserted` and never written. */
let rowsPut = 0;
function skippingEveryFifthRow(backend: Backend): Backend {
  const sink = backend.sink;
  if (sink === undefined) throw new Error('the soak runs every worker with the feature sink');
  return {
    ...backend,
    sink: {
      name: sink.name,
      put: (feature) => (++rowsPut % 5 === 0 ? Promise.resolve({ kind: 'inserted' }) : sink.put(feature)),
      retireScene: (scene, why) => sink.retireScene(scene, why),
    },
  };
}

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
