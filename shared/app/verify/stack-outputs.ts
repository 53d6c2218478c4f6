import { TesseraError } from '../../domain/errors.js';
import { DEFAULT_SOURCE_PREFIX } from '../../domain/key-layout.js';

/**
 * The stack outputs `tessera verify` reads: what infra/index.ts exports
 * (`pulumi stack output --json --show-secrets`), per cloud. Only the fields
 * the verifier uses are checked; others are kept and ignored.
 *
 * `emulator` is for testing only: endpoints of local emulators the clients
 * are pointed at instead of the cloud. infra/ never writes it, so with real
 * outputs nothing points at localhost.
 */
export type StackOutputs = AwsStackOutputs | GcpStackOutputs | AzureStackOutputs;

interface CommonOutputs {
  readonly cloud: string;
  readonly region: string;
  readonly leaseSeconds: number;
  readonly sourcePrefix: string;
}

export interface AwsStackOutputs extends CommonOutputs {
  readonly cloud: 'aws';
  readonly sourceBucket: string;
  readonly outputBucket: string;
  readonly claimsTable: string;
  readonly tileQueueUrl: string;
  readonly tileDeadLetterQueueUrl?: string | undefined;
  readonly sceneQueueUrl: string;
  readonly functionTimeoutSeconds: number;
  readonly emulator?: { readonly s3: string; readonly sqs: string; readonly dynamodb: string } | undefined;
}

export interface GcpStackOutputs extends CommonOutputs {
  readonly cloud: 'gcp';
  readonly platform: string;
  readonly project: string;
  readonly sourceBucket: string;
  readonly outputBucket: string;
  readonly claimsCollection: string;
  /** The stack's named Firestore database (infra/ gives each stack its own); absent: `(default)`. */
  readonly firestoreDatabase?: string | undefined;
  /** Topic names, `projects/<p>/topics/<t>` or the short id. */
  readonly tileTopic: string;
  readonly deadLetterTopic: string;
  readonly functionTimeoutSeconds: number;
  /**
   * Endpoints of fake-gcs-server, the Firestore emulator (host:port) and the
   * Pub/Sub emulator (host:port), used instead of Google's APIs and ADC (testing only).
   */
  readonly emulator?: { readonly gcs: string; readonly firestore: string; readonly pubsub: string } | undefined;
}

export interface AzureStackOutputs extends CommonOutputs {
  readonly cloud: 'azure';
  readonly platform: string;
  readonly storageAccount: string;
  readonly sourceContainer: string;
  readonly outputContainer: string;
  readonly claimsTable: string;
  readonly tileQueue: string;
  readonly sceneQueue: string;
  readonly functionTimeoutSeconds: number;
  /** A connection string (Azurite) used instead of the account name and DefaultAzureCredential. */
  readonly emulator?: { readonly connectionString: string } | undefined;
}

/** An outputs file that is not JSON, names no supported cloud, or lacks a field the verifier needs. */
export class StackOutputsError extends TesseraError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('INVALID_PARAMS', message, options);
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Parse the JSON text of a stack's outputs; `source` names it in errors (a file, or `pulumi stack output` of a stack). */
export function parseStackOutputs(text: string, source: string): StackOutputs {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (cause) {
    throw new StackOutputsError(`${source} is not JSON (want the output of \`pulumi stack output --json --show-secrets\`)`, { cause });
  }
  if (!isRecord(raw)) throw new StackOutputsError(`${source} is not a JSON object of stack outputs`);
  const str = (name: string, fallback?: string): string => {
    const v = raw[name] ?? fallback;
    if (typeof v !== 'string' || v === '')
      throw new StackOutputsError(`${source} has no ${name} (a non-empty string); is it the outputs of a Tessera stack after pulumi up?`);
    return v;
  };
  const num = (name: string): number => {
    const v = raw[name];
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new StackOutputsError(`${source} has no ${name} (a positive number)`);
    return v;
  };
  const cloud = str('cloud');
  switch (cloud) {
    case 'aws': {
      const emulator = raw.emulator;
      if (emulator !== undefined) {
        if (!isRecord(emulator) || !['s3', 'sqs', 'dynamodb'].every((k) => typeof emulator[k] === 'string'))
          throw new StackOutputsError(`${source}: emulator must be { s3, sqs, dynamodb } endpoint URLs (testing only)`);
      }
      return {
        cloud,
        region: str('region'),
        leaseSeconds: num('leaseSeconds'),
        functionTimeoutSeconds: num('functionTimeoutSeconds'),
        sourcePrefix: str('sourcePrefix', DEFAULT_SOURCE_PREFIX),
        sourceBucket: str('sourceBucket'),
        outputBucket: str('outputBucket'),
        claimsTable: str('claimsTable'),
        tileQueueUrl: str('tileQueueUrl'),
        tileDeadLetterQueueUrl: typeof raw.tileDeadLetterQueueUrl === 'string' ? raw.tileDeadLetterQueueUrl : undefined,
        sceneQueueUrl: str('sceneQueueUrl'),
        emulator: emulator as AwsStackOutputs['emulator'],
      };
    }
    case 'azure': {
      const emulator = raw.emulator;
      if (emulator !== undefined && !(isRecord(emulator) && typeof emulator.connectionString === 'string'))
        throw new StackOutputsError(`${source}: emulator must be { connectionString } (Azurite, testing only)`);
      const platform = str('platform');
      return {
        cloud,
        platform: platform.startsWith('azure-') ? platform : `azure-${platform}`,
        region: str('region'),
        leaseSeconds: num('leaseSeconds'),
        functionTimeoutSeconds: num('functionTimeoutSeconds'),
        sourcePrefix: str('sourcePrefix', DEFAULT_SOURCE_PREFIX),
        storageAccount: str('storageAccount'),
        sourceContainer: str('sourceContainer'),
        outputContainer: str('outputContainer'),
        claimsTable: str('claimsTable'),
        tileQueue: str('tileQueue'),
        sceneQueue: str('sceneQueue'),
        emulator: emulator as AzureStackOutputs['emulator'],
      };
    }
    case 'gcp': {
      const emulator = raw.emulator;
      if (emulator !== undefined) {
        if (!isRecord(emulator) || !['gcs', 'firestore', 'pubsub'].every((k) => typeof emulator[k] === 'string'))
          throw new StackOutputsError(`${source}: emulator must be { gcs, firestore, pubsub } endpoints (testing only)`);
      }
      return {
        cloud,
        platform: str('platform'),
        region: str('region'),
        project: str('project'),
        leaseSeconds: num('leaseSeconds'),
        functionTimeoutSeconds: num('functionTimeoutSeconds'),
        sourcePrefix: str('sourcePrefix', DEFAULT_SOURCE_PREFIX),
        sourceBucket: str('sourceBucket'),
        outputBucket: str('outputBucket'),
        claimsCollection: str('claimsCollection'),
        firestoreDatabase: typeof raw.firestoreDatabase === 'string' && raw.firestoreDatabase !== '' ? raw.firestoreDatabase : undefined,
        tileTopic: str('tileTopic'),
        deadLetterTopic: str('deadLetterTopic'),
        emulator: emulator as GcpStackOutputs['emulator'],
      };
    }
    default:
      throw new StackOutputsError(`${source}: cloud ${JSON.stringify(cloud)} is not one of aws, gcp, azure`);
  }
}
