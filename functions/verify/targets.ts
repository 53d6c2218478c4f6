import { JsonTelemetry, systemClock } from '../../shared/app/telemetry.js';
import type { StackOutputs } from '../../shared/app/verify/stack-outputs.js';
import type { VerifyTarget } from '../../shared/app/verify/verify-stack.js';

/**
 * The one place that knows every cloud's verify wiring (as bench/lib/clouds.ts
 * is for the benchmarks): functions/local, the CLI, imports no cloud's code
 * (test/unit/architecture.test.ts), so `tessera verify` reaches the clouds
 * through here. Each cloud's SDK is loaded only for a stack on that cloud.
 */
export interface VerifyTargetOptions {
  /** GCP: the quiet period after a message went through the tile topic (functions/gcp/verify-target.ts). */
  readonly quietMs?: number | undefined;
}

export async function verifyTargetOf(stack: string, outputs: StackOutputs, options: VerifyTargetOptions = {}): Promise<VerifyTarget> {
  // The verifier's own log lines are not the report; its counters are not read.
  const telemetry = new JsonTelemetry(() => {}, { clock: systemClock });
  switch (outputs.cloud) {
    case 'aws': {
      const { awsVerifyTarget } = await import('../aws/verify-target.js');
      return awsVerifyTarget(stack, outputs, telemetry);
    }
    case 'gcp': {
      const { gcpVerifyTarget } = await import('../gcp/verify-target.js');
      return gcpVerifyTarget(stack, outputs, telemetry, { quietMs: options.quietMs });
    }
    case 'azure': {
      const { azureVerifyTarget } = await import('../azure/verify-target.js');
      return azureVerifyTarget(stack, outputs, telemetry);
    }
  }
}
