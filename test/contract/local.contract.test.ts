import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import { SqliteClaimStore } from '../../functions/local/adapters/sqlite-claim-store.js';
import { describeClaimStoreContract } from './claim-store.contract.js';
import { describeObjectStoreContract } from './object-store.contract.js';

const dir = mkdtempSync(join(tmpdir(), 'tessera-contract-'));

describeClaimStoreContract('SqliteClaimStore', () => new SqliteClaimStore(join(dir, 'claims.db')));
describeObjectStoreContract('FsObjectStore', () => new FsObjectStore(join(dir, 'objects')));
