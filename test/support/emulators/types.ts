/** Endpoints of the emulators the global setup started, handed to tests with `inject('emulators')`. */
export interface AwsEndpoints {
  /** DynamoDB Local, e.g. http://127.0.0.1:8123 */
  readonly dynamodb: string;
  /** moto server (S3 + SQS), e.g. http://127.0.0.1:5123 */
  readonly moto: string;
  readonly region: string;
}

export interface GcpEndpoints {
  /** fake-gcs-server, e.g. http://127.0.0.1:4443 */
  readonly gcs: string;
  /** Firestore emulator host:port */
  readonly firestore: string;
  readonly projectId: string;
  /** Pub/Sub emulator host:port, where one runs. */
  readonly pubsub?: string | undefined;
}

export interface AzureEndpoints {
  readonly blob: string;
  readonly table: string;
  readonly queue: string;
  readonly connectionString: string;
}

/** A throwaway PostgreSQL 15 + PostGIS 3 (test/support/emulators/postgres.ts). */
export interface PostgresEndpoints {
  /** postgres://postgres@127.0.0.1:<port>/tessera, trust auth, the postgis extension created. */
  readonly url: string;
  readonly port: number;
}

export interface EmulatorEndpoints {
  aws?: AwsEndpoints;
  gcp?: GcpEndpoints;
  azure?: AzureEndpoints;
  postgres?: PostgresEndpoints;
}
