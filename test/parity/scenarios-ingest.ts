import { createHash } from 'node:crypto';
import {
  type ArtefactRequest,
  handleIngestDelivery,
  type IngestHooks,
  type IngestOutcome,
  type IngestVerdict,
  ingestArtefact,
  ingestKeys,
  toIngestMessage,
} from '../../shared/app/ingest.js';
import { reconcileManifest, sweepStaging } from '../../shared/app/ingest-reconcile.js';
import { areaPrefix } from '../../shared/domain/key-layout.js';
import { asRole } from '../support/function-role.js';
import { notARaster, strippedTiff, validArtefact } from '../support/ingest-fixtures.js';
import { PARITY_SOURCE_PREFIX } from './backends.js';
import { parityScene, type ScenarioContext } from './harness.js';
import type { Json } from './outcome.js';
import { outcome, type Scenario } from './scenario-kit.js';

// Idempotent ingestion (issue 16, sections 1, 3 and 4; design note 2): stage, validate, copy create-only,
// then register in the backend's own manifest (SQLite, DynamoDB, Firestore, Table Storage). Each scenario
// runs the same flow (shared/app/ingest.ts) against each backend's source store and manifest.

const SOURCE = 'sentinel-2-l2a';
const ITEM = 'S2B_T30UXB_20260612';

/**
 * As a deployed ingest function does (shared/app/ingest-trigger.ts), the parity stack's ingest publishes where
 * its scenes start: the stack's source prefix. Artefacts to fetch by `object:KEY` are uploaded under the layout's
 * uploads area (docs/deploy.md), outside that prefix, so they are no unregistered object of it; the ingest role
 * may read there and nowhere else outside staging and the prefix (docs/iam.md).
 */
const PUBLISHED = PARITY_SOURCE_PREFIX;
const SETTINGS = { publishedPrefix: PUBLISHED } as const;
const upload = (ctx: ScenarioContext, name: string, bytes: Uint8Array) => uploadKey(ctx, `${areaPrefix('uploads')}${name}`, bytes);

/** Checksums shortened to 12 hex digits in keys and facts: the same bytes give the same digits on every backend. */
const short = (s: string): string => s.replace(/[0-9a-f]{64}/g, (h) => h.slice(0, 12));
const sha12 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex').slice(0, 12);

/** Upload an artefact to the source store (where an `object:` href points). */
async function uploadKey(ctx: ScenarioContext, key: string, bytes: Uint8Array): Promise<string> {
  const put = await ctx.backend.sources.putIfAbsent(key, bytes);
  if (put.kind !== 'written') throw new Error(`could not upload ${key}: ${put.kind}`);
  return `object:${key}`;
}

const request = (externalId: string, href: string): ArtefactRequest => ({ kind: 'artefact', source: SOURCE, externalId, href });

/** One outcome as a fact, and its reason as a call. */
function noted(ctx: ScenarioContext, o: IngestOutcome): Json {
  ctx.note(`ingest:${o.reason}`);
  return {
    reason: o.reason,
    published: o.published,
    key: o.key === undefined ? null : short(o.key),
    row: o.manifest ? `${o.manifest.externalId} ${short(o.manifest.checksum)} by ${o.manifest.runId}` : null,
    ...(o.invalid ? { invalid: o.invalid.what } : {}),
  };
}

/** What ingestion left in the source store and the manifest. */
async function ingestState(ctx: ScenarioContext): Promise<Json> {
  const list = async (prefix: string) => {
    const out: string[] = [];
    for await (const h of ctx.backend.sources.list(prefix)) out.push(short(h.key));
    return out.sort();
  };
  const rows: string[] = [];
  for await (const r of ctx.manifest.list()) rows.push(`${r.externalId} ${short(r.checksum)} ${short(r.key)} by ${r.runId}`);
  return { staging: await list('staging/'), published: await list(PUBLISHED), rows: rows.sort() };
}

async function reconciled(ctx: ScenarioContext): Promise<Json> {
  // The scheduled reconcile function's work. (sweepStaging below plays the bucket's lifecycle rule: the operator.)
  const r = await asRole('reconcile', () =>
    reconcileManifest({ store: ctx.backend.sources, manifest: ctx.manifest, telemetry: ctx.backend.telemetry }, SETTINGS),
  );
  return {
    objectsWithoutRow: r.objectsWithoutRow.map(short),
    rowsWithoutObject: r.rowsWithoutObject.map((x) => short(x.key)),
    notIngested: r.notIngested.map(short),
  };
}

/**
 * The short checksums of the fixtures, computed once at load (the expected records are plain data):
 * `scene` is the parity scene, `seed9` the synthetic artefact of seed 9.
 */
function sha12Sync(which: 'scene' | 'seed9'): string {
  const v = FIXTURE_SHA12[which];
  if (v === undefined) throw new Error(`fixture checksums are not loaded (${which})`);
  return v;
}

const FIXTURE_SHA12: Partial<Record<'scene' | 'seed9', string>> = {
  scene: sha12(await parityScene()),
  seed9: sha12(await validArtefact(9)),
};

/** The error code a verdict carries (null for an ack). */
const codeOf = (v: IngestVerdict): string | null => (v.kind === 'ack' ? null : ((v.error as { code?: string }).code ?? null));

const CRASH_POINTS = [
  'beforeFetch',
  'afterStage',
  'afterValidate',
  'afterCopy',
  'afterCommit',
] as const satisfies readonly (keyof IngestHooks)[];

export const INGEST_SCENARIOS: readonly Scenario[] = [
  {
    id: '41',
    title: 'ingest run twice on one artefact publishes once: the second is already-published, copies nothing, writes no staging object',
    async run(ctx) {
      const deps = ctx.ingestDeps();
      const href = await upload(ctx, 'a.tif', await parityScene());
      const first = await ingestArtefact(deps, request(ITEM, href), SETTINGS);
      const before = await ctx.backend.sources.head(first.key as string);
      const second = await ingestArtefact(deps, request(ITEM, href), SETTINGS);
      const after = await ctx.backend.sources.head(first.key as string);
      ctx.fact('attempts', [noted(ctx, first), noted(ctx, second)]);
      ctx.fact('finalObjectUnchanged', before?.version === after?.version && before?.lastModified === after?.lastModified);
      ctx.fact('state', await ingestState(ctx));
      ctx.fact('reconcile', await reconciled(ctx));
      return ctx.record();
    },
    expected: (() => {
      const c = sha12Sync('scene');
      const key = `${PUBLISHED}${SOURCE}/${ITEM}/${c}/data.tif`;
      return outcome({
        calls: { 'ingest:published': 1, 'ingest:already-published': 1 },
        counters: { written: 1, 'ingest-published': 1, 'ingest-already-published': 1 },
        facts: {
          attempts: [
            { reason: 'published', published: true, key, row: `${ITEM} ${c} by run-1` },
            { reason: 'already-published', published: false, key, row: `${ITEM} ${c} by run-1` },
          ],
          finalObjectUnchanged: true,
          state: { staging: [`staging/run-1/${SOURCE}/${ITEM}/data.tif`], published: [key], rows: [`${ITEM} ${c} ${key} by run-1`] },
          reconcile: { objectsWithoutRow: [], rowsWithoutObject: [], notIngested: [] },
        },
      });
    })(),
  },
  {
    id: '42',
    title:
      'ingest crashes before fetch, after staging, after validate, after copy and after commit: each leaves what the design note says, reconcile finds the unregistered copy, every retry succeeds, staging expires',
    async run(ctx) {
      const deps = ctx.ingestDeps();
      const href = await upload(ctx, 'a.tif', await parityScene());
      for (const at of CRASH_POINTS) {
        const died = await ingestArtefact(deps, request(`crash-${at}`, href), {
          ...SETTINGS,
          hooks: {
            [at]: () => {
              throw new Error(`died ${at}`);
            },
          },
        }).then(
          () => 'finished',
          (e: Error) => e.message,
        );
        ctx.note(died === `died ${at}` ? 'crashed' : `unexpected:${died}`);
      }
      ctx.fact('afterCrashes', await ingestState(ctx));
      ctx.fact('reconcileAfterCrashes', await reconciled(ctx));
      const retries: Json[] = [];
      for (const at of CRASH_POINTS) retries.push(noted(ctx, await ingestArtefact(deps, request(`crash-${at}`, href), SETTINGS)));
      ctx.fact('retries', retries);
      ctx.fact('reconcileAfterRetries', await reconciled(ctx));
      // Staging expires with retention: a sweep as of 8 days after the objects were written (their
      // lastModified is the store's own clock), each delete conditional on the version listed.
      const sweep = await sweepStaging(
        {
          store: ctx.backend.sources,
          clock: { now: () => Date.now() + 8 * 86_400_000, every: ctx.clock.every.bind(ctx.clock) },
          telemetry: ctx.backend.telemetry,
        },
        { retentionMs: 7 * 86_400_000 },
      );
      ctx.fact('sweep', { deleted: sweep.deleted.length, changed: sweep.changed.length });
      ctx.fact('end', await ingestState(ctx));
      return ctx.record();
    },
    expected: (() => {
      const c = sha12Sync('scene');
      const pub = (at: string) => `${PUBLISHED}${SOURCE}/crash-${at}/${c}/data.tif`;
      const stg = (run: number, at: string) => `staging/run-${run}/${SOURCE}/crash-${at}/data.tif`;
      const row = (at: string, run: number) => `crash-${at} ${c} ${pub(at)} by run-${run}`;
      return outcome({
        calls: { crashed: 5, 'ingest:published': 4, 'ingest:already-published': 1 },
        // Copies: the two crashes after the copy, and three retries; the afterCopy retry meets its own copy.
        counters: { written: 5, 'write-already-present': 1, 'ingest-published': 5, 'ingest-already-published': 1 },
        facts: {
          afterCrashes: {
            // beforeFetch (run-1) left nothing; each later crash left its staging object.
            staging: [stg(2, 'afterStage'), stg(3, 'afterValidate'), stg(4, 'afterCopy'), stg(5, 'afterCommit')].sort(),
            published: [pub('afterCommit'), pub('afterCopy')].sort(),
            rows: [row('afterCommit', 5)],
          },
          reconcileAfterCrashes: { objectsWithoutRow: [pub('afterCopy')], rowsWithoutObject: [], notIngested: [] },
          retries: [
            { reason: 'published', published: true, key: pub('beforeFetch'), row: `crash-beforeFetch ${c} by run-6` },
            { reason: 'published', published: true, key: pub('afterStage'), row: `crash-afterStage ${c} by run-7` },
            { reason: 'published', published: true, key: pub('afterValidate'), row: `crash-afterValidate ${c} by run-8` },
            { reason: 'published', published: true, key: pub('afterCopy'), row: `crash-afterCopy ${c} by run-9` },
            { reason: 'already-published', published: false, key: pub('afterCommit'), row: `crash-afterCommit ${c} by run-5` },
          ],
          reconcileAfterRetries: { objectsWithoutRow: [], rowsWithoutObject: [], notIngested: [] },
          sweep: { deleted: 8, changed: 0 },
          end: {
            staging: [],
            published: CRASH_POINTS.map(pub).sort(),
            rows: [row('afterCommit', 5), row('afterCopy', 9), row('afterStage', 7), row('afterValidate', 8), row('beforeFetch', 6)].sort(),
          },
        },
      });
    })(),
  },
  {
    id: '43',
    title: '16 concurrent ingests of one artefact: 1 manifest row, 1 final object, 15 concurrent-publisher-won or already-published',
    async run(ctx) {
      const deps = ctx.ingestDeps();
      const href = await upload(ctx, 'a.tif', await parityScene());
      const all = await Promise.all(Array.from({ length: 16 }, () => ingestArtefact(deps, request(ITEM, href), SETTINGS)));
      const winner = all.find((o) => o.published);
      ctx.fact('published', all.filter((o) => o.published).length);
      ctx.fact('noOp', all.filter((o) => o.reason === 'concurrent-publisher-won' || o.reason === 'already-published').length);
      ctx.fact(
        'everyAnswerNamesTheWinnersRow',
        all.every((o) => o.manifest?.runId === winner?.runId && o.key === winner?.key),
      );
      const state = (await ingestState(ctx)) as { published: Json; rows: string[] };
      ctx.fact('published keys', state.published);
      ctx.fact('rows', state.rows.length);
      ctx.fact('reconcile', await reconciled(ctx));
      const r = await ctx.record();
      // Which losers reached the copy (write-already-present) and which saw the row first is timing: only the sums are facts.
      const n = (c: keyof typeof r.counters) => r.counters[c] ?? 0;
      return {
        ...r,
        counters: {
          written: n('written'),
          'ingest-published': n('ingest-published'),
          'ingest-lost-race': n('ingest-lost-race') + n('ingest-already-published'),
        },
      };
    },
    expected: outcome({
      counters: { written: 1, 'ingest-published': 1, 'ingest-lost-race': 15 },
      facts: {
        published: 1,
        noOp: 15,
        everyAnswerNamesTheWinnersRow: true,
        'published keys': [`${PUBLISHED}${SOURCE}/${ITEM}/${sha12Sync('scene')}/data.tif`],
        rows: 1,
        reconcile: { objectsWithoutRow: [], rowsWithoutObject: [], notIngested: [] },
      },
    }),
  },
  {
    id: '44',
    title: 'the same item id with new bytes publishes a new row under a new key; the old bytes again are already-published',
    async run(ctx) {
      const deps = ctx.ingestDeps();
      const v1 = await upload(ctx, 'v1.tif', await parityScene());
      const v2 = await upload(ctx, 'v2.tif', await validArtefact(9));
      ctx.fact('attempts', [
        noted(ctx, await ingestArtefact(deps, request(ITEM, v1), SETTINGS)),
        noted(ctx, await ingestArtefact(deps, request(ITEM, v2), SETTINGS)),
        noted(ctx, await ingestArtefact(deps, request(ITEM, v1), SETTINGS)),
      ]);
      ctx.fact('rows', ((await ingestState(ctx)) as { rows: Json }).rows);
      return ctx.record();
    },
    expected: (() => {
      const c1 = sha12Sync('scene');
      const c2 = sha12Sync('seed9');
      const key = (c: string) => `${PUBLISHED}${SOURCE}/${ITEM}/${c}/data.tif`;
      return outcome({
        calls: { 'ingest:published': 2, 'ingest:already-published': 1 },
        counters: { written: 2, 'ingest-published': 2, 'ingest-already-published': 1 },
        facts: {
          attempts: [
            { reason: 'published', published: true, key: key(c1), row: `${ITEM} ${c1} by run-1` },
            { reason: 'published', published: true, key: key(c2), row: `${ITEM} ${c2} by run-2` },
            { reason: 'already-published', published: false, key: key(c1), row: `${ITEM} ${c1} by run-1` },
          ],
          rows: [`${ITEM} ${c1} ${key(c1)} by run-1`, `${ITEM} ${c2} ${key(c2)} by run-2`].sort(),
        },
      });
    })(),
  },
  {
    id: '45',
    title:
      'an ingest delivery of bytes that are not a publishable raster, or of a malformed message, is poison at once; a refusal leaves only its staging object',
    async run(ctx) {
      const deps = ctx.ingestDeps();
      const cases: [string, Uint8Array][] = [
        ['not-a-raster', notARaster()],
        ['no-crs', strippedTiff({ geo: false })],
        ['not-tiled', strippedTiff({ geo: true })],
      ];
      const verdicts: Json[] = [];
      for (const [label, bytes] of cases) {
        const href = await upload(ctx, `${label}.tif`, bytes);
        const v = await handleIngestDelivery(deps, { deliveryId: label, body: toIngestMessage(request(label, href)) }, SETTINGS);
        verdicts.push({ label, verdict: v.kind, code: codeOf(v) });
      }
      const bad = await handleIngestDelivery(
        deps,
        { deliveryId: 'malformed', body: '{"type":"tessera.ingest","v":1,"source":"Not OK"}' },
        SETTINGS,
      );
      verdicts.push({ label: 'malformed', verdict: bad.kind, code: codeOf(bad) });
      ctx.fact('verdicts', verdicts);
      ctx.fact('state', await ingestState(ctx));
      return ctx.record();
    },
    expected: outcome({
      counters: { 'ingest-invalid': 3, poison: 4 },
      alarms: { 'poison-message': 4 },
      facts: {
        verdicts: [
          { label: 'not-a-raster', verdict: 'poison', code: 'ARTEFACT_REFUSED' },
          { label: 'no-crs', verdict: 'poison', code: 'ARTEFACT_REFUSED' },
          { label: 'not-tiled', verdict: 'poison', code: 'ARTEFACT_REFUSED' },
          { label: 'malformed', verdict: 'poison', code: 'INVALID_INGEST_REQUEST' },
        ],
        state: {
          staging: [
            `staging/run-1/${SOURCE}/not-a-raster/data.tif`,
            `staging/run-2/${SOURCE}/no-crs/data.tif`,
            `staging/run-3/${SOURCE}/not-tiled/data.tif`,
          ],
          published: [],
          rows: [],
        },
      },
    }),
  },
  {
    id: '46',
    title: 'other bytes at an artefact’s final key are an alarm: never replaced, never registered, settled as poison',
    async run(ctx) {
      const deps = ctx.ingestDeps();
      const bytes = await parityScene();
      const key = ingestKeys.published(PUBLISHED, SOURCE, ITEM, createHash('sha256').update(bytes).digest('hex'), 'data');
      await ctx.backend.sources.putIfAbsent(key, new TextEncoder().encode('a foreign object'));
      const href = await upload(ctx, 'a.tif', bytes);
      const v = await handleIngestDelivery(deps, { deliveryId: 'm1', body: toIngestMessage(request(ITEM, href)) }, SETTINGS);
      ctx.fact('verdict', `${v.kind}:${codeOf(v)}`);
      ctx.fact('finalKeyHolds', new TextDecoder().decode(await ctx.backend.sources.get(key)));
      ctx.fact('state', await ingestState(ctx));
      return ctx.record();
    },
    expected: outcome({
      counters: { 'ingest-occupied': 1, poison: 1 },
      alarms: { 'ingest-occupied': 1, 'poison-message': 1 },
      facts: {
        verdict: 'poison:INGEST_OCCUPIED',
        finalKeyHolds: 'a foreign object',
        state: {
          staging: [`staging/run-1/${SOURCE}/${ITEM}/data.tif`],
          published: [`${PUBLISHED}${SOURCE}/${ITEM}/${sha12Sync('scene')}/data.tif`],
          rows: [],
        },
      },
    }),
  },
];
