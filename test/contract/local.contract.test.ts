import { mkdtempSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import { SqliteClaimStore } from '../../functions/local/adapters/sqlite-claim-store.js';
import { withClaimFaults } from '../support/claim-faults.js';
import { describeClaimStoreContract } from './claim-store.contract.js';
import { describeObjectStoreContract } from './object-store.contract.js';

const dir = mkdtempSync(join(tmpdir(), 'tessera-contract-'));

// No wire: a wrapper applies the armed write and then throws its answer away (test/support/claim-faults.ts).
describeClaimStoreContract('SqliteClaimStore', () => withClaimFaults(new SqliteClaimStore(join(dir, 'claims.db'))));
// Another tool writing into the folder (no store involved) plays the foreign writer.
describeObjectStoreContract(
  'FsObjectStore',
  () => {
    const store = new FsObjectStore(join(dir, 'objects'));
    const writeForeign = async (key: string, body: Uint8Array) => {
      await mkdir(dirname(store.pathOf(key)), { recursive: true });
      await writeFile(store.pathOf(key), body);
    };
    return { store, writeForeign };
  },
  { pinnedReadAfterOverwrite: 'source-changed', contentType: 'none' },
);
