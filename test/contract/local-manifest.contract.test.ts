import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { SqliteManifestStore } from '../../functions/local/adapters/sqlite-manifest-store.js';
import { describeManifestStoreContract } from './manifest-store.contract.js';

// SQLite has neither wire nor SDK between the adapter and the file: a lost answer is the caller's
// retry of the same attempt, which the contract's same-runId case covers.
const opened: SqliteManifestStore[] = [];
afterAll(() => {
  for (const s of opened) s.close();
});

describeManifestStoreContract('SqliteManifestStore', () => {
  const store = new SqliteManifestStore(join(mkdtempSync(join(tmpdir(), 'tessera-manifest-')), 'manifest.db'));
  opened.push(store);
  return { store };
});
