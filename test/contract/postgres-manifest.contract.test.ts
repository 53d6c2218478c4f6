import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { PostgresManifestStore } from '../../functions/postgres/postgres-manifest-store.js';
import { requireEndpoints } from '../support/global-setup.js';
import { PgFaultProxy } from '../support/pg-fault-proxy.js';
import type { ManifestStoreFaults } from './manifest-store.contract.js';
import { describeManifestStoreContract } from './manifest-store.contract.js';
import { unconditionalSql } from './precondition-guard.js';

// The manifest contract against a real PostgreSQL 15 (test/support/emulators/postgres.ts), through a TCP proxy
// that can cut a session right after its COMMIT reached the server: `pg` never resends, so the register fails
// retryable and the caller's retry of the same attempt must answer `registered`.
const postgres = requireEndpoints(inject('emulators'), 'postgres');
const pools: pg.Pool[] = [];
const proxies: PgFaultProxy[] = [];
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await Promise.all(proxies.map((p) => p.stop()));
});

describeManifestStoreContract('PostgresManifestStore', async () => {
  const proxy = await PgFaultProxy.start({ host: '127.0.0.1', port: postgres.port });
  proxies.push(proxy);
  // 20 connections: the contract's 16 concurrent registrations each hold one for their transaction.
  const pool = new pg.Pool({ connectionString: proxy.urlFor(postgres.url), max: 20 });
  pool.on('error', () => undefined); // a session the proxy cut is reported here too; the call itself already failed
  pools.push(pool);
  const store = new PostgresManifestStore(pool);
  await store.migrate();
  const faults: ManifestStoreFaults = {
    lostAnswer: 'caller-resends',
    loseNextRegisterAnswer: (runId) => proxy.loseNextCommitAnswer(runId),
  };
  return { store, faults };
});

describe('PostgresManifestStore schema and SQL guard', () => {
  it('migrate() is idempotent and safe to run from 8 pools at once', async () => {
    const many = Array.from({ length: 8 }, () => new pg.Pool({ connectionString: postgres.url, max: 1 }));
    pools.push(...many);
    await Promise.all(many.map((p) => new PostgresManifestStore(p).migrate()));
    const r = await (many[0] as pg.Pool).query(
      `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'ingest_manifest_identity'`,
    );
    expect(r.rows).toEqual([{ def: 'UNIQUE (source, external_id, checksum)' }]);
  });

  it('every manifest write the contract sent was INSERT ... ON CONFLICT DO NOTHING; none updated or deleted', () => {
    const statements = proxies.flatMap((p) => p.statements);
    expect(statements.filter((s) => /^INSERT INTO ingest_manifest/i.test(s)).length).toBeGreaterThan(30);
    expect(unconditionalSql(statements)).toEqual([]);
  });

  it('the SQL guard can fail: it names a blind INSERT and an UPDATE', () => {
    expect(
      unconditionalSql([
        'INSERT INTO ingest_manifest (source) VALUES ($1)',
        "UPDATE ingest_manifest SET run_id = 'x'",
        'INSERT INTO ingest_manifest (source) VALUES ($1) ON CONFLICT ON CONSTRAINT ingest_manifest_identity DO NOTHING',
      ]).map((f) => f.why),
    ).toEqual(['INSERT without ON CONFLICT ... DO NOTHING', 'an UPDATE or DELETE of a create-only table']);
  });
});
