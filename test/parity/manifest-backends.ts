import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDbManifestStore } from '../../functions/aws/adapters/dynamodb-manifest-store.js';
import { AzureTableManifestStore } from '../../functions/azure/adapters/azure-table-manifest-store.js';
import { azureClients } from '../../functions/azure/compose.js';
import { FirestoreManifestStore } from '../../functions/gcp/adapters/firestore-manifest-store.js';
import { SqliteManifestStore } from '../../functions/local/adapters/sqlite-manifest-store.js';
import type { ManifestStore } from '../../shared/ports/manifest-store.port.js';
import { dynamoDbClient, freshManifestTable } from '../aws/clients.js';
import { firestoreClient } from '../gcp/clients.js';
import type { EmulatorEndpoints } from '../support/emulators/types.js';
import { registerResource } from '../support/iam/resources.js';

/** The backend names, as in backends.ts (kept apart to avoid an import cycle). */
type Name = 'local' | 'aws' | 'gcp' | 'azure';

/**
 * Each backend's own ingest manifest in a fresh namespace (the ingest scenarios,
 * test/parity/scenarios-ingest.ts): SQLite in a temporary folder, a DynamoDB
 * Local table, a Firestore emulator collection, an Azurite table. The adapters
 * are the ones the functions run (C's, issue 16 section 2).
 */
export async function parityManifest(
  name: Name,
  endpoints: EmulatorEndpoints,
  ns: string,
): Promise<{ readonly store: ManifestStore; close(): Promise<void> }> {
  switch (name) {
    case 'local': {
      const dir = mkdtempSync(join(tmpdir(), `tessera-${ns}-manifest-`));
      const store = new SqliteManifestStore(join(dir, 'manifest.db'));
      return {
        store,
        close: async () => {
          store.close();
          await rm(dir, { recursive: true, force: true });
        },
      };
    }
    case 'aws': {
      const e = endpoints.aws;
      if (!e) throw new Error('the AWS emulators are not running');
      const ddb = dynamoDbClient(e);
      const table = await freshManifestTable(ddb, `${ns}-manifest`);
      registerResource(table, 'manifestTable'); // the access recorder's name for it (docs/iam.md)
      return { store: new DynamoDbManifestStore(ddb, table), close: async () => ddb.destroy() };
    }
    case 'gcp': {
      const e = endpoints.gcp;
      if (!e) throw new Error('the GCP emulators are not running');
      const firestore = firestoreClient(e);
      registerResource(`${ns}-manifest`, 'manifestTable');
      return { store: new FirestoreManifestStore(firestore.collection(`${ns}-manifest`)), close: () => firestore.terminate() };
    }
    case 'azure': {
      const e = endpoints.azure;
      if (!e) throw new Error('Azurite is not running');
      const table = azureClients(e.connectionString).table(`${ns}manifest`);
      registerResource(`${ns}manifest`, 'manifestTable');
      await table.createTable();
      return { store: new AzureTableManifestStore(table), close: async () => {} };
    }
    default: {
      const never: never = name;
      throw new Error(`unknown backend ${String(never)}`);
    }
  }
}
