import type { CollectionReference, DocumentData, DocumentSnapshot } from '@google-cloud/firestore';
import { AdapterError } from '../../../shared/domain/errors.js';
import {
  manifestEntryOfRecord,
  manifestIdentityDigest,
  settleExistingRow,
  validateManifestEntry,
  validateManifestIdentity,
} from '../../../shared/domain/manifest-entry.js';
import type { ManifestEntry, ManifestStore, RegisterResult } from '../../../shared/ports/manifest-store.port.js';

const TAG = 'manifest-store:firestore';

/** gRPC status codes the adapter reads (google.rpc.Code). */
const Code = { ALREADY_EXISTS: 6, ABORTED: 10 } as const;

/** How often a create that met ABORTED (contention on the document) is decided again before giving up. */
const MAX_ATTEMPTS = 8;

/** The manifest document. `identity` is {@link manifestIdentityDigest}: the field `find` queries on. */
interface ManifestDoc {
  identity: string;
  source: string;
  external_id: string;
  checksum: string;
  object_key: string;
  bytes: number;
  run_id: string;
  published_at: string;
}

const grpcCode = (error: unknown): number | undefined => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
};

/**
 * The ingest manifest in a Firestore (native mode) collection, over gRPC.
 *
 * One document per identity, id `<sha256(source, externalId)>-<checksum>`: a
 * document id may not hold `/` and a STAC id may, so ids are digests and the
 * plain values are fields.
 * ```
 * register  create()                           -> registered
 *           ALREADY_EXISTS / ABORTED: read     -> same runId: registered (our create, answer lost, resent)
 *                                               -> other runId: already-published
 *                                               (absent after ABORTED: create again)
 * find      where identity == digest           (one equality filter: the automatic single-field index serves it)
 * ```
 * `create()` is a Commit with `currentDocument.exists = false`: the emulator and
 * Firestore both refuse it on an existing document, so a retried create cannot
 * overwrite (the wire guard checks every Commit carries that precondition).
 *
 * @example
 * const manifest = new FirestoreManifestStore(db.collection(config.manifestTable));
 */
export class FirestoreManifestStore implements ManifestStore {
  readonly name = 'firestore';

  /** @param collection the manifest collection (infra/ names it in the stack's database). */
  constructor(private readonly collection: CollectionReference) {}

  async find(source: string, externalId: string): Promise<readonly ManifestEntry[]> {
    validateManifestIdentity(TAG, source, externalId);
    try {
      const snap = await this.collection.where('identity', '==', manifestIdentityDigest(source, externalId)).get();
      return snap.docs.map((d) => toEntry(d.id, d.data()));
    } catch (error) {
      throw error instanceof AdapterError ? error : this.failure(`lookup of ${source}/${externalId}`, error);
    }
  }

  async get(source: string, externalId: string, checksum: string): Promise<ManifestEntry | undefined> {
    validateManifestIdentity(TAG, source, externalId, checksum);
    let snap: DocumentSnapshot;
    try {
      snap = await this.collection.doc(docId(source, externalId, checksum)).get();
    } catch (error) {
      throw this.failure(`read of ${source}/${externalId}@${checksum.slice(0, 12)}`, error);
    }
    const data = snap.data();
    return data ? toEntry(snap.id, data) : undefined;
  }

  async register(entry: ManifestEntry): Promise<RegisterResult> {
    validateManifestEntry(TAG, entry);
    const doc: ManifestDoc = {
      identity: manifestIdentityDigest(entry.source, entry.externalId),
      source: entry.source,
      external_id: entry.externalId,
      checksum: entry.checksum,
      object_key: entry.key,
      bytes: entry.bytes,
      run_id: entry.runId,
      published_at: entry.publishedAt,
    };
    const ref = this.collection.doc(docId(entry.source, entry.externalId, entry.checksum));
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      try {
        await ref.create(doc);
        return { kind: 'registered', entry };
      } catch (error) {
        // ALREADY_EXISTS: a row holds the identity (maybe our own create, resent by the SDK after a lost answer).
        // ABORTED: contention on the document; read and decide as for ALREADY_EXISTS. The rest is unexpected.
        const code = grpcCode(error);
        if (code !== Code.ALREADY_EXISTS && code !== Code.ABORTED)
          throw this.failure(`registration of ${entry.source}/${entry.externalId}`, error);
      }
      const existing = await this.get(entry.source, entry.externalId, entry.checksum);
      if (existing) return settleExistingRow(entry, existing);
    }
    throw new AdapterError(
      `[${TAG}] registration of ${entry.source}/${entry.externalId} met contention ${MAX_ATTEMPTS} times in a row; retry`,
      {
        retryable: true,
      },
    );
  }

  async *list(): AsyncIterable<ManifestEntry> {
    try {
      for await (const snap of this.collection.stream() as AsyncIterable<DocumentSnapshot>) {
        const data = snap.data();
        if (data) yield toEntry(snap.id, data);
      }
    } catch (error) {
      throw error instanceof AdapterError ? error : this.failure(`listing of collection ${this.collection.path}`, error);
    }
  }

  private failure(what: string, error: unknown): AdapterError {
    const code = grpcCode(error);
    // DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE (or no gRPC answer): a retry may succeed.
    const retryable = code === undefined || code === 4 || code === 8 || code === Code.ABORTED || code === 13 || code === 14;
    return new AdapterError(
      `[${TAG}] ${what} in ${this.collection.path} failed${code === undefined ? '' : ` with gRPC code ${code}`}: ` +
        `${error instanceof Error ? error.message : String(error)}; ` +
        (retryable
          ? 'a retry may succeed'
          : 'check that Firestore (native mode) is enabled and the service account has roles/datastore.user'),
      { cause: error, retryable },
    );
  }
}

function docId(source: string, externalId: string, checksum: string): string {
  return `${manifestIdentityDigest(source, externalId)}-${checksum}`;
}

function toEntry(id: string, data: DocumentData): ManifestEntry {
  const entry = manifestEntryOfRecord(data);
  if (!entry) {
    throw new AdapterError(
      `[${TAG}] document ${id} is not a Tessera manifest row; something else wrote to the manifest collection: give it a collection of its own`,
    );
  }
  return entry;
}
