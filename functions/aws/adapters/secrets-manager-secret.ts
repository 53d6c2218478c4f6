import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { AdapterError } from '../../../shared/domain/errors.js';
import { awsFailure, describeAwsFailure, isRetryableAws } from './aws-error.js';

/** The only part of a `SecretsManagerClient` this adapter uses. */
export type SecretsManagerSender = Pick<SecretsManagerClient, 'send'>;

const TAG = 'secret:secrets-manager';

/**
 * Why a secret could not be read. Only `unreachable` (throttling, a 5xx, no answer) may pass on a retry; the others
 * are configuration the operator has to change, so a retry would only fail the same way.
 */
export type SecretUnavailableReason = 'not-found' | 'access-denied' | 'not-a-string' | 'refused' | 'unreachable';

/** A secret the function needs could not be read; `reason` says which kind of fix it needs. */
export class SecretUnavailableError extends AdapterError {
  readonly reason: SecretUnavailableReason;
  readonly secretId: string;

  constructor(reason: SecretUnavailableReason, secretId: string, message: string, options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause, retryable: reason === 'unreachable' });
    this.reason = reason;
    this.secretId = secretId;
  }
}

/** Error codes Secrets Manager answers a caller its identity policy (or the key policy of the secret's KMS key) refuses with. */
const ACCESS_DENIED = new Set(['AccessDeniedException', 'AccessDenied']);

/**
 * One string secret in AWS Secrets Manager, read once per execution environment: the tile function's PostGIS
 * sink URL, which would otherwise sit in the Lambda environment in clear (docs/postgis.md).
 *
 * The read is `GetSecretValue` on the ARN (and version, when given) the stack put in the function's environment;
 * the tile role is the only one granted it (infra/aws/policies.ts). The value is kept for the life of the
 * instance: a rotation through `pulumi up` changes the version in the function's configuration, and Lambda starts
 * new instances for it. A failed read is not kept, so the next call reads again.
 *
 * @example
 * const url = await new SecretsManagerSecret(new SecretsManagerClient({}), process.env.TESSERA_FEATURE_SINK_SECRET).value();
 */
export class SecretsManagerSecret {
  #pending: Promise<string> | undefined;

  /**
   * @param secretId the secret's ARN (or name)
   * @param options `versionId`: read this version rather than the one labelled AWSCURRENT; `purpose`: what the
   *   value is for, named in errors (default "the secret")
   */
  constructor(
    private readonly client: SecretsManagerSender,
    readonly secretId: string,
    private readonly options: { readonly versionId?: string | undefined; readonly purpose?: string } = {},
  ) {}

  /** The secret's string, read on the first call; throws {@link SecretUnavailableError}. Never logs the value. */
  value(): Promise<string> {
    this.#pending ??= this.read().catch((error: unknown) => {
      this.#pending = undefined;
      throw error;
    });
    return this.#pending;
  }

  private async read(): Promise<string> {
    const { versionId } = this.options;
    const what = `${this.options.purpose ?? 'the secret'} (${this.secretId}${versionId === undefined ? '' : `, version ${versionId}`})`;
    let answer: { SecretString?: string | undefined; SecretBinary?: Uint8Array | undefined };
    try {
      answer = await this.client.send(
        new GetSecretValueCommand({ SecretId: this.secretId, ...(versionId === undefined ? {} : { VersionId: versionId }) }),
      );
    } catch (error) {
      throw this.failure(error, what);
    }
    if (typeof answer.SecretString !== 'string' || answer.SecretString === '') {
      throw new SecretUnavailableError(
        'not-a-string',
        this.secretId,
        `[${TAG}] ${what} holds ${answer.SecretBinary === undefined ? 'an empty string' : 'binary data'}, not the string expected; ` +
          'store it as SecretString: `pulumi config set --secret tessera:featureSinkUrl <url>` and `pulumi up`',
      );
    }
    return answer.SecretString;
  }

  private failure(error: unknown, what: string): SecretUnavailableError {
    const { code, status } = awsFailure(error);
    const detail = describeAwsFailure(error);
    const make = (reason: SecretUnavailableReason, message: string) =>
      new SecretUnavailableError(reason, this.secretId, `[${TAG}] ${message}`, { cause: error });
    if (code === 'ResourceNotFoundException') {
      return make(
        'not-found',
        `${what} does not exist (${detail}): the function was given an ARN or version of another region, account or ` +
          'deployment, or the secret was deleted; `pulumi up` creates it again from tessera:featureSinkUrl and gives the function its ARN',
      );
    }
    // 403: moto answers a refused call with an XML body the JSON client cannot parse, so its code is lost; the status is not.
    if (ACCESS_DENIED.has(code) || status === 403) {
      return make(
        'access-denied',
        `this function's role may not read ${what} (${detail}): only the tile role is granted secretsmanager:GetSecretValue ` +
          'on it (infra/aws/policies.ts, ReadFeatureSinkSecret); run `pulumi up` if the role predates the secret, and grant ' +
          "kms:Decrypt on the secret's key if it is not the AWS managed aws/secretsmanager key",
      );
    }
    if (isRetryableAws(error)) {
      return new SecretUnavailableError(
        'unreachable',
        this.secretId,
        `[${TAG}] ${what} could not be read (${detail}); the delivery is retried`,
        {
          cause: error,
        },
      );
    }
    // InvalidRequestException (the secret is scheduled for deletion), DecryptionFailure (its KMS key), and the like.
    return make(
      'refused',
      `${what} cannot be read (${detail}): a secret scheduled for deletion comes back with ` +
        '`aws secretsmanager restore-secret --secret-id <arn>`; a KMS failure needs the key enabled and usable by the tile role',
    );
  }
}
