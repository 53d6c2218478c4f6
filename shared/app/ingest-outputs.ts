import { assertNever } from '../domain/claim.js';
import { TesseraError } from '../domain/errors.js';

/**
 * The stack outputs `tessera ingest --cloud` reads (infra/index.ts exports
 * them; `pulumi stack output --json --show-secrets`): where the stack's
 * ingest function takes its requests. Only these fields are checked; the
 * others (what `tessera verify` reads) are ignored here.
 *
 * `emulator` is for testing only, as in `tessera verify` outputs: endpoints of
 * local emulators the client is pointed at instead of the cloud. infra/ never
 * writes it.
 */
export type IngestStackOutputs =
  | {
      readonly cloud: 'aws';
      readonly region: string;
      /** The ingest queue's URL (SendMessage). */
      readonly ingestQueueUrl: string;
      readonly emulator?: { readonly sqs: string } | undefined;
    }
  | {
      readonly cloud: 'gcp';
      readonly project: string;
      /** The ingest topic (publish), pushed to the ingest function by a subscription the stack owns. */
      readonly ingestTopic: string;
      /** Pub/Sub emulator `host:port`. */
      readonly emulator?: { readonly pubsub: string } | undefined;
    }
  | {
      readonly cloud: 'azure';
      /** The data storage account (the account name; the CLI authenticates with DefaultAzureCredential). */
      readonly storageAccount: string;
      readonly ingestQueue: string;
      /** An Azurite connection string used instead of the account name. */
      readonly emulator?: { readonly connectionString: string } | undefined;
    };

export type IngestCloud = IngestStackOutputs['cloud'];
export const INGEST_CLOUDS: readonly IngestCloud[] = ['aws', 'gcp', 'azure'];

/** Outputs that are not JSON, name another cloud than asked, or lack the ingest queue (a stack deployed before ingestion). */
export class IngestOutputsError extends TesseraError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('INVALID_PARAMS', message, options);
  }
}

/** Where an ingest request goes, as the enqueuer of each cloud sends it. */
export interface IngestEnqueuer {
  /** The queue or topic, for messages: `sqs:<url>`, `pubsub:<project>/<topic>`, `azure-queue:<account>/<queue>`. */
  readonly name: string;
  /**
   * Send one request body (shared/app/ingest.ts toIngestMessage). No
   * precondition is possible on a queue send, and none is needed: a request
   * delivered twice (an SDK retry of a lost answer, a user running the command
   * twice) is "already published" the second time, by the manifest.
   */
  enqueue(body: string): Promise<{ readonly messageId: string }>;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parse the JSON text of a stack's outputs for ingestion. `expected` is the
 * `--cloud` the user named: a stack of another cloud is refused, so a typo in
 * `--stack` cannot send a request to the wrong place.
 *
 * @example
 * parseIngestOutputs('{"cloud":"aws","region":"eu-west-1","ingestQueueUrl":"https://sqs..."}', 'aws', 'aws-eu-west-1')
 *   // { cloud: 'aws', region: 'eu-west-1', ingestQueueUrl: 'https://sqs...' }
 */
export function parseIngestOutputs(text: string, expected: IngestCloud, source: string): IngestStackOutputs {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (cause) {
    throw new IngestOutputsError(`${source} is not JSON (want the output of \`pulumi stack output --json --show-secrets\`)`, { cause });
  }
  if (!isRecord(raw)) throw new IngestOutputsError(`${source} is not a JSON object of stack outputs`);
  const str = (name: string): string => {
    const v = raw[name];
    if (typeof v !== 'string' || v === '')
      throw new IngestOutputsError(
        `${source} has no ${name}: is it a Tessera stack deployed with ingestion? Run \`pulumi up\` on it with this version first`,
      );
    return v;
  };
  const cloud = str('cloud');
  if (cloud !== expected)
    throw new IngestOutputsError(
      `${source} is a ${JSON.stringify(cloud)} stack, but --cloud ${expected} was given; name the stack of that cloud`,
    );
  const emulator = raw.emulator;
  const emulatorOf = <K extends string>(keys: readonly K[]): Record<K, string> | undefined => {
    if (emulator === undefined) return undefined;
    if (!isRecord(emulator) || !keys.every((k) => typeof emulator[k] === 'string'))
      throw new IngestOutputsError(`${source}: emulator must be { ${keys.join(', ')} } (testing only)`);
    return emulator as Record<K, string>;
  };
  switch (expected) {
    case 'aws':
      return { cloud: 'aws', region: str('region'), ingestQueueUrl: str('ingestQueueUrl'), emulator: emulatorOf(['sqs']) };
    case 'gcp':
      return { cloud: 'gcp', project: str('project'), ingestTopic: str('ingestTopic'), emulator: emulatorOf(['pubsub']) };
    case 'azure':
      return {
        cloud: 'azure',
        storageAccount: str('storageAccount'),
        ingestQueue: str('ingestQueue'),
        emulator: emulatorOf(['connectionString']),
      };
    default:
      return assertNever(expected, 'ingest cloud');
  }
}
