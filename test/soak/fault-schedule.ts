import type { BackendName } from '../parity/backends.js';

/**
 * Every kind of fault the soak can inject (`--faults all` is all of them), and when each is drawn.
 * docs/soak.md describes each one; this file decides only how often and where.
 */
export const FAULT_KINDS = [
  // Per delivery of a tile job (some also of a fan-out chunk): the worker and its ports.
  'crash-before-claim',
  'crash-after-claim',
  'crash-after-write',
  'crash-after-feature',
  'crash-after-commit',
  'zombie',
  'slow-tile',
  'lost-claim-answer',
  'lost-commit-answer',
  'lost-write-answer',
  'lost-feature-answer',
  'throttled-claim',
  'throttled-commit',
  'throttled-write',
  'feature-connection-lost',
  'clock-skew',
  // Per delivery of a fan-out chunk.
  'crash-mid-chunk',
  // Per scene: its messages and the events around it.
  'duplicate',
  'duplicate-scene-event',
  'duplicate-chunk',
  'poison',
  'source-overwritten',
  'backfill-skip',
  'backfill-new-key',
  'backfill-overwrite',
  // Per STAC Item: its events and its band objects.
  'duplicate-item-event',
  'band-reupload',
  'band-reupload-expired',
  // Per ingest request.
  'duplicate-ingest',
  'ingest-crash',
  'ingest-race',
  'reconcile-race',
  // Per remote STAC Item.
  'remote-transient',
  'remote-hostile-item',
  // Per batch event of a feature stream (test/soak/soak-feature-batches.ts): its objects and their events.
  'duplicate-batch-event',
  'poison-batch',
  // Per delivery of a batch event: the stream function and its ports.
  'batch-crash-after-claim',
  'batch-crash-after-insert',
  'batch-zombie',
  'batch-lost-insert-answer',
  'batch-connection-lost',
  'batch-lost-commit-answer',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * What a kind rides on. `delivery`: one delivery of a tile job or chunk; `batch-delivery`: one delivery of a
 * feature batch event; the rest: one event of the plan, of the kind of event it needs (a single-file or chunked
 * scene, a STAC Item, an ingest, a remote Item, a batch event of a feature stream).
 */
export type FaultScope = 'delivery' | 'batch-delivery' | 'scene' | 'chunked' | 'stac' | 'ingest' | 'remote' | 'batch';

/** The scopes whose kinds ride deliveries (forced on deliveries), not events of the plan. */
const DELIVERY_SCOPES: readonly FaultScope[] = ['delivery', 'batch-delivery'];

export const FAULT_SCOPE: Readonly<Record<FaultKind, FaultScope>> = {
  'crash-before-claim': 'delivery',
  'crash-after-claim': 'delivery',
  'crash-after-write': 'delivery',
  'crash-after-feature': 'delivery',
  'crash-after-commit': 'delivery',
  zombie: 'delivery',
  'slow-tile': 'delivery',
  'lost-claim-answer': 'delivery',
  'lost-commit-answer': 'delivery',
  'lost-write-answer': 'delivery',
  'lost-feature-answer': 'delivery',
  'throttled-claim': 'delivery',
  'throttled-commit': 'delivery',
  'throttled-write': 'delivery',
  'feature-connection-lost': 'delivery',
  'clock-skew': 'delivery',
  'crash-mid-chunk': 'delivery',
  duplicate: 'scene',
  'duplicate-scene-event': 'scene',
  'duplicate-chunk': 'chunked',
  poison: 'scene',
  'source-overwritten': 'scene',
  'backfill-skip': 'scene',
  'backfill-new-key': 'scene',
  'backfill-overwrite': 'scene',
  'duplicate-item-event': 'stac',
  'band-reupload': 'stac',
  'band-reupload-expired': 'stac',
  'duplicate-ingest': 'ingest',
  'ingest-crash': 'ingest',
  'ingest-race': 'ingest',
  'reconcile-race': 'ingest',
  'remote-transient': 'remote',
  'remote-hostile-item': 'remote',
  'duplicate-batch-event': 'batch',
  'poison-batch': 'batch',
  'batch-crash-after-claim': 'batch-delivery',
  'batch-crash-after-insert': 'batch-delivery',
  'batch-zombie': 'batch-delivery',
  'batch-lost-insert-answer': 'batch-delivery',
  'batch-connection-lost': 'batch-delivery',
  'batch-lost-commit-answer': 'batch-delivery',
};

/**
 * The kinds that can happen on `backend` among those enabled. Clock skew is not a local fault: every local
 * worker runs on one machine's clock, and the local compose wires no skew margin.
 */
export function applicableKinds(backend: BackendName, enabled: readonly FaultKind[]): FaultKind[] {
  return FAULT_KINDS.filter((k) => enabled.includes(k) && !(backend === 'local' && k === 'clock-skew'));
}

/**
 * Every applicable kind fires in every soak, however short (as Temporal's fault injection requires of
 * its schedule): the random draws make most of them, and this schedule makes the rest at fixed points of
 * the seed's plan.
 *
 * - Event kinds (everything but `delivery`) are forced onto the first events of the run, in an order
 *   shuffled by the seed: event i carries `forcedEvent(i)`, a few kinds of one scope that can ride one
 *   event together (never two backfill policies, never both band re-uploads), and is made of the kind of
 *   event they need. A short run makes few events (a chunked scene alone is a few dozen deliveries), so
 *   the kinds share them.
 * - Delivery kinds are forced from delivery {@link FORCE_DELIVERIES_FROM} on: a delivery the draw left
 *   without a fault takes the first kind, in the seed's order, that has not fired yet and that this
 *   delivery can carry. A kind stays pending until it has really taken effect (a lost answer whose
 *   delivery stopped at its claim before any write did not), so it is tried again on a later delivery.
 *   Batch delivery kinds are forced the same way on deliveries of batch events, and while one is pending
 *   the plan makes a batch event whenever no batch message is out (test/soak/soak-feature-batches.ts).
 *
 * The run judges the schedule at the end: a kind that never fired is an anomaly named in the report.
 */
export class FaultSchedule {
  readonly kinds: readonly FaultKind[];
  readonly #events: FaultKind[][];
  readonly #deliveryOrder: FaultKind[];
  readonly #batchDeliveryOrder: FaultKind[];
  readonly #fired = new Map<FaultKind, number>();

  constructor(kinds: readonly FaultKind[], rnd: () => number) {
    this.kinds = kinds;
    this.#events = groups(
      shuffle(
        kinds.filter((k) => !DELIVERY_SCOPES.includes(FAULT_SCOPE[k])),
        rnd,
      ),
    );
    this.#deliveryOrder = shuffle(
      kinds.filter((k) => FAULT_SCOPE[k] === 'delivery'),
      rnd,
    );
    this.#batchDeliveryOrder = shuffle(
      kinds.filter((k) => FAULT_SCOPE[k] === 'batch-delivery'),
      rnd,
    );
  }

  /** The kinds event number `index` (0-based) of the run must carry (all of one scope; none past the schedule). */
  forcedEvent(index: number): readonly FaultKind[] {
    return this.#events[index] ?? [];
  }

  /** The delivery kinds not fired yet, in the order they are forced. */
  pendingDeliveryKinds(): readonly FaultKind[] {
    return this.#deliveryOrder.filter((k) => !this.#fired.has(k));
  }

  /** The batch delivery kinds not fired yet, in the order they are forced on deliveries of batch events. */
  pendingBatchDeliveryKinds(): readonly FaultKind[] {
    return this.#batchDeliveryOrder.filter((k) => !this.#fired.has(k));
  }

  /** A fault of `kind` took effect. */
  fired(kind: FaultKind, n = 1): void {
    this.#fired.set(kind, (this.#fired.get(kind) ?? 0) + n);
  }

  count(kind: FaultKind): number {
    return this.#fired.get(kind) ?? 0;
  }

  /** The kinds scheduled for this run that never took effect. */
  unfired(): FaultKind[] {
    return this.kinds.filter((k) => !this.#fired.has(k));
  }
}

/** Deliveries before the schedule starts forcing delivery kinds: the first scenes' messages are on the queue by then. */
export const FORCE_DELIVERIES_FROM = 8;

/** Kinds that cannot ride one event together: one backfill per scene, one re-upload of a band per Item. */
const EXCLUSIVE: readonly (readonly FaultKind[])[] = [
  ['backfill-skip', 'backfill-new-key', 'backfill-overwrite'],
  ['band-reupload', 'band-reupload-expired'],
];
/** Kinds one event carries at most. */
const PER_EVENT = 3;

/** The kinds, in order, cut into events: each takes the next kind and up to two later ones of its scope it can carry. */
function groups(kinds: readonly FaultKind[]): FaultKind[][] {
  const left = [...kinds];
  const out: FaultKind[][] = [];
  while (left.length > 0) {
    const group = [left.shift() as FaultKind];
    for (let i = 0; i < left.length && group.length < PER_EVENT; ) {
      const k = left[i] as FaultKind;
      const clash = EXCLUSIVE.some((set) => set.includes(k) && group.some((g) => set.includes(g)));
      if (FAULT_SCOPE[k] === FAULT_SCOPE[group[0] as FaultKind] && !clash) {
        group.push(k);
        left.splice(i, 1);
      } else i++;
    }
    out.push(group);
  }
  return out;
}

function shuffle<T>(items: readonly T[], rnd: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
