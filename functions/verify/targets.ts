import { JsonTelemetry, systemClock } from '../../shared/app/telemetry.js';
import type { StackOutputs } from '../../shared/app/verify/stack-outputs.js';
import type { VerifyTarget } from '../../shared/app/verify/verify-stack.js';

/**
 * The one place that knows every cloud's verify wiring (as bench/lib/clouds.ts
 * is for the benchmarks): functions/local, the CLI, imports no cloud's code
 * (test/unit/architecture.test.ts), so `tessera verify` reaches the clouds
 * through here. Each cloud's SDK is loaded only for a stack on that cloud.
 */
export async function verifyTargetOf(stack: string, outputs: StackOutputs): Promise<VerifyTarget> {
  // The verifier's own log lines are not the report; its counters are not read.
  const telemetry = new JsonTelemetry(() => {}, { clock: systemClock });
  switch (outputs.cloud) {
    case 'aws': {
      const { awsVerifyTarget } = await import('../aws/verify-target.js');
      return awsVerifyTarget(stack, outputs, telemetry);
    }
    case 'azure': {
      const { azureVerifyTarget } = await import('../azure/verify-target.js');
      return azureVerifyTarget(stack, outputs, telemetry);
    }
  }
}
