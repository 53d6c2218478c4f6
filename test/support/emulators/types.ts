/** Endpoints of the emulators the global setup started, handed to tests with `inject('emulators')`. */
export interface AwsEndpoints {
  /** DynamoDB Local, e.g. http://127.0.0.1:8123 */
  readonly dynamodb: string;
  /** moto server (S3 + SQS), e.g. http://127.0.0.1:5123 */
  readonly moto: string;
  /**
   * A second moto server that enforces IAM on every request (docs/iam.md): the enforced-IAM suites sign
   * each function's S3 requests there as an IAM user carrying that function's deployed policy.
   */
  readonly motoIam: string;
  /** The access key of its operator (allowed everything): a test's own set-up and checks. */
  readonly motoIamAdmin: AwsKey;
  readonly region: string;
}

/** An access key pair. */
export interface AwsKey {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
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
