/**
 * The three sane answers to "the output already exists" in a backfill. There
 * is no fourth: an unconditional overwrite does not exist anywhere in Tessera.
 *
 * - `skip`: same job keys; committed jobs are rejected at the claim, gaps are filled.
 * - `new-key`: the caller bumps `params.version`; every key changes, new outputs land beside the old ones.
 * - `overwrite`: repair writes conditional on the version the operator saw; fails if anything else touched the object.
 */
export type BackfillPolicy = 'skip' | 'new-key' | 'overwrite';

export const BACKFILL_POLICIES: readonly BackfillPolicy[] = ['skip', 'new-key', 'overwrite'];

export function isBackfillPolicy(value: unknown): value is BackfillPolicy {
  return typeof value === 'string' && (BACKFILL_POLICIES as readonly string[]).includes(value);
}
