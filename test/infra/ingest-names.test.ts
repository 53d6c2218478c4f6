import { describe, expect, it } from 'vitest';
import { MANIFEST_PARTITION_KEY, MANIFEST_SORT_KEY } from '../../functions/aws/adapters/dynamodb-manifest-store.js';
import { INGEST_QUEUE } from '../../functions/azure/compose.js';
import { RECONCILE_SCHEDULE as AZURE_RECONCILE_SCHEDULE } from '../../functions/azure/handlers/ingest.handler.js';
import { GCP_FUNCTIONS } from '../../functions/gcp/handlers/index.js';
import { RECONCILE_SCHEDULE as AWS_RECONCILE_SCHEDULE } from '../../infra/aws/tiling-stack.js';
import { DEFAULT_STAGING_RETENTION_DAYS, STAGING_PREFIX } from '../../infra/common/config.js';
import { AZURE_QUEUES, GCP_ENTRY_POINTS } from '../../infra/common/packaging.js';
import { RECONCILE_SCHEDULE as GCP_RECONCILE_SCHEDULE } from '../../infra/gcp/tiling-stack.js';
import { DEFAULT_PUBLISHED_PREFIX, DEFAULT_STAGING_PREFIX } from '../../shared/app/ingest.js';
import { DEFAULT_STAGING_RETENTION_MS } from '../../shared/app/ingest-reconcile.js';
import { runStack } from './harness.js';

/**
 * Ingestion's names are written twice, once where infra/ deploys a resource and
 * once where the code uses it (infra/ never imports functions/ code): these
 * keep each pair equal, so a rename on one side fails here, not in a deployed stack.
 */
describe('ingestion names shared by infra/ and the code', () => {
  it('stages under the prefix the lifecycle rules expire, for as long as the local sweep keeps it', () => {
    expect(STAGING_PREFIX).toBe(DEFAULT_STAGING_PREFIX);
    expect(DEFAULT_STAGING_RETENTION_DAYS * 86_400_000).toBe(DEFAULT_STAGING_RETENTION_MS);
    // Staging sits outside the default scene prefix the trigger watches, and vice versa.
    expect(DEFAULT_PUBLISHED_PREFIX.startsWith(STAGING_PREFIX) || STAGING_PREFIX.startsWith(DEFAULT_PUBLISHED_PREFIX)).toBe(false);
  });

  it('keys the DynamoDB manifest table as the adapter writes it', async () => {
    const run = await runStack('aws-eu-west-1', { 'tessera:cloud': 'aws', 'tessera:region': 'eu-west-1', 'aws:region': 'eu-west-1' });
    expect(run.one('aws:dynamodb/table:Table', '-manifest').inputs).toMatchObject({
      hashKey: MANIFEST_PARTITION_KEY,
      rangeKey: MANIFEST_SORT_KEY,
    });
  });

  it('listens on the Azure ingest queue infra/ creates, and registers the GCP entry points infra/ deploys', () => {
    expect(INGEST_QUEUE).toBe(AZURE_QUEUES.ingest);
    expect(GCP_FUNCTIONS).toEqual(GCP_ENTRY_POINTS);
  });

  it('reconciles weekly on every cloud', () => {
    expect(AWS_RECONCILE_SCHEDULE).toBe('rate(7 days)');
    // Cron (GCP) and NCRONTAB with seconds (Azure): Mondays 03:00 UTC, the same moment.
    expect(GCP_RECONCILE_SCHEDULE).toBe('0 3 * * 1');
    expect(AZURE_RECONCILE_SCHEDULE).toBe(`0 ${GCP_RECONCILE_SCHEDULE}`);
  });
});
